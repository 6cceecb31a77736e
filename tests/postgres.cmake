# The PostgreSQL backend's tests: they need a server, found through STATEPACT_TEST_POSTGRES_URL
# (the test script starts one with scripts/servers/postgres.sh).
add_executable(statepact_conformance_postgres
  conformance/postgres_leases_test.cpp
  conformance/postgres_hold_test.cpp
  conformance/postgres_sessions_test.cpp)
target_link_libraries(statepact_conformance_postgres PRIVATE statepact::postgres
  Catch2::Catch2WithMain)
statepact_test_target(statepact_conformance_postgres)
catch_discover_tests(statepact_conformance_postgres TEST_PREFIX "postgres: ")
