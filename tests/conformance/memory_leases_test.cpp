// The conformance suite's lease part, instantiated for the memory backend.
#include <tuple>

#include "fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::MemoryFixture>;

#include "lease_suite.hpp"
