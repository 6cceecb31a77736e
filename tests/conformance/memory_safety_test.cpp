// The conformance suite's safety part, instantiated for the memory backend.
#include <tuple>

#include "fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::MemoryFixture>;

#include "safety_suite.hpp"
