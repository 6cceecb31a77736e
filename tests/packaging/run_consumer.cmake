# Builds and runs a consumer project.
# -DMODE=find_package|find_package_backends|find_package_prometheus|add_subdirectory -DSOURCE=... -DWORK=...
# -DBUILD=... (the build tree that runs the test; find_package_backends installs it)
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
set(poison "-DPOISON_DIR=${SOURCE}/tests/packaging/poison")
function(run)
  execute_process(COMMAND ${ARGV} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGV}\n${out}")
  endif()
endfunction()
if(MODE STREQUAL "find_package")
  # Install a memory-only configuration (no libpqxx or hiredis needed), then consume it.
  run(${CMAKE_COMMAND} -S "${SOURCE}" -B "${WORK}/lib" -G Ninja -DCMAKE_BUILD_TYPE=Release
      -DSTATEPACT_BUILD_TESTS=OFF -DSTATEPACT_BUILD_EXAMPLES=OFF -DSTATEPACT_BUILD_BENCH=OFF
      -DSTATEPACT_WITH_POSTGRES=OFF -DSTATEPACT_WITH_REDIS=OFF -DCMAKE_INSTALL_PREFIX=${WORK}/prefix)
  run(${CMAKE_COMMAND} --build "${WORK}/lib" --target install)
  run(${CMAKE_COMMAND} -S "${SOURCE}/tests/packaging/consumer" -B "${WORK}/app" -G Ninja
      -DCMAKE_PREFIX_PATH=${WORK}/prefix ${poison})
elseif(MODE STREQUAL "find_package_backends")
  # Install this build tree (both backends, already built: no second compile of the library), then
  # link the backends from the prefix: libpqxx and hiredis are found through the paths the install
  # recorded, never through their headers.
  run(${CMAKE_COMMAND} --install "${BUILD}" --prefix "${WORK}/prefix")
  # The operator's tool is installed with the library.
  run("${WORK}/prefix/bin/statepactctl" --help)
  run(${CMAKE_COMMAND} -S "${SOURCE}/tests/packaging/backends_consumer" -B "${WORK}/app" -G Ninja
      -DCMAKE_PREFIX_PATH=${WORK}/prefix ${poison})
elseif(MODE STREQUAL "find_package_prometheus")
  # Install memory-only with statepact::prometheus, then link it from the prefix.
  run(${CMAKE_COMMAND} -S "${SOURCE}" -B "${WORK}/lib" -G Ninja -DCMAKE_BUILD_TYPE=Release
      -DSTATEPACT_BUILD_TESTS=OFF -DSTATEPACT_BUILD_EXAMPLES=OFF -DSTATEPACT_BUILD_BENCH=OFF
      -DSTATEPACT_WITH_POSTGRES=OFF -DSTATEPACT_WITH_REDIS=OFF -DSTATEPACT_WITH_PROMETHEUS=ON
      -DCMAKE_INSTALL_PREFIX=${WORK}/prefix)
  run(${CMAKE_COMMAND} --build "${WORK}/lib" --target install)
  run(${CMAKE_COMMAND} -S "${SOURCE}/tests/packaging/prometheus_consumer" -B "${WORK}/app" -G Ninja
      -DCMAKE_PREFIX_PATH=${WORK}/prefix ${poison})
else()
  run(${CMAKE_COMMAND} -S "${SOURCE}/tests/packaging/subdir_consumer" -B "${WORK}/app" -G Ninja
      -DSTATEPACT_SOURCE_DIR=${SOURCE} -DSTATEPACT_WITH_POSTGRES=OFF -DSTATEPACT_WITH_REDIS=OFF ${poison})
endif()
run(${CMAKE_COMMAND} --build "${WORK}/app")
run("${WORK}/app/consumer")
message(STATUS "${MODE} consumer built and ran")
