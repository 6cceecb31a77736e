// The multi-process race tests trust judge_race to see a broken race: show that it does.
#include <catch2/catch.hpp>

#include "../integration/lease_race.hpp"

using statepact::test::judge_race;
using statepact::test::RaceWin;

TEST_CASE("race judge: a clean race has no findings", "[unit][race]") {
  auto v = judge_race({{1, 0, 10, 0}, {3, 30, 40, 1}, {2, 15, 25, 0}});
  CHECK(v.wins == 3);
  CHECK(v.repeated_tokens == 0);
  CHECK(v.out_of_order == 0);
  CHECK(v.overlaps == 0);
  CHECK(v.max_token == 3);
  CHECK(v.handoffs == 1);  // process 0 won twice in a row, then process 1
}

TEST_CASE("race judge: overlapping holds, reused and backward tokens are found", "[unit][race]") {
  CHECK(judge_race({{1, 0, 10, 0}, {2, 5, 20, 1}}).overlaps == 1);
  CHECK(judge_race({{1, 0, 10, 0}, {1, 20, 30, 1}}).repeated_tokens == 1);
  auto backward = judge_race({{2, 0, 10, 0}, {1, 20, 30, 1}});
  CHECK(backward.out_of_order == 1);
  CHECK(backward.overlaps == 0);
}
