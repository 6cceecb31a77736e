// The optional inspection and revoke concept, instantiated for the redis backend.
#include <tuple>

#include "redis_fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::RedisFixture>;

#include "inspect_conformance.hpp"
