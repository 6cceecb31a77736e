# statepactctl's tests: the built tool against the private servers (STATEPACT_TEST_REDIS_URL,
# STATEPACT_TEST_POSTGRES_URL; scripts/servers/*.sh start them).
add_executable(statepact_cli_test cli/statepactctl_test.cpp)
target_link_libraries(statepact_cli_test PRIVATE statepact::redis statepact::postgres
  Catch2::Catch2WithMain)
target_compile_definitions(statepact_cli_test PRIVATE
  STATEPACTCTL_PATH="$<TARGET_FILE:statepactctl>" STATEPACT_TEST_TMP="${CMAKE_CURRENT_BINARY_DIR}")
add_dependencies(statepact_cli_test statepactctl)
statepact_test_target(statepact_cli_test)
# The spawned tool inherits the environment: under ASan, libpqxx's known leak on a broken
# connection is suppressed as in the PostgreSQL integration tests.
catch_discover_tests(statepact_cli_test TEST_PREFIX "cli: " EXTRA_ARGS -w NoTests
  PROPERTIES ENVIRONMENT "LSAN_OPTIONS=suppressions=${CMAKE_CURRENT_SOURCE_DIR}/integration/lsan.supp")
