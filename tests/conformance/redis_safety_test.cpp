// The conformance suite's safety part, instantiated for the redis backend.
#include <tuple>

#include "redis_fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::RedisFixture>;

#include "safety_suite.hpp"
