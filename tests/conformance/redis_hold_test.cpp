// The conformance suite's lease_manager part, instantiated for the redis backend.
#include <tuple>

#include "redis_fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::RedisFixture>;

#include "lease_manager_suite.hpp"

#include "lease_api_suite.hpp"
