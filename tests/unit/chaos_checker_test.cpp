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
  Recorder& fault(const std::string& kind, const char* phase, std::int64_t t) {
    return line({{"nemesis", kind}, {"phase", phase}, {"mono_ns", t}, {"wall_ms", t}});
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
