// The optional inspection and revoke concept, instantiated for the memory backend.
#include <tuple>

#include "fixture.hpp"

using ConformanceFixtures = std::tuple<statepact::test::MemoryFixture>;

#include "inspect_conformance.hpp"
