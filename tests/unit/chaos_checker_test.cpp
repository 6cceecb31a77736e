// The fault harness's checker on small hand-made histories: each anomaly is found where it is, and
// a clean history of the same shape has none.
#include <sstream>

#include <catch2/catch.hpp>

#include "../chaos/checker.hpp"
#include "../chaos/loopback.hpp"

namespace chaos = statepact::chaos;
using chaos::json;

namespace {

// Builds a history line by line; times are whatever the test says, in "ticks".
class Recorder {
 public:
  Recorder& invoke(int client, const std::string& op, json args, std::int64_t t) {
    return line({{"client", client},
                 {"op", op},
                 {"phase", "invoke"},
                 {"args", std::move(args)},
                 {"mono_ns", t},
                 {"wall_ms", t}});
  }
  Recorder& complete(int client, const std::string& op, const char* phase, json ret,
                     std::int64_t t) {
    return line({{"client", client},
                 {"op", op},
                 {"phase", phase},
                 {"ret", std::move(ret)},
                 {"mono_ns", t},
                 {"wall_ms", t}});
  }
  // An operation from t to t + 1.
  Recorder& op(int client, const std::string& name, json args, const char* phase, json ret,
               std::int64_t t) {
    invoke(client, name, std::move(args), t);
    return complete(client, name, phase, std::move(ret), t + 1);
  }
  Recorder& fault(const std::string& kind, const char* phase, std::int64_t t,
                  json args = json::object()) {
    return line(
        {{"nemesis", kind}, {"phase", phase}, {"args", args}, {"mono_ns", t}, {"wall_ms", t}});
  }
  // Something a client did at instant t while its operation may be open.
  Recorder& event(int client, const std::string& op, json args, std::int64_t t) {
    return line({{"client", client},
                 {"op", op},
                 {"phase", "event"},
                 {"args", std::move(args)},
                 {"mono_ns", t},
                 {"wall_ms", t}});
  }
  Recorder& raw(const std::string& text) {
    text_ += text + "\n";
    return *this;
  }
  chaos::History history() const {
    chaos::HistoryReader reader;
    std::istringstream in(text_);
    reader.read(in, "h.jsonl");
    return reader.finish();
  }
  std::vector<chaos::Anomaly> anomalies() const { return chaos::check_all(history()); }

 private:
  Recorder& line(const json& j) {
    text_ += j.dump() + "\n";
    return *this;
  }
  std::string text_;
};

std::multiset<std::string> kinds(const std::vector<chaos::Anomaly>& a) {
  std::multiset<std::string> out;
  for (const auto& x : a) out.insert(x.kind);
  return out;
}

json acquire(const char* owner) {
  return {{"resource", "r"}, {"owner", owner}};
}
json token(std::uint64_t t) {
  return {{"token", t}};
}
json append(std::uint64_t token, int n) {
  return {{"resource", "r"}, {"token", token}, {"n", n}};
}
json entries(std::initializer_list<std::tuple<int, std::uint64_t, int>> es) {
  json out = json::array();
  for (auto& [c, t, n] : es) out.push_back(json::array({c, t, n}));
  return {{"entries", out}};
}
const json read_args = {{"resource", "r"}};

}  // namespace

TEST_CASE("checker: a clean fenced-log history has no anomaly", "[unit][chaos]") {
  Recorder h;
  h.op(1, "acquire", acquire("a"), "ok", token(1), 0)
      .op(1, "append", append(1, 1), "ok", {}, 2)
      .op(2, "acquire", acquire("b"), "ok", token(2), 10)
      .op(1, "append", append(1, 2), "fail", {}, 12)  // fenced off: refused, as it must be
      .op(2, "append", append(2, 1), "ok", {}, 14)
      .op(2, "append", append(2, 2), "unknown", {}, 16)  // may or may not be there
      .op(9, "read", read_args, "ok", entries({{1, 1, 1}, {2, 2, 1}}), 30);
  CHECK(h.anomalies().empty());
}

TEST_CASE("checker: tokens issued twice or out of real-time order", "[unit][chaos]") {
  Recorder reused;
  reused.op(1, "acquire", acquire("a"), "ok", token(1), 0)
      .op(2, "acquire", acquire("b"), "ok", token(1), 10);
  CHECK(kinds(reused.anomalies()) == std::multiset<std::string>{"token-reused", "token-order"});

  Recorder backwards;  // b was invoked after a completed, yet got a smaller token
  backwards.op(1, "acquire", acquire("a"), "ok", token(5), 0)
      .op(2, "acquire", acquire("b"), "ok", token(4), 10);
  CHECK(kinds(backwards.anomalies()) == std::multiset<std::string>{"token-order"});

  Recorder concurrent;  // overlapping acquisitions may complete in either order
  concurrent.invoke(1, "acquire", acquire("a"), 0)
      .invoke(2, "acquire", acquire("b"), 1)
      .complete(2, "acquire", "ok", token(1), 2)
      .complete(1, "acquire", "ok", token(2), 3);
  CHECK(concurrent.anomalies().empty());
}

TEST_CASE("checker: a stale write acknowledged, or landing after a newer one", "[unit][chaos]") {
  Recorder accepted;  // a's append was invoked after token 2 existed, and it was acknowledged
  accepted.op(1, "acquire", acquire("a"), "ok", token(1), 0)
      .op(2, "acquire", acquire("b"), "ok", token(2), 10)
      .op(1, "append", append(1, 1), "ok", {}, 20)
      .op(9, "read", read_args, "ok", entries({{1, 1, 1}}), 30);
  auto k = kinds(accepted.anomalies());
  CHECK(k.count("stale-write-accepted") == 1);
  CHECK(k.count("stale-write-landed") == 1);

  Recorder landed;  // an unknown stale append that turns up in storage after a newer one
  landed.op(1, "acquire", acquire("a"), "ok", token(1), 0)
      .op(2, "acquire", acquire("b"), "ok", token(2), 10)
      .op(2, "append", append(2, 1), "ok", {}, 12)
      .invoke(1, "append", append(1, 1), 14)
      .complete(1, "append", "unknown", {}, 40)
      .op(9, "read", read_args, "ok", entries({{2, 2, 1}, {1, 1, 1}}), 50);
  CHECK(kinds(landed.anomalies()) ==
        std::multiset<std::string>{"stale-write-landed", "stale-write-landed"});
}

TEST_CASE("checker: lost, duplicated and failed appends", "[unit][chaos]") {
  Recorder h;
  h.op(1, "acquire", acquire("a"), "ok", token(1), 0)
      .op(1, "append", append(1, 1), "ok", {}, 2)       // acknowledged, then missing: lost
      .op(1, "append", append(1, 2), "unknown", {}, 4)  // unknown, present twice: duplicated
      .op(1, "append", append(1, 3), "fail", {}, 6)     // failed, present: must never be
      .op(9, "read", read_args, "ok", entries({{1, 1, 2}, {1, 1, 2}, {1, 1, 3}}), 10);
  CHECK(kinds(h.anomalies()) ==
        std::multiset<std::string>{"lost-write", "duplicate-write", "failed-write-landed"});
}

TEST_CASE("checker: the bank's total never changes", "[unit][chaos]") {
  Recorder h;
  json good = {{"total_expected", 100}, {"balances", {{"a", 60}, {"b", 40}}}};
  json bad = {{"total_expected", 100}, {"balances", {{"a", 60}, {"b", 41}}}};
  h.op(1, "bank_read", json::object(), "ok", good, 0)
      .op(1, "bank_read", json::object(), "ok", bad, 2);
  CHECK(kinds(h.anomalies()) == std::multiset<std::string>{"bank-total"});
}

TEST_CASE("checker: idempotent increments apply once, acknowledged ones are there",
          "[unit][chaos]") {
  auto inc = [](const char* id) { return json{{"id", id}}; };
  Recorder clean;
  clean.op(1, "increment", inc("i1"), "ok", {}, 0)
      .op(1, "increment", inc("i2"), "unknown", {}, 2)
      .op(1, "increment", inc("i3"), "fail", {}, 4)
      .op(9, "counter", json::object(), "ok", {{"counter", 2}, {"applied", {"i1", "i2"}}}, 10);
  CHECK(clean.anomalies().empty());

  Recorder bad;
  bad.op(1, "increment", inc("i1"), "ok", {}, 0)
      .op(1, "increment", inc("i2"), "ok", {}, 2)
      .op(1, "increment", inc("i3"), "fail", {}, 4)
      .op(9, "counter", json::object(), "ok", {{"counter", 4}, {"applied", {"i1", "i1", "i3"}}},
          10);
  CHECK(kinds(bad.anomalies()) == std::multiset<std::string>{"increment-duplicated",
                                                             "failed-write-landed", "lost-write",
                                                             "increment-duplicated"});
}

namespace {

json mops(std::initializer_list<json> ms) {
  return {{"mops", json(ms)}};
}
json app(const char* k, int v) {
  return json::array({"append", k, v});
}
json rd(const char* k, std::initializer_list<int> vs) {
  return json::array({"r", k, json(vs)});
}
json rd_args(const char* k) {
  return json::array({"r", k, nullptr});
}
// A transaction: args hold reads without values, ret the values read.
Recorder& txn(Recorder& h, int client, std::initializer_list<json> done, const char* phase,
              std::int64_t t) {
  json args = json::array();
  for (const json& m : done)
    args.push_back(m.at(0) == "r" ? rd_args(m.at(1).get<std::string>().c_str()) : m);
  return h.op(client, "txn", {{"mops", args}}, phase, mops(done), t);
}

}  // namespace

TEST_CASE("checker: list-append histories without anomalies", "[unit][chaos][elle]") {
  Recorder h;
  txn(h, 1, {app("x", 1), app("y", 1)}, "ok", 0);
  txn(h, 2, {rd("x", {1}), app("x", 2)}, "ok", 2);
  txn(h, 3, {rd("x", {1, 2}), rd("y", {1})}, "ok", 4);
  CHECK(h.anomalies().empty());
}

TEST_CASE("checker: G0, write cycles", "[unit][chaos][elle]") {
  Recorder h;  // T1 and T2 each append to x and y, in opposite orders
  txn(h, 1, {app("x", 1), app("y", 2)}, "ok", 0);
  txn(h, 2, {app("x", 2), app("y", 1)}, "ok", 0);
  txn(h, 3, {rd("x", {1, 2}), rd("y", {1, 2})}, "ok", 10);
  CHECK(kinds(h.anomalies()).count("G0") == 1);
}

TEST_CASE("checker: G1a, aborted reads", "[unit][chaos][elle]") {
  Recorder h;
  txn(h, 1, {app("x", 1)}, "fail", 0);
  txn(h, 2, {rd("x", {1})}, "ok", 10);
  CHECK(kinds(h.anomalies()) == std::multiset<std::string>{"G1a"});
}

TEST_CASE("checker: G1b, intermediate reads", "[unit][chaos][elle]") {
  Recorder h;
  txn(h, 1, {app("x", 1), app("x", 2)}, "ok", 0);
  txn(h, 2, {rd("x", {1})}, "ok", 0);
  txn(h, 3, {rd("x", {1, 2})}, "ok", 10);
  CHECK(kinds(h.anomalies()).count("G1b") == 1);
}

TEST_CASE("checker: G1c, circular information flow", "[unit][chaos][elle]") {
  Recorder h;  // each reads the other's write: wr both ways
  txn(h, 1, {app("x", 1), rd("y", {1})}, "ok", 0);
  txn(h, 2, {app("y", 1), rd("x", {1})}, "ok", 0);
  auto k = kinds(h.anomalies());
  CHECK(k.count("G1c") == 1);
  CHECK(k.count("G0") == 0);
}

TEST_CASE("checker: G2, anti-dependency cycles (write skew)", "[unit][chaos][elle]") {
  Recorder h;  // both read the other's key empty, then append to their own: rw both ways
  txn(h, 1, {rd("y", {}), app("x", 1)}, "ok", 0);
  txn(h, 2, {rd("x", {}), app("y", 1)}, "ok", 0);
  txn(h, 3, {rd("x", {1}), rd("y", {1})}, "ok", 10);
  auto k = kinds(h.anomalies());
  CHECK(k.count("G2") == 1);
  CHECK(k.count("G1c") == 0);
  CHECK(k.count("G0") == 0);
}

TEST_CASE("checker: reads no single order explains", "[unit][chaos][elle]") {
  Recorder h;
  txn(h, 1, {app("x", 1)}, "ok", 0);
  txn(h, 2, {app("x", 2)}, "ok", 0);
  txn(h, 3, {rd("x", {1, 2})}, "ok", 10);
  txn(h, 4, {rd("x", {2, 1})}, "ok", 10);
  CHECK(kinds(h.anomalies()).count("incompatible-order") == 1);
}

TEST_CASE("checker: an acknowledged list append missing from a later read is lost",
          "[unit][chaos][elle]") {
  Recorder h;
  txn(h, 1, {app("x", 1)}, "ok", 0);
  txn(h, 2, {app("x", 2)}, "ok", 2);       // acknowledged at 3
  txn(h, 3, {app("x", 3)}, "unknown", 4);  // unknown: may be missing
  txn(h, 4, {rd("x", {1})}, "ok", 2);      // invoked before 2's append completed: may miss it
  txn(h, 9, {rd("x", {1})}, "ok", 10);     // the final read
  CHECK(kinds(h.anomalies()) == std::multiset<std::string>{"lost-write"});

  Recorder clean;
  txn(clean, 1, {app("x", 1)}, "ok", 0);
  txn(clean, 2, {app("x", 2)}, "ok", 2);
  txn(clean, 9, {rd("x", {1, 2})}, "ok", 10);
  CHECK(clean.anomalies().empty());
}

TEST_CASE("checker: writes that nobody made", "[unit][chaos]") {
  Recorder log;  // client 2 never appended, yet an entry of its is in the list
  log.op(1, "acquire", acquire("a"), "ok", token(1), 0)
      .op(1, "append", append(1, 1), "ok", {}, 2)
      .op(9, "read", read_args, "ok", entries({{1, 1, 1}, {2, 1, 7}}), 10);
  CHECK(kinds(log.anomalies()) == std::multiset<std::string>{"unknown-write"});

  Recorder inc;  // an increment applied that no client invoked
  inc.op(1, "increment", json{{"id", "i1"}}, "ok", {}, 0)
      .op(9, "counter", json::object(), "ok", {{"counter", 2}, {"applied", {"i1", "ghost"}}}, 10);
  CHECK(kinds(inc.anomalies()) == std::multiset<std::string>{"unknown-write"});

  Recorder list;  // a value read that no transaction appended
  txn(list, 1, {app("x", 1)}, "ok", 0);
  txn(list, 9, {rd("x", {1, 5})}, "ok", 10);
  CHECK(kinds(list.anomalies()) == std::multiset<std::string>{"unknown-write"});
}

TEST_CASE("checker: malformed or truncated histories are refused, naming the line",
          "[unit][chaos]") {
  auto refusal = [](const std::string& text) -> std::string {
    chaos::HistoryReader reader;
    std::istringstream in(text);
    try {
      reader.read(in, "h.jsonl");
      reader.finish();
    } catch (const chaos::HistoryError& e) {
      return e.what();
    }
    return "";
  };
  const std::string ok_line =
      R"({"client":1,"op":"acquire","phase":"invoke","args":{},"mono_ns":1,"wall_ms":1})";
  CHECK(refusal(ok_line + "\n" + R"({"client":1,"op":"acq)").find("h.jsonl:2:") == 0);
  CHECK(refusal(R"({"client":1,"phase":"invoke","mono_ns":1,"wall_ms":1})")
            .find("h.jsonl:1: missing field \"op\"") == 0);
  CHECK(refusal(R"({"client":1,"op":"a","phase":"ok","mono_ns":1,"wall_ms":1})")
            .find("never invoked") != std::string::npos);
  CHECK(refusal(ok_line + "\n" + ok_line).find("h.jsonl:2:") == 0);  // two open invocations
  CHECK(refusal(R"({"client":1,"op":"a","phase":"maybe","mono_ns":1,"wall_ms":1})")
            .find("phase must be") != std::string::npos);
  CHECK(refusal(R"({"client":"x","op":"a","phase":"invoke","mono_ns":1,"wall_ms":1})")
            .find("must be an integer") != std::string::npos);
  CHECK(refusal("[1, 2]").find("not a JSON object") != std::string::npos);
  CHECK(refusal(ok_line).empty());  // an invocation never completed is an unknown operation

  Recorder unfinished;
  unfinished.invoke(1, "append", append(1, 1), 0);
  auto h = unfinished.history();
  REQUIRE(h.operations.size() == 1);
  CHECK(h.operations[0].result == chaos::Result::unknown);

  Recorder missing_field;  // a line that parses but lacks what its workload needs
  missing_field.op(1, "acquire", acquire("a"), "ok", json::object(), 0);
  CHECK_THROWS_AS(missing_field.anomalies(), chaos::HistoryError);
}

TEST_CASE("checker: faults are paired with their ends", "[unit][chaos]") {
  Recorder h;
  h.fault("pause-client", "start", 0)
      .fault("pause-client", "end", 5)
      .fault("kill-server", "start", 7);
  auto history = h.history();
  REQUIRE(history.faults.size() == 2);
  CHECK(history.faults[0].kind == "pause-client");
  CHECK(history.faults[0].end_ns == 5);
  CHECK(!history.faults[1].end_ns);
}

TEST_CASE("the harness reaches loopback servers only", "[unit][chaos]") {
  for (const char* ok : {"redis://127.0.0.1:56479/0", "redis://:pw@localhost", "redis://[::1]:5/0",
                         "postgresql://postgres@127.0.0.1:55532/statepact_test",
                         "postgres://u:p@127.1.2.3/db?sslmode=disable"})
    CHECK(chaos::loopback_url(ok));
  for (const char* no : {"redis://db.example:6379/0", "redis://u:127.0.0.1@db.example:1/0",
                         "postgresql://db.example/127.0.0.1", "redis://127.0.0.1.example:5",
                         "redis://127.0.0:5", "redis://[::2]:5", "127.0.0.1:6379", "redis://"})
    CHECK_FALSE(chaos::loopback_url(no));
}

namespace {

// A grant as storage reports it: granted at `granted_ms` by storage's clock, for `ttl_ms`.
json granted(std::uint64_t t, std::int64_t granted_ms, std::int64_t ttl_ms) {
  return {{"token", t}, {"expires_us", (granted_ms + ttl_ms) * 1000}, {"ttl_ms", ttl_ms}};
}
json lease_args(const char* owner) {
  return {{"resource", "r"}, {"owner", owner}};
}

}  // namespace

TEST_CASE("checker: two owners never hold a lease at once, by storage's clock",
          "[unit][chaos][mutex]") {
  // a holds token 1 from 1000 to 1500 (storage's clock); b is granted token 2 at 1300.
  Recorder overlap;
  overlap.op(1, "acquire", lease_args("a"), "ok", granted(1, 1000, 500), 0)
      .op(2, "acquire", lease_args("b"), "ok", granted(2, 1300, 500), 10);
  CHECK(kinds(overlap.anomalies()) == std::multiset<std::string>{"mutual-exclusion"});

  Recorder expired;  // b is granted at 1500, when a's lease expired
  expired.op(1, "acquire", lease_args("a"), "ok", granted(1, 1000, 500), 0)
      .op(2, "acquire", lease_args("b"), "ok", granted(2, 1500, 500), 10);
  CHECK(expired.anomalies().empty());

  Recorder higher;  // any newer token counts, not only t + 1 (a revoke skips tokens)
  higher.op(1, "acquire", lease_args("a"), "ok", granted(3, 1000, 500), 0)
      .op(2, "acquire", lease_args("b"), "ok", granted(7, 1200, 500), 10);
  CHECK(kinds(higher.anomalies()) == std::multiset<std::string>{"mutual-exclusion"});

  Recorder released;  // a released before b's grant completed
  released.op(1, "acquire", lease_args("a"), "ok", granted(1, 1000, 500), 0)
      .op(1, "release", {{"resource", "r"}, {"token", 1}}, "ok", {{"released", true}}, 4)
      .op(2, "acquire", lease_args("b"), "ok", granted(2, 1100, 500), 10);
  CHECK(released.anomalies().empty());

  Recorder not_released;  // a release that answered "not released" ended nothing
  not_released.op(1, "acquire", lease_args("a"), "ok", granted(1, 1000, 500), 0)
      .op(1, "release", {{"resource", "r"}, {"token", 1}}, "ok", {{"released", false}}, 4)
      .op(2, "acquire", lease_args("b"), "ok", granted(2, 1100, 500), 10);
  CHECK(kinds(not_released.anomalies()) == std::multiset<std::string>{"mutual-exclusion"});

  Recorder late_release;  // released only after b's grant had completed
  late_release.op(1, "acquire", lease_args("a"), "ok", granted(1, 1000, 500), 0)
      .op(2, "acquire", lease_args("b"), "ok", granted(2, 1100, 500), 10)
      .op(1, "release", {{"resource", "r"}, {"token", 1}}, "ok", {{"released", true}}, 20);
  CHECK(kinds(late_release.anomalies()) == std::multiset<std::string>{"mutual-exclusion"});

  Recorder revoked;  // an operator revoked the lease first
  revoked.op(1, "acquire", lease_args("a"), "ok", granted(1, 1000, 500), 0)
      .op(3, "revoke", {{"resource", "r"}}, "ok", json::object(), 4)
      .op(2, "acquire", lease_args("b"), "ok", granted(2, 1100, 500), 10);
  CHECK(revoked.anomalies().empty());

  Recorder stepped;  // storage's clock stepped back 2 s: a's lease is live for 2 s more
  stepped.op(1, "acquire", lease_args("a"), "ok", granted(1, 3000, 500), 0)
      .fault("clock-jump-server", "start", 5, {{"seconds", -2}})
      .fault("clock-jump-server", "end", 6)
      .op(2, "acquire", lease_args("b"), "ok", granted(2, 1600, 500), 10);
  CHECK(kinds(stepped.anomalies()) == std::multiset<std::string>{"mutual-exclusion"});

  // Storage's clock stepped forward 2 s (a's lease expired early and token 2 was granted and
  // released), then back 2 s: token 4 is granted at a time before a's expiry, but a's lease was
  // superseded already. Only the very next token is judged across a backward step.
  Recorder superseded;
  superseded.op(1, "acquire", lease_args("a"), "ok", granted(1, 1000, 500), 0)
      .op(2, "acquire", lease_args("b"), "ok", granted(2, 3100, 500), 4)
      .op(2, "release", {{"resource", "r"}, {"token", 2}}, "ok", {{"released", true}}, 6)
      .fault("clock-jump-server", "start", 7, {{"seconds", -2}})
      .fault("clock-jump-server", "end", 8)
      .op(3, "acquire", lease_args("c"), "ok", granted(4, 1200, 500), 10);
  CHECK(superseded.anomalies().empty());
}

namespace {

json hold_event(std::uint64_t token, std::int64_t granted_ms = 1000) {
  return {{"resource", "r"},
          {"owner", "a"},
          {"token", token},
          {"expires_us", (granted_ms + 500) * 1000},
          {"ttl_ms", 500}};
}
json act(std::uint64_t token, int n) {
  return {{"resource", "r"}, {"token", token}, {"n", n}};
}

}  // namespace

TEST_CASE("checker: a hold() body never acts after another owner took its lease",
          "[unit][chaos][hold]") {
  // Client 1's body holds token 1; client 2 is granted token 2 at 20 (by storage's clock after
  // a's expiry, so storage did nothing wrong); client 1's body acts at 25 all the same.
  auto history = [](Recorder& h, bool act_late) {
    h.invoke(1, "hold", {{"resource", "r"}, {"owner", "a"}, {"ttl_ms", 500}}, 0)
        .event(1, "hold_start", hold_event(1), 2)
        .event(1, "hold_act", act(1, 1), 5)
        .op(2, "acquire", lease_args("b"), "ok", granted(2, 1600, 500), 19);
    if (act_late) h.event(1, "hold_act", act(1, 2), 25);
    h.event(1, "hold_end", {{"resource", "r"}, {"token", 1}}, 26)
        .complete(1, "hold", "ok", json::object(), 30);
  };
  Recorder late;
  history(late, true);
  CHECK(kinds(late.anomalies()) == std::multiset<std::string>{"hold-outlived-lease"});

  Recorder in_time;
  history(in_time, false);
  CHECK(in_time.anomalies().empty());

  Recorder paused;  // its own process was stopped past the ttl: nothing can stop a stopped body
  paused.fault("pause-client", "start", 3, {{"client", 1}, {"ms", 900}})
      .fault("pause-client", "end", 24);
  history(paused, true);
  CHECK(paused.anomalies().empty());

  // Storage's clock stepped forward (the lease expired early, which no holder can see). A server
  // process may take up the new offset seconds after the nemesis logged the step's end, so a
  // step that ended just before the hold started still excuses it; one long before does not.
  Recorder stepped_before;
  stepped_before.fault("clock-jump-server", "start", -3'000'000'000, {{"seconds", 4}})
      .fault("clock-jump-server", "end", -2'000'000'000);
  history(stepped_before, true);
  CHECK(stepped_before.anomalies().empty());

  Recorder stepped_long_before;
  stepped_long_before.fault("clock-jump-server", "start", -9'000'000'000, {{"seconds", 4}})
      .fault("clock-jump-server", "end", -8'000'000'000);
  history(stepped_long_before, true);
  CHECK(kinds(stepped_long_before.anomalies()) ==
        std::multiset<std::string>{"hold-outlived-lease"});

  Recorder other_paused;  // another client's pause excuses nothing
  other_paused.fault("pause-client", "start", 3, {{"client", 7}, {"ms", 900}})
      .fault("pause-client", "end", 24);
  history(other_paused, true);
  CHECK(kinds(other_paused.anomalies()) == std::multiset<std::string>{"hold-outlived-lease"});

  // A hold's grant counts as one for the token rules and mutual exclusion: b's grant at 1200
  // falls inside the hold's lease (1000 to 1500) while its body still runs.
  Recorder overlap;
  overlap.invoke(1, "hold", {{"resource", "r"}, {"owner", "a"}, {"ttl_ms", 500}}, 0)
      .event(1, "hold_start", hold_event(1), 2)
      .op(2, "acquire", lease_args("b"), "ok", granted(2, 1200, 500), 10)
      .event(1, "hold_end", {{"resource", "r"}, {"token", 1}}, 12)
      .complete(1, "hold", "ok", json::object(), 14);
  CHECK(kinds(overlap.anomalies()) == std::multiset<std::string>{"mutual-exclusion"});
}

TEST_CASE("checker: an increment applied twice shows in the counter resource's version",
          "[unit][chaos]") {
  auto inc = [](const char* id) { return json{{"id", id}}; };
  Recorder twice;  // same values, one commit more than increments: a replay applied again
  twice.op(1, "increment", inc("i1"), "ok", {}, 0)
      .op(1, "increment", inc("i2"), "unknown", {}, 2)
      .op(9, "counter", json::object(), "ok",
          {{"counter", 2}, {"applied", {"i1", "i2"}}, {"version", 3}}, 10);
  CHECK(kinds(twice.anomalies()) == std::multiset<std::string>{"increment-reapplied"});

  Recorder once;
  once.op(1, "increment", inc("i1"), "ok", {}, 0)
      .op(1, "increment", inc("i2"), "unknown", {}, 2)
      .op(9, "counter", json::object(), "ok",
          {{"counter", 2}, {"applied", {"i1", "i2"}}, {"version", 2}}, 10);
  CHECK(once.anomalies().empty());
}

TEST_CASE("checker: write skew is allowed under snapshot isolation only", "[unit][chaos][elle]") {
  // Both read the other's key empty and append to their own (the G2 case above), under snapshot
  // isolation, which does not validate reads: allowed.
  auto skew = [](Recorder& h, const char* isolation) {
    h.op(1, "txn", {{"mops", {rd_args("y"), app("x", 1)}}, {"isolation", isolation}}, "ok",
         mops({rd("y", {}), app("x", 1)}), 0)
        .op(2, "txn", {{"mops", {rd_args("x"), app("y", 1)}}, {"isolation", isolation}}, "ok",
            mops({rd("x", {}), app("y", 1)}), 0);
    txn(h, 3, {rd("x", {1}), rd("y", {1})}, "ok", 10);
  };
  Recorder snapshot;
  skew(snapshot, "snapshot");
  CHECK(snapshot.anomalies().empty());
  for (const char* validated : {"optimistic", "serializable", "pessimistic"}) {
    Recorder h;
    skew(h, validated);
    CHECK(kinds(h.anomalies()) == std::multiset<std::string>{"G2"});
  }
}
