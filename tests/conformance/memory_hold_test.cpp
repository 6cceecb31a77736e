// The conformance suite's lease_manager part, instantiated for the memory backend.
#include <tuple>

#include "fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::MemoryFixture>;

#include "lease_manager_suite.hpp"

#include "lease_api_suite.hpp"
