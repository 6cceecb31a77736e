# Multi-process lease races: one contender executable, linked with every compiled server backend,
# started several times at once by each backend's integration tests.
add_executable(statepact_lease_contender integration/lease_race_contender.cpp)
statepact_test_target(statepact_lease_contender)
foreach(backend postgres redis)
  if(TARGET statepact_integration_${backend})
    string(TOUPPER ${backend} upper)
    target_link_libraries(statepact_lease_contender PRIVATE statepact::${backend})
    target_compile_definitions(statepact_lease_contender PRIVATE STATEPACT_HAVE_${upper})
    target_sources(statepact_integration_${backend} PRIVATE
      integration/${backend}_lease_race_test.cpp)
    target_compile_definitions(statepact_integration_${backend} PRIVATE
      STATEPACT_LEASE_CONTENDER="$<TARGET_FILE:statepact_lease_contender>")
    add_dependencies(statepact_integration_${backend} statepact_lease_contender)
  endif()
endforeach()
