// The conformance suite's lease part, instantiated for the redis backend.
#include <tuple>

#include "redis_fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::RedisFixture>;

#include "lease_suite.hpp"
