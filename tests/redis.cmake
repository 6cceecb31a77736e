# The Redis backend's tests; they need a server: STATEPACT_TEST_REDIS_URL (scripts/servers/redis.sh).
add_executable(statepact_conformance_redis
  conformance/redis_leases_test.cpp
  conformance/redis_hold_test.cpp
  conformance/redis_sessions_test.cpp
  conformance/redis_safety_test.cpp
  conformance/redis_inspect_test.cpp)
target_link_libraries(statepact_conformance_redis PRIVATE statepact::redis Catch2::Catch2WithMain)
statepact_test_target(statepact_conformance_redis)
catch_discover_tests(statepact_conformance_redis TEST_PREFIX "redis: " EXTRA_ARGS -w NoTests)

# The same suite on a Redis Cluster: STATEPACT_TEST_REDIS_CLUSTER_URL
# (scripts/servers/redis_cluster.sh).
add_executable(statepact_conformance_redis_cluster
  conformance/redis_leases_test.cpp
  conformance/redis_hold_test.cpp
  conformance/redis_sessions_test.cpp
  conformance/redis_safety_test.cpp
  conformance/redis_inspect_test.cpp)
target_compile_definitions(statepact_conformance_redis_cluster PRIVATE STATEPACT_TEST_REDIS_CLUSTER)
target_link_libraries(statepact_conformance_redis_cluster PRIVATE statepact::redis
  Catch2::Catch2WithMain)
statepact_test_target(statepact_conformance_redis_cluster)
# The cluster's tests share one lock: the integration tests fail masters over and move slots.
catch_discover_tests(statepact_conformance_redis_cluster TEST_PREFIX "redis cluster: "
  EXTRA_ARGS -w NoTests PROPERTIES RESOURCE_LOCK redis_cluster)

# Integration tests: what only a real server shows (connection loss, name encoding).
find_package(PkgConfig REQUIRED)
pkg_check_modules(HIREDIS_TEST REQUIRED IMPORTED_TARGET hiredis)
add_executable(statepact_integration_redis
  integration/redis_reconnect_test.cpp
  integration/redis_names_test.cpp
  integration/redis_persistence_test.cpp
  integration/redis_timeout_test.cpp
  integration/redis_race_test.cpp
  integration/redis_slots_test.cpp
  integration/redis_policy_test.cpp
  integration/redis_fence_test.cpp
  integration/redis_server_test.cpp
  integration/redis_errors_test.cpp
  integration/redis_session_begin_test.cpp
  integration/redis_lock_queue_test.cpp
  integration/redis_outcomes_test.cpp)
target_link_libraries(statepact_integration_redis PRIVATE statepact::redis PkgConfig::HIREDIS_TEST
  Catch2::Catch2WithMain)
# The slot test computes slots with the backend's own (pure) slot.hpp; the lock queue test runs
# a script as the backend does.
target_include_directories(statepact_integration_redis PRIVATE ${PROJECT_SOURCE_DIR}/src/redis
  ${CMAKE_CURRENT_BINARY_DIR}/generated)
statepact_test_target(statepact_integration_redis)
catch_discover_tests(statepact_integration_redis TEST_PREFIX "redis integration: " EXTRA_ARGS -w NoTests)

# What only a changing cluster shows: slots migrated, masters failed over or killed.
add_executable(statepact_integration_redis_cluster integration/redis_cluster_test.cpp)
target_link_libraries(statepact_integration_redis_cluster PRIVATE statepact::redis
  PkgConfig::HIREDIS_TEST Catch2::Catch2WithMain)
target_include_directories(statepact_integration_redis_cluster PRIVATE ${PROJECT_SOURCE_DIR}/src/redis)
statepact_test_target(statepact_integration_redis_cluster)
catch_discover_tests(statepact_integration_redis_cluster TEST_PREFIX "redis cluster integration: "
  EXTRA_ARGS -w NoTests PROPERTIES RESOURCE_LOCK redis_cluster)
