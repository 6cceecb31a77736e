// The shared outcome vocabulary: every word a Redis script or a PostgreSQL function answers with
// is one of its names, and each *_or_raise turns an outcome into the error it stands for.
#include <catch2/catch.hpp>

#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <statepact/detail/commit_verdict.hpp>
#include <statepact/detail/verdicts.hpp>

#include "scripts.hpp"  // generated from src/redis/lua

namespace sp = statepact;
namespace d = statepact::detail;
using namespace std::chrono_literals;

namespace {

bool known_word(const std::string& w) {
  return d::named<d::Verdict>(w) || d::named<d::CommitVerdict>(w) || d::named<d::LeaseLoss>(w);
}

// The word each occurrence of `marker` (which ends with an opening quote) quotes.
std::vector<std::string> words_after(const std::string& text, const std::string& marker) {
  std::vector<std::string> out;
  for (auto at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1)) {
    const auto begin = at + marker.size();
    out.push_back(text.substr(begin, text.find('\'', begin) - begin));
  }
  return out;
}

// Every quoted word on the lines holding `marker`, after it ("o_status := CASE ... 'a' ELSE 'b'").
std::vector<std::string> quoted_on_lines(const std::string& text, const std::string& marker) {
  std::vector<std::string> out;
  std::stringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    auto open = line.find(marker);
    if (open == std::string::npos) continue;
    while ((open = line.find('\'', open)) != std::string::npos) {
      const auto close = line.find('\'', open + 1);
      if (close == std::string::npos) break;
      out.push_back(line.substr(open + 1, close - open - 1));
      open = close + 1;
    }
  }
  return out;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The newest definition of each statepact function, from the schema's versions in order: a later
// version replaces an earlier one's function of the same name.
std::map<std::string, std::string> newest_functions() {
  std::map<std::string, std::string> out;
  for (int v = 1;; ++v) {
    const std::string text = read_file(std::string(STATEPACT_SOURCE_DIR) +
                                       "/src/postgres/schema_v" + std::to_string(v) + ".sql");
    if (text.empty()) break;
    const std::string marker = "FUNCTION statepact_";
    for (auto at = text.find(marker); at != std::string::npos; at = text.find(marker, at + 1)) {
      const auto name_end = text.find('(', at);
      const auto body_end = text.find("$$;", at);
      REQUIRE(body_end != std::string::npos);
      out[text.substr(at + 9, name_end - at - 9)] = text.substr(at, body_end - at);
    }
  }
  return out;
}

}  // namespace

TEMPLATE_TEST_CASE("verdicts: every name reads back, once, and an unknown word is refused",
                   "[verdict]", d::Verdict, d::CommitVerdict, d::LeaseLoss) {
  std::set<std::string_view> names;
  for (const auto& v : d::WireNames<TestType>::table) {
    CHECK(d::named<TestType>(v.name) == v.value);
    CHECK(d::name_of(v.value) == v.name);
    CHECK(names.insert(v.name).second);
  }
  // Words of earlier versions, and English, are not names.
  for (const char* word : {"not_found", "missing", "stale", "lease was released", ""})
    CHECK_FALSE(d::named<TestType>(word));
}

TEST_CASE("verdicts: the Redis scripts answer only with the shared words", "[verdict][redis]") {
  std::set<std::string> seen;
  for (const auto& script : d::scripts::all) {
    INFO(script.name);
    const std::string text = script.text;
    for (const char* marker : {"return {'", "return '", "reason = '", "local out = {'"}) {
      for (const auto& w : words_after(text, marker)) {
        INFO(w);
        CHECK(known_word(w));
        seen.insert(w);
      }
    }
  }
  // The scan found the words it should, so a script that stopped matching it would show.
  for (const char* w : {"ok", "busy", "lost", "revoked", "none", "wait", "resource_not_found",
                        "deadlock", "superseded", "released", "expired", "fence", "conflict"})
    CHECK(seen.count(w) == 1);
}

TEST_CASE("verdicts: the PostgreSQL functions answer only with the shared words",
          "[verdict][postgres]") {
  const auto functions = newest_functions();
  REQUIRE(functions.count("statepact_lock") == 1);
  std::set<std::string> seen;
  for (const auto& [name, body] : functions) {
    INFO(name);
    for (const auto& w : quoted_on_lines(body, "o_status :=")) {
      INFO(w);
      CHECK(known_word(w));
      seen.insert(w);
    }
    for (const auto& w : words_after(body, "jsonb_build_object('error', '")) {
      INFO(w);
      CHECK(d::named<d::CommitVerdict>(w));
      seen.insert(w);
    }
  }
  // renew answers 'ok' or the loss itself, as the other backends do (a resource never leased is
  // 'released' with high-water mark 0, since schema version 5).
  for (const auto& w : quoted_on_lines(functions.at("statepact_renew"), "o_status :=")) {
    INFO(w);
    CHECK((w == "ok" || (d::named<d::LeaseLoss>(w) && w != "none")));
  }
  for (const char* w : {"ok", "busy", "revoked", "none", "resource_not_found", "deadlock",
                        "timeout", "cancelled", "superseded", "released", "expired", "fence",
                        "fence_required", "conflict", "idempotency_key_reused"})
    CHECK(seen.count(w) == 1);
}

TEST_CASE("verdicts: each outcome raises the error it stands for", "[verdict]") {
  const sp::Lease mine{"r", "me", 4, sp::time_point{}, 1000ms};
  const sp::Lease theirs{"r", "other", 7, sp::time_point{} + 5s, 1000ms};

  CHECK(d::lease_or_raise(d::AcquireAnswer{d::Verdict::ok, mine}, "me") == mine);
  try {
    d::lease_or_raise(d::AcquireAnswer{d::Verdict::busy, theirs}, "me");
    FAIL("no error");
  } catch (const sp::LeaseNotAvailableError& e) {
    CHECK(std::string(e.what()).find("other") != std::string::npos);
  }

  d::RenewAnswer renewed;
  renewed.lease = mine;
  CHECK(d::renewed_or_raise(renewed, mine) == mine);
  d::RenewAnswer lost;
  lost.verdict = d::Verdict::lost;
  lost.loss = d::LeaseLoss::superseded;
  lost.high_water = 9;
  try {
    d::renewed_or_raise(lost, mine);
    FAIL("no error");
  } catch (const sp::LeaseLostError& e) {
    CHECK(std::string(e.what()).find("superseded") != std::string::npos);
  }

  CHECK(d::found_or_raise(d::Found<int>::of(3)) == 3);
  try {
    d::found_or_raise(d::Found<int>::not_registered("gone"));
    FAIL("no error");
  } catch (const sp::ResourceNotFoundError& e) {
    CHECK(std::string(e.what()).find("'gone'") != std::string::npos);
  }

  d::LockAnswer lock;
  lock.entry = sp::Entry{sp::Value(1), 2};
  CHECK(d::entry_or_raise(lock, "r", "k", sp::LockMode::shared, 50ms) == lock.entry);
  lock.verdict = d::Verdict::resource_not_found;
  CHECK_THROWS_AS(d::entry_or_raise(lock, "r", "k", sp::LockMode::shared, 50ms),
                  sp::ResourceNotFoundError);
  lock.verdict = d::Verdict::deadlock;
  CHECK_THROWS_AS(d::entry_or_raise(lock, "r", "k", sp::LockMode::exclusive, 50ms),
                  sp::DeadlockError);
  lock.verdict = d::Verdict::timeout;
  CHECK_THROWS_WITH(d::entry_or_raise(lock, "r", "k", sp::LockMode::exclusive, 50ms),
                    Catch::Contains("50 ms"));
  // The driver's own outcomes never pass through here silently.
  lock.verdict = d::Verdict::wait;
  CHECK_THROWS_AS(d::entry_or_raise(lock, "r", "k", sp::LockMode::shared, 50ms), sp::Error);
}
