// The conformance suite's session part, instantiated for the memory backend.
#include <tuple>

#include "fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::MemoryFixture>;

#include "session_suite.hpp"
