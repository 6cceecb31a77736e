// The conformance suite's lease_manager part, instantiated for the PostgreSQL backend.
#include <tuple>

#include "postgres_fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::PostgresFixture>;

#include "lease_manager_suite.hpp"

#include "lease_api_suite.hpp"
