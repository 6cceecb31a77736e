# The PostgreSQL backend's tests: they need a server, found through STATEPACT_TEST_POSTGRES_URL
# (the test script starts one with scripts/servers/postgres.sh).
add_executable(statepact_conformance_postgres
  conformance/postgres_leases_test.cpp
  conformance/postgres_hold_test.cpp
  conformance/postgres_sessions_test.cpp
  conformance/postgres_safety_test.cpp
  conformance/postgres_inspect_test.cpp)
target_link_libraries(statepact_conformance_postgres PRIVATE statepact::postgres
  Catch2::Catch2WithMain)
statepact_test_target(statepact_conformance_postgres)
catch_discover_tests(statepact_conformance_postgres TEST_PREFIX "postgres: " EXTRA_ARGS -w NoTests)

# Integration tests against the same server: connection loss, unknown commits, literal names,
# and a restart of a private second server.
find_package(PkgConfig REQUIRED)
pkg_check_modules(STATEPACT_TEST_PQXX REQUIRED IMPORTED_TARGET libpqxx)
add_executable(statepact_integration_postgres
  integration/postgres_clock_step_test.cpp
  integration/postgres_deadline_test.cpp
  integration/postgres_errors_test.cpp
  integration/postgres_idempotency_purge_test.cpp
  integration/postgres_isolation_test.cpp
  integration/postgres_sessions_bound_test.cpp
  integration/postgres_session_begin_test.cpp
  integration/postgres_migration_test.cpp
  integration/postgres_names_test.cpp
  integration/postgres_recovery_test.cpp
  integration/postgres_restart_test.cpp)
target_link_libraries(statepact_integration_postgres PRIVATE statepact::postgres
  PkgConfig::STATEPACT_TEST_PQXX Catch2::Catch2WithMain)
target_compile_definitions(statepact_integration_postgres PRIVATE
  STATEPACT_SOURCE_DIR="${PROJECT_SOURCE_DIR}" STATEPACT_BINARY_DIR="${PROJECT_BINARY_DIR}")
statepact_test_target(statepact_integration_postgres)
catch_discover_tests(statepact_integration_postgres TEST_PREFIX "postgres: " EXTRA_ARGS -w NoTests
  PROPERTIES ENVIRONMENT "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/integration/lsan.supp")

# libpqxx is not built with AddressSanitizer, so a use of a freed connection inside it goes unseen
# there; valgrind sees it. The connection-loss tests run under valgrind in builds without a
# sanitizer (a transaction outliving its dropped connection crashed client processes).
find_program(STATEPACT_VALGRIND valgrind)
if(STATEPACT_VALGRIND AND NOT CMAKE_CXX_FLAGS MATCHES "sanitize")
  # One entry per test name, each with -w NoTests: a renamed test fails its entry instead of
  # leaving a filter that matches nothing and passes.
  foreach(name "terminated connections are replaced*" "a commit cut off after it was sent*")
    string(REGEX REPLACE "[*]$" "" short "${name}")
    add_test(NAME "postgres: ${short} (under valgrind)"
      COMMAND ${STATEPACT_VALGRIND} --error-exitcode=9 --leak-check=no -q
        $<TARGET_FILE:statepact_integration_postgres> -w NoTests "${name}")
  endforeach()
endif()
