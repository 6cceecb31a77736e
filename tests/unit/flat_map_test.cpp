#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <statepact/detail/flat_map.hpp>

using statepact::detail::FlatMap;

TEST_CASE("flat map: keeps keys sorted, try_emplace keeps the first, assign overwrites",
          "[unit][flat-map]") {
  FlatMap<std::pair<std::string, std::string>, int> m;
  CHECK(m.empty());
  CHECK(m.try_emplace({"r", "b"}, 1).second);
  CHECK(m.try_emplace({"r", "a"}, 2).second);
  CHECK(m.try_emplace({"q", "z"}, 3).second);
  auto [it, inserted] = m.try_emplace({"r", "b"}, 99);
  CHECK_FALSE(inserted);
  CHECK(it->second == 1);
  m.assign({"r", "a"}, 20);
  m.assign({"s", "a"}, 4);
  std::vector<std::pair<std::pair<std::string, std::string>, int>> items(m.begin(), m.end());
  using P = std::pair<std::string, std::string>;
  CHECK(items == std::vector<std::pair<P, int>>{
                     {{"q", "z"}, 3}, {{"r", "a"}, 20}, {{"r", "b"}, 1}, {{"s", "a"}, 4}});
  CHECK(m.size() == 4);
  CHECK(m.contains({"r", "b"}));
  CHECK_FALSE(m.contains({"r", "c"}));
  CHECK(m.find({"x", "y"}) == m.end());
  const auto& cm = m;
  REQUIRE(cm.find({"s", "a"}) != cm.end());
  CHECK(cm.find({"s", "a"})->second == 4);
}
