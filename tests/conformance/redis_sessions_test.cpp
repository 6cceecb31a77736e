// The conformance suite's session part, instantiated for the redis backend.
#include <tuple>

#include "redis_fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::RedisFixture>;

#include "session_suite.hpp"
