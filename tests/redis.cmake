# The Redis backend's tests; they need a server: STATEPACT_TEST_REDIS_URL (scripts/servers/redis.sh).
add_executable(statepact_conformance_redis
  conformance/redis_leases_test.cpp
  conformance/redis_hold_test.cpp
  conformance/redis_sessions_test.cpp)
target_link_libraries(statepact_conformance_redis PRIVATE statepact::redis Catch2::Catch2WithMain)
statepact_test_target(statepact_conformance_redis)
catch_discover_tests(statepact_conformance_redis TEST_PREFIX "redis: ")
