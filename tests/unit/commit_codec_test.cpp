// The commit's verdict vocabulary and its two server codecs, against canned replies: no server.
#include <catch2/catch.hpp>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <statepact/detail/commit_verdict.hpp>

#include "../postgres/commit_codec.hpp"
#include "../support/redis_replies.hpp"
#include "commit_codec.hpp"  // src/redis
#include "key_layout.hpp"
#include "scripts.hpp"

namespace sp = statepact;
namespace d = statepact::detail;
using namespace std::chrono_literals;

namespace {

// Resources b, a (the session's), c (read only); a fenced at 5, b written without a fence.
sp::CommitRequest sample_request() {
  sp::CommitRequest req;
  req.session = 7;
  req.agent_id = "agent-1";
  req.resources = {"b", "a"};
  req.fences = {{"a", 5}};
  req.checks = {{"c", "k1", 3}};
  req.writes = {{"a", "x", sp::Value(1)}, {"b", "y", std::nullopt}};
  req.idempotency_key = "key-1";
  req.fingerprint = "fp";
  return req;
}

template <class E>
std::string message_of(const d::CommitRefusal& r, const sp::CommitRequest& req) {
  try {
    d::raise(r, req);
  } catch (const E& e) {
    return e.what();
  }
  return "";
}

// Runs f and returns the statepact::Error it threw (code and text), failing on anything else.
template <class F>
std::pair<sp::ErrorCode, std::string> error_of(F f) {
  try {
    f();
  } catch (const sp::Error& e) {
    return {e.code(), e.what()};
  }
  FAIL("no statepact::Error was thrown");
  return {};
}

}  // namespace

TEST_CASE("commit verdicts: raise() throws the error each refusal stands for", "[verdict]") {
  const sp::CommitRequest req = sample_request();
  CHECK_THROWS_AS(d::raise(d::CommitRefusal::key_reused(), req), sp::IdempotencyKeyReusedError);
  CHECK(message_of<sp::IdempotencyKeyReusedError>(d::CommitRefusal::key_reused(), req)
            .find("'key-1'") != std::string::npos);
  CHECK_THROWS_AS(d::raise(d::CommitRefusal::not_found("c"), req), sp::ResourceNotFoundError);
  CHECK_THROWS_AS(d::raise(d::CommitRefusal::no_fence("b"), req), sp::FenceRequiredError);
  CHECK(message_of<sp::FenceRequiredError>(d::CommitRefusal::no_fence("b"), req).find("agent-1") !=
        std::string::npos);
  // Below the high-water mark: fenced off; above it: never issued.
  CHECK_THROWS_AS(d::raise(d::CommitRefusal::bad_fence("a", 5, 9), req), sp::LeaseLostError);
  CHECK_THROWS_AS(d::raise(d::CommitRefusal::bad_fence("a", 9, 5), req), sp::InvalidArgumentError);
  CHECK_THROWS_AS(d::raise(d::CommitRefusal::bad_fence("a", 0, 0), req), sp::InvalidArgumentError);
  // Storage refusing the current token breaks the rule itself: an error, never a success.
  auto [code, text] = error_of([&] { d::raise(d::CommitRefusal::bad_fence("a", 5, 5), req); });
  CHECK(code == sp::ErrorCode::backend_unavailable);
  CHECK(text.find("nothing was applied") != std::string::npos);
  try {
    d::raise(d::CommitRefusal::conflict_on("c", "k1", 3, 4), req);
    FAIL("no conflict");
  } catch (const sp::ConflictError& e) {
    CHECK(e.resource() == "c");
    CHECK(e.key() == "k1");
    CHECK(e.expected_version() == 3);
    CHECK(e.found_version() == 4);
    CHECK(e.retryable());
  }
}

TEST_CASE("redis commit codec: the call's KEYS and ARGV", "[codec][redis]") {
  const d::KeyLayout layout("sp");
  const auto call = d::encode_commit(sample_request(), layout, 60s, {"L1"}, "inst:7");
  CHECK(call.resources == std::vector<std::string>{"b", "a", "c"});
  // The record lives in the slot of the first resource by name, whatever order the request has.
  CHECK(call.keys == std::vector<std::string>{layout.idempotency("a", "key-1"), layout.version("b"),
                                              layout.state("b"), layout.version("a"),
                                              layout.state("a"), layout.version("c"),
                                              layout.state("c"), layout.fence("a"),
                                              layout.lease("a"), layout.policy("b"), "L1"});
  CHECK(call.args == std::vector<std::string>{
                         // header: has key, fingerprint, retention, counts, lock owner, policies
                         "1", "fp", "60000", "3", "1", "1", "2", "1", "inst:7", "1",
                         // resource names, fence tokens, the unfenced written resource's index
                         "b", "a", "c", "5", "1",
                         // check (resource index, key, expected), writes (index, key, kind, json)
                         "3", "k1", "3", "2", "x", "v", "1", "1", "y", "t", ""});
  CHECK(call.args.size() > d::commit_header_size);

  // Without a key or locks: a placeholder record, no lock owner.
  sp::CommitRequest plain = sample_request();
  plain.idempotency_key.reset();
  const auto p = d::encode_commit(plain, layout, 60s, {}, "inst:7");
  CHECK(p.keys.front() == layout.no_idempotency("a"));
  CHECK(p.args[static_cast<std::size_t>(d::CommitArg::has_key) - 1] == "0");
  CHECK(p.args[static_cast<std::size_t>(d::CommitArg::lock_owner) - 1].empty());
  CHECK(p.args[static_cast<std::size_t>(d::CommitArg::lock_count) - 1] == "0");
}

TEST_CASE("redis commit codec: the script names ARGV's header slots as the codec does",
          "[codec][redis]") {
  // Every line that names slots: "local HAS_KEY, FINGERPRINT = 1, 2" (upper-case names only).
  std::vector<std::string> names, numbers;
  auto split = [](const std::string& list, std::vector<std::string>& out) {
    std::string item;
    std::stringstream in(list);
    while (std::getline(in, item, ',')) out.push_back(item.substr(item.find_first_not_of(' ')));
  };
  std::stringstream lines{std::string(d::scripts::commit)};
  for (std::string line; std::getline(lines, line);) {
    const auto eq = line.find(" = ");
    if (line.rfind("local ", 0) != 0 || eq == std::string::npos) continue;
    const std::string lhs = line.substr(6, eq - 6), rhs = line.substr(eq + 3);
    if (lhs.find_first_not_of("ABCDEFGHIJKLMNOPQRSTUVWXYZ_, ") != std::string::npos) continue;
    split(lhs, names);
    split(rhs, numbers);
  }
  const std::map<std::string, d::CommitArg> codec = {
      {"HAS_KEY", d::CommitArg::has_key},
      {"FINGERPRINT", d::CommitArg::fingerprint},
      {"RETENTION_MS", d::CommitArg::retention_ms},
      {"RESOURCE_COUNT", d::CommitArg::resource_count},
      {"FENCE_COUNT", d::CommitArg::fence_count},
      {"CHECK_COUNT", d::CommitArg::check_count},
      {"WRITE_COUNT", d::CommitArg::write_count},
      {"LOCK_COUNT", d::CommitArg::lock_count},
      {"LOCK_OWNER", d::CommitArg::lock_owner},
      {"POLICY_COUNT", d::CommitArg::policy_count}};
  REQUIRE(names.size() == d::commit_header_size);
  REQUIRE(numbers.size() == names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    INFO(names[i]);
    REQUIRE(codec.count(names[i]) == 1);
    CHECK(std::to_string(static_cast<std::size_t>(codec.at(names[i]))) == numbers[i]);
  }
}

TEST_CASE("redis commit codec: replies read back as results and refusals", "[codec][redis]") {
  const sp::CommitRequest req = sample_request();
  const auto call = d::encode_commit(req, d::KeyLayout("sp"), 60s, {}, "");

  auto applied = std::get<sp::CommitResult>(
      d::decode_commit(sp::test::words({"ok", "0", "", "a", "7", "b", "3"}), req, call));
  CHECK_FALSE(applied.replayed);
  CHECK(applied.versions == std::map<std::string, sp::Version>{{"a", 7}, {"b", 3}});
  auto replay = std::get<sp::CommitResult>(
      d::decode_commit(sp::test::words({"ok", "1", R"({"a":7})"}), req, call));
  CHECK(replay.replayed);
  CHECK(replay.versions == std::map<std::string, sp::Version>{{"a", 7}});

  auto refusal = [&](std::vector<std::string> reply) {
    return std::get<d::CommitRefusal>(
        d::decode_commit(sp::test::words(std::move(reply)), req, call));
  };
  CHECK(refusal({"idempotency_key_reused"}).verdict == d::CommitVerdict::idempotency_key_reused);
  auto nf = refusal({"resource_not_found", "3"});
  CHECK(nf.verdict == d::CommitVerdict::resource_not_found);
  CHECK(nf.resource == "c");
  auto fence = refusal({"fence", "1", "9"});
  CHECK(fence.verdict == d::CommitVerdict::fence);
  CHECK(fence.resource == "a");
  CHECK(fence.token == 5);
  CHECK(fence.high_water == 9);
  auto required = refusal({"fence_required", "1"});
  CHECK(required.verdict == d::CommitVerdict::fence_required);
  CHECK(required.resource == "b");
  auto conflict = refusal({"conflict", "1", "4"});
  CHECK(conflict.verdict == d::CommitVerdict::conflict);
  CHECK(conflict.resource == "c");
  CHECK(conflict.key == "k1");
  CHECK(conflict.expected == 3);
  CHECK(conflict.found == 4);
}

TEST_CASE("redis commit codec: a reply the script never gives is an error, not a guess",
          "[codec][redis]") {
  sp::CommitRequest req = sample_request();
  const auto call = d::encode_commit(req, d::KeyLayout("sp"), 60s, {}, "");
  d::RedisReply status;
  status.type = d::RedisReply::Type::status;
  status.str = "OK";
  const std::vector<d::RedisReply> bad = {
      status,                                        // not an array
      sp::test::words({}),                           // empty
      sp::test::words({"stale", "1", "9"}),          // a name outside the vocabulary
      sp::test::words({"resource_not_found", "0"}),  // indexes are 1-based
      sp::test::words({"resource_not_found", "4"}),  // past the resources sent
      sp::test::words({"fence", "2", "9"}),          // past the fences sent
      sp::test::words({"conflict", "1", "x"}),       // not a number
      sp::test::words({"conflict", "1"}),            // a field missing
      sp::test::words({"ok", "1", "{not json"}),     // a stored result that is not JSON
      sp::test::words({"ok", "1", R"({"a":-1})"}),   // a version that is not one
      sp::test::words({"ok", "0", "", "a"}),         // a name without its version
  };
  for (const auto& r : bad) {
    auto [code, text] = error_of([&] { (void)d::decode_commit(r, req, call); });
    CHECK(code == sp::ErrorCode::backend_unavailable);
    CHECK(text == "redis: unexpected reply to commit");
  }
  req.idempotency_key.reset();  // a reused key, for a commit that sent none
  auto [code, text] = error_of(
      [&] { (void)d::decode_commit(sp::test::words({"idempotency_key_reused"}), req, call); });
  CHECK(text == "redis: unexpected reply to commit");
}

TEST_CASE("redis commit codec: a reply to a sent commit that cannot be read leaves it unknown",
          "[codec][redis]") {
  sp::CommitRequest req = sample_request();
  req.idempotency_key = "k";
  const auto call = d::encode_commit(req, d::KeyLayout("sp"), 60s, {}, "");
  for (const auto& r : {sp::test::words({"ok", "1", "{not json"}),
                        sp::test::words({"ok", "1", R"({"a":1.2345678901235e+14})"}),
                        sp::test::words({"ok", "0", "", "a"}), sp::test::words({"stale"})}) {
    bool unknown = false, retryable = false;
    std::string text;
    try {
      (void)d::commit_answer(r, req, call);
    } catch (const sp::CommitUnknownError& e) {
      unknown = true;
      retryable = e.retryable();
      text = e.what();
    } catch (const sp::Error&) {
    }
    CHECK(unknown);
    CHECK(retryable);  // it carries an idempotency key
    CHECK(text.find("unexpected reply to commit") != std::string::npos);
  }
  req.idempotency_key.reset();
  bool unknown = false, retryable = true;
  try {
    (void)d::commit_answer(sp::test::words({"ok", "0", "", "a"}), req, call);
  } catch (const sp::CommitUnknownError& e) {
    unknown = true;
    retryable = e.retryable();
  }
  CHECK(unknown);
  CHECK_FALSE(retryable);
}

TEST_CASE("redis commit codec: a stored result keeps versions exact", "[codec][redis]") {
  const sp::CommitRequest req = sample_request();
  const auto call = d::encode_commit(req, d::KeyLayout("sp"), 60s, {}, "");
  auto replay = std::get<sp::CommitResult>(d::decode_commit(
      sp::test::words({"ok", "1", R"({"a":"123456789012346","b":"7"})"}), req, call));
  CHECK(replay.versions == std::map<std::string, sp::Version>{{"a", 123456789012346u}, {"b", 7}});
  for (const char* bad : {R"({"a":"x"})", R"({"a":"-1"})", R"({"a":""})"}) {
    INFO(bad);
    auto [code, text] = error_of([&] {
      (void)d::decode_commit(sp::test::words({"ok", "1", bad}), req, call);
    });
    CHECK(text == "redis: unexpected reply to commit");
  }
}

TEST_CASE("postgres commit codec: the call's JSON body", "[codec][postgres]") {
  const sp::Value body = sp::Value::parse(d::pg::encode_commit(sample_request(), 60s));
  CHECK(body["resources"] == sp::Value({"b", "a"}));
  CHECK(body["fences"] == sp::Value::parse(R"([{"resource":"a","token":5}])"));
  CHECK(body["checks"] == sp::Value::parse(R"([{"resource":"c","key":"k1","expected":3}])"));
  // An erase has no "value".
  CHECK(body["writes"] ==
        sp::Value::parse(R"([{"resource":"a","key":"x","value":1},{"resource":"b","key":"y"}])"));
  CHECK(body["idempotency_key"] == "key-1");
  CHECK(body["fingerprint"] == "fp");
  CHECK(body["retention_ms"] == 60000);
  sp::CommitRequest plain = sample_request();
  plain.idempotency_key.reset();
  const sp::Value p = sp::Value::parse(d::pg::encode_commit(plain, 60s));
  CHECK_FALSE(p.contains("idempotency_key"));
  CHECK_FALSE(p.contains("fingerprint"));
}

TEST_CASE("postgres commit codec: one resource without an idempotency key takes the fast path",
          "[codec][postgres]") {
  sp::CommitRequest one;
  one.resources = {"a"};
  one.fences = {{"a", 5}};
  one.checks = {{"a", "k1", 3}, {"a", "k0", 0}};
  one.writes = {{"a", "x", sp::Value(1)}, {"a", "y", std::nullopt}, {"a", "z", sp::Value()}};
  const auto call = d::pg::encode_commit_one(one);
  REQUIRE(call);
  CHECK(call->resource == "a");
  CHECK(call->token == 5);
  // Checks keep their order; an erase is a key alone, a JSON null a key with null.
  CHECK(sp::Value::parse(call->checks) == sp::Value::parse(R"([["k1",3],["k0",0]])"));
  CHECK(sp::Value::parse(call->writes) == sp::Value::parse(R"([["x",1],["y"],["z",null]])"));
  sp::CommitRequest unfenced = one;
  unfenced.fences.clear();
  unfenced.checks.clear();
  const auto plain = d::pg::encode_commit_one(unfenced);
  REQUIRE(plain);
  CHECK(plain->token == 0);
  CHECK(plain->checks == "[]");
  // Three writes: no one-statement write.
  CHECK(!plain->only_write);
  // One write and no checks: also as plain parameters; an erase has no value.
  sp::CommitRequest single = unfenced;
  single.writes = {{"a", "x", sp::Value::parse(R"({"n":1})")}};
  const auto write = d::pg::encode_commit_one(single);
  REQUIRE(write);
  REQUIRE(write->only_write);
  CHECK(write->only_write->key == "x");
  CHECK(write->only_write->value == std::optional<std::string>(R"({"n":1})"));
  single.writes = {{"a", "x", std::nullopt}};
  const auto erase = d::pg::encode_commit_one(single);
  REQUIRE(erase);
  REQUIRE(erase->only_write);
  CHECK(!erase->only_write->value);
  single.writes = {{"a", "x", sp::Value()}};  // JSON null is a value, not an erase
  CHECK(d::pg::encode_commit_one(single)->only_write->value == std::optional<std::string>("null"));
  // A check needs statepact_commit_one, which reads the key after its lock.
  single.checks = {{"a", "x", 2}};
  const auto checked = d::pg::encode_commit_one(single);
  REQUIRE(checked);
  CHECK(!checked->only_write);

  // Everything else goes to statepact_commit, whose rules cover it.
  auto general = [&](auto change) {
    sp::CommitRequest req = one;
    change(req);
    return !d::pg::encode_commit_one(req);
  };
  CHECK(general([](sp::CommitRequest& r) { r.idempotency_key = "k"; }));
  CHECK(general([](sp::CommitRequest& r) { r.resources = {"a", "b"}; }));
  CHECK(general([](sp::CommitRequest& r) { r.resources.clear(); }));
  CHECK(general([](sp::CommitRequest& r) { r.fences = {{"b", 5}}; }));
  CHECK(general([](sp::CommitRequest& r) { r.fences = {{"a", 5}, {"a", 6}}; }));
  CHECK(general([](sp::CommitRequest& r) { r.fences = {{"a", 0}}; }));  // refused there
  CHECK(general([](sp::CommitRequest& r) { r.checks.push_back({"b", "k", 1}); }));
  CHECK(general([](sp::CommitRequest& r) { r.writes.push_back({"b", "k", sp::Value(1)}); }));
  CHECK(general([](sp::CommitRequest& r) { r.resources = sample_request().resources; }));
}

TEST_CASE("postgres commit codec: answers read back as results and refusals", "[codec][postgres]") {
  auto applied =
      std::get<sp::CommitResult>(d::pg::decode_commit(R"({"versions":{"a":7},"replayed":true})"));
  CHECK(applied.replayed);
  CHECK(applied.versions == std::map<std::string, sp::Version>{{"a", 7}});
  auto refusal = [](const char* answer) {
    return std::get<d::CommitRefusal>(d::pg::decode_commit(answer));
  };
  CHECK(refusal(R"({"error":"idempotency_key_reused"})").verdict ==
        d::CommitVerdict::idempotency_key_reused);
  CHECK(refusal(R"({"error":"resource_not_found","resource":"c"})").resource == "c");
  auto fence = refusal(R"({"error":"fence","resource":"a","token":5,"high_water":9})");
  CHECK(fence.verdict == d::CommitVerdict::fence);
  CHECK(fence.token == 5);
  CHECK(fence.high_water == 9);
  CHECK(refusal(R"({"error":"fence_required","resource":"b"})").verdict ==
        d::CommitVerdict::fence_required);
  auto conflict =
      refusal(R"({"error":"conflict","resource":"c","key":"k1","expected":3,"found":4})");
  CHECK(conflict.key == "k1");
  CHECK(conflict.expected == 3);
  CHECK(conflict.found == 4);
}

TEST_CASE("postgres commit codec: an answer the function never gives is an error",
          "[codec][postgres]") {
  auto [code, text] = error_of([] { (void)d::pg::decode_commit(R"({"error":"stale"})"); });
  CHECK(code == sp::ErrorCode::backend_unavailable);
  CHECK(text.find("does not know ('stale'") != std::string::npos);
  for (const char* bad :
       {"{not json", R"({"error":"conflict","resource":"c"})",
        R"({"versions":{"a":"seven"},"replayed":false})", R"({"versions":{}})", R"([1,2])"}) {
    INFO(bad);
    auto [c, t] = error_of([&] { (void)d::pg::decode_commit(bad); });
    CHECK(c == sp::ErrorCode::backend_unavailable);
    CHECK(t.find("postgres: unexpected answer from statepact_commit") != std::string::npos);
  }
}
