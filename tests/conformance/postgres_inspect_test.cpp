// The optional inspection and revoke concept, instantiated for the postgres backend.
#include <tuple>

#include "postgres_fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::PostgresFixture>;

#include "inspect_conformance.hpp"
