#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <statepact/detail/known_resources.hpp>

using statepact::detail::KnownResources;

TEST_CASE("known resources: a session begins without a check only over names all confirmed",
          "[unit][known-resources]") {
  KnownResources known;
  CHECK(known.all_known({}));
  CHECK_FALSE(known.all_known({"a"}));
  known.remember("a");
  CHECK(known.all_known({"a"}));
  CHECK_FALSE(known.all_known({"a", "b"}));
  known.remember(std::vector<std::string>{"b", "c"});
  CHECK(known.all_known({"c", "a", "b"}));
  // Names are compared as bytes: no folding, no trimming.
  CHECK_FALSE(known.all_known({"A"}));
  CHECK_FALSE(known.all_known({"a "}));
  CHECK(known.size() == 3);
}

TEST_CASE("known resources: memory stays bounded, and a full set starts over",
          "[unit][known-resources]") {
  KnownResources known(2);
  known.remember("a");
  known.remember("b");
  known.remember("a");  // already there: nothing is dropped
  CHECK(known.all_known({"a", "b"}));
  known.remember("c");  // full: forgets the rest, so they are checked again
  CHECK(known.size() == 1);
  CHECK(known.all_known({"c"}));
  CHECK_FALSE(known.all_known({"a"}));
  CHECK_FALSE(known.all_known({"b"}));
}

TEST_CASE("known resources: capacity 0 remembers nothing, so every begin checks",
          "[unit][known-resources]") {
  KnownResources none(0);
  none.remember("a");
  none.remember(std::vector<std::string>{"b"});
  CHECK(none.size() == 0);
  CHECK_FALSE(none.all_known({"a"}));
  CHECK(none.all_known({}));  // nothing to check
}
