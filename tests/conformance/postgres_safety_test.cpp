// The conformance suite's safety part, instantiated for the postgres backend.
#include <tuple>

#include "postgres_fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::PostgresFixture>;

#include "safety_suite.hpp"
