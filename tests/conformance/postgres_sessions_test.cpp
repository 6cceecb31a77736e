// The conformance suite's session part, instantiated for the PostgreSQL backend.
#include <tuple>

#include "postgres_fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::PostgresFixture>;

#include "session_suite.hpp"
