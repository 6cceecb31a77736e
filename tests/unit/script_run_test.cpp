// The Redis script call's steps with canned replies, no server: SCRIPT LOAD when no SHA is cached,
// EVALSHA, EVAL with the text after NOSCRIPT, and error replies mapped by meaning.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "script_run.hpp"  // src/redis

#include "../support/caught.hpp"

namespace sp = statepact;
namespace d = statepact::detail;

namespace {

d::RedisReply script_reply(d::RedisReply::Type type, std::string str = {}) {
  d::RedisReply r;
  r.type = type;
  r.str = std::move(str);
  return r;
}

using Strings = std::vector<std::string>;

// What `f` threw; fails the test when it threw nothing.
template <class F>
sp::test::Caught script_run_caught(F f) {
  try {
    f();
  } catch (...) {
    return sp::test::caught(std::current_exception());
  }
  FAIL("nothing was thrown");
  return {};
}
constexpr const char* script_text = "return redis.call('GET', KEYS[1])";

}  // namespace

TEST_CASE("script run: a cached SHA goes straight to EVALSHA", "[script_run][redis]") {
  d::ScriptRun run("abc123", script_text, "the read script", {"k1", "k2"}, {"a1"});
  CHECK(run.step() == d::ScriptRun::Step::evalsha);
  CHECK_FALSE(run.loading());
  CHECK(*run.command() == Strings{"EVALSHA", "abc123", "2", "k1", "k2", "a1"});
  d::RedisReply ok;
  ok.type = d::RedisReply::Type::integer;
  ok.integer = 7;
  CHECK(run.on_reply(ok));
  CHECK(run.step() == d::ScriptRun::Step::done);
  CHECK(run.learned_sha().empty());
  CHECK(std::move(run).result().integer == 7);
}

TEST_CASE("script run: no cached SHA loads the script first, then EVALSHA by the answer",
          "[script_run][redis]") {
  d::ScriptRun run("", script_text, "the read script", {"k"}, {});
  CHECK(run.loading());
  CHECK(*run.command() == Strings{"SCRIPT", "LOAD", script_text});
  CHECK_FALSE(run.on_reply(script_reply(d::RedisReply::Type::string, "feed")));
  CHECK(run.learned_sha() == "feed");
  CHECK_FALSE(run.loading());
  CHECK(*run.command() == Strings{"EVALSHA", "feed", "1", "k"});
  CHECK(run.on_reply(script_reply(d::RedisReply::Type::nil)));
  CHECK(std::move(run).result().is_nil());
}

TEST_CASE("script run: NOSCRIPT sends the text once with EVAL", "[script_run][redis]") {
  d::ScriptRun run("stale", script_text, "the commit script", {"k"}, {"x"});
  const auto first = run.command();
  CHECK_FALSE(run.on_reply(
      script_reply(d::RedisReply::Type::error, "NOSCRIPT No matching script. Use EVAL.")));
  CHECK(run.step() == d::ScriptRun::Step::eval);
  CHECK(*run.command() == Strings{"EVAL", script_text, "1", "k", "x"});
  // A second NOSCRIPT cannot come from EVAL; any error reply now is the script's answer.
  CHECK(run.on_reply(script_reply(d::RedisReply::Type::error, "NOSCRIPT again")));
  const auto m = script_run_caught([&] { (void)std::move(run).result(); });
  CHECK(m.code == sp::ErrorCode::backend_unavailable);
  CHECK_FALSE(m.retryable);
  CHECK(m.has("the commit script failed: NOSCRIPT again"));
}

TEST_CASE("script run: error replies become the library's errors", "[script_run][redis]") {
  SECTION("a refused EVALSHA did not run: retryable") {
    d::ScriptRun run("abc", script_text, "the acquire script", {}, {});
    CHECK(run.on_reply(script_reply(d::RedisReply::Type::error, "LOADING Redis is loading")));
    const auto m = script_run_caught([&] { (void)std::move(run).result(); });
    CHECK(m.code == sp::ErrorCode::backend_unavailable);
    CHECK(m.retryable);
    CHECK(m.has("the acquire script"));
  }
  SECTION("a failed SCRIPT LOAD throws at once and learns nothing") {
    d::ScriptRun run("", script_text, "the acquire script", {}, {});
    const auto m = script_run_caught(
        [&] { run.on_reply(script_reply(d::RedisReply::Type::error, "NOPERM no scripts")); });
    CHECK(m.configuration);
    CHECK(m.has("SCRIPT LOAD was refused"));
    CHECK(run.learned_sha().empty());
    CHECK(run.loading());
  }
  SECTION("SCRIPT LOAD answering anything but a SHA is refused") {
    d::ScriptRun run("", script_text, "the acquire script", {}, {});
    const auto m =
        script_run_caught([&] { run.on_reply(script_reply(d::RedisReply::Type::status, "OK")); });
    CHECK(m.code == sp::ErrorCode::backend_unavailable);
    CHECK(m.has("unexpected reply to SCRIPT LOAD"));
  }
  SECTION("a reply after the end is a usage error of the driver") {
    d::ScriptRun run("abc", script_text, "the read script", {}, {});
    CHECK(run.on_reply(script_reply(d::RedisReply::Type::nil)));
    CHECK_THROWS_AS(run.on_reply(script_reply(d::RedisReply::Type::nil)), sp::Error);
  }
}
