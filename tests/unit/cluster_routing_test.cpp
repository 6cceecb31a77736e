// Redis Cluster routing without a cluster: slots, redirections and the slot map, against values a
// cluster-mode redis-server 7 gave for the same keys (CLUSTER KEYSLOT) and replies of its shape.
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <catch2/catch.hpp>

#include <statepact/backends/redis.hpp>
#include <statepact/errors.hpp>
#include <statepact/inspect.hpp>

#include "../support/redis_replies.hpp"
#include "cluster_map.hpp"  // src/redis
#include "cluster_step.hpp"
#include "colocation.hpp"
#include "key_layout.hpp"
#include "redirect.hpp"
#include "slot.hpp"

namespace sp = statepact;
using sp::detail::ClusterMap;
using sp::detail::ClusterNode;
using sp::detail::key_slot;
using sp::detail::Redirect;
using namespace sp::test;
using namespace std::chrono_literals;

namespace {

// A CLUSTER SLOTS node entry as Redis 7 sends it: host, port, id, and metadata.
Reply slots_node(std::string host, long long port, std::string id) {
  return arr({str(std::move(host)), num(port), str(std::move(id)), arr({})});
}

Reply three_masters() {
  return arr({
      arr({num(0), num(5460), slots_node("127.0.0.1", 7001, "a"),
           slots_node("127.0.0.1", 7004, "d")}),
      arr({num(5461), num(10922), slots_node("127.0.0.1", 7002, "b"),
           slots_node("127.0.0.1", 7005, "e")}),
      arr({num(10923), num(16383), slots_node("127.0.0.1", 7003, "c"),
           slots_node("127.0.0.1", 7006, "f")}),
  });
}

}  // namespace

TEST_CASE("cluster slots are the server's", "[unit][cluster]") {
  CHECK(sp::detail::crc16("123456789") == 0x31C3);  // CRC16-XMODEM's check value
  // Each value is what CLUSTER KEYSLOT answered on redis-server 7 for the same key.
  CHECK(key_slot("123456789") == 12739);
  CHECK(key_slot("foo") == 12182);
  CHECK(key_slot("bar") == 5061);
  CHECK(key_slot("") == 0);
  CHECK(key_slot("{user1000}.following") == 3443);
  CHECK(key_slot("{user1000}.followers") == 3443);
  CHECK(key_slot("foo{}{bar}") == 8363);     // an empty tag: the whole key
  CHECK(key_slot("foo{{bar}}zap") == 4015);  // the tag ends at the first '}': "{bar"
  CHECK(key_slot("foo{bar}{zap}") == 5061);  // only the first tag counts: "bar"
  CHECK(key_slot("a{") == 14311);            // no closing brace: the whole key
  CHECK(key_slot("}b{c}") == 7365);          // a '}' before the first '{' does not count
  CHECK(key_slot("P:lease:{6a6f622d3432}") == 15177);
}

TEST_CASE("every key of a resource lives in one slot", "[unit][cluster]") {
  const sp::detail::KeyLayout keys("P");
  for (const std::string& r : {std::string("job-42"), std::string("orders {eu}:1"),
                               std::string("x"), std::string("}{"), std::string("a\0b", 3)}) {
    const int slot = key_slot(keys.lease(r));
    CHECK(key_slot(keys.fence(r)) == slot);
    CHECK(key_slot(keys.version(r)) == slot);
    CHECK(key_slot(keys.state(r)) == slot);
    CHECK(key_slot(keys.policy(r)) == slot);
    CHECK(key_slot(keys.lock(r, "k")) == slot);
    CHECK(key_slot(keys.lock_queue(r, "k")) == slot);
    CHECK(key_slot(keys.idempotency(r, "key {x}")) == slot);
    CHECK(key_slot(keys.no_idempotency(r)) == slot);
  }
}

TEST_CASE("redirections are read from error replies", "[unit][cluster]") {
  auto moved = sp::detail::parse_redirect("MOVED 3999 127.0.0.1:6381");
  REQUIRE(moved);
  CHECK(moved->kind == Redirect::Kind::moved);
  CHECK(moved->slot == 3999);
  CHECK(moved->host == "127.0.0.1");
  CHECK(moved->port == 6381);

  auto ask =
      sp::detail::parse_redirect("ASK 16383 ::1:7002");  // IPv6: the port is after the last ':'
  REQUIRE(ask);
  CHECK(ask->kind == Redirect::Kind::ask);
  CHECK(ask->slot == 16383);
  CHECK(ask->host == "::1");
  CHECK(ask->port == 7002);

  auto unknown_host = sp::detail::parse_redirect("MOVED 0 :7003");
  REQUIRE(unknown_host);
  CHECK(unknown_host->host.empty());  // the caller uses the node that answered

  for (const char* not_one :
       {"ERR unknown command", "MOVED", "MOVED 3999", "MOVED x 1.2.3.4:1", "MOVED 16384 1.2.3.4:1",
        "MOVED -1 1.2.3.4:1", "ASK 1 1.2.3.4", "ASK 1 1.2.3.4:0", "ASK 1 1.2.3.4:65536",
        "ASK 1 1.2.3.4:7x", "TRYAGAIN Multiple keys request during rehashing of slot",
        "moved 1 1.2.3.4:1"})
    CHECK_FALSE(sp::detail::parse_redirect(not_one));
}

TEST_CASE("the slot map is read from CLUSTER SLOTS", "[unit][cluster]") {
  auto map = ClusterMap::from_slots_reply(three_masters(), "127.0.0.1");
  CHECK(map.unserved_slots() == 0);
  REQUIRE(map.masters().size() == 3);
  CHECK(map.masters()[1].port == 7002);
  CHECK(map.masters()[1].id == "b");
  CHECK(map.master_of(0)->port == 7001);
  CHECK(map.master_of(5460)->port == 7001);
  CHECK(map.master_of(5461)->port == 7002);
  CHECK(map.master_of(16383)->port == 7003);
  CHECK(map.master_of(key_slot("foo"))->port == 7003);
  CHECK(map.master_of(16384) == nullptr);
  CHECK(map.master_of(-1) == nullptr);
  REQUIRE(map.replicas_of(100).size() == 1);
  CHECK(map.replicas_of(100)[0].port == 7004);

  SECTION("a MOVED redirection moves one slot") {
    CHECK(map.move(100, ClusterNode{"127.0.0.1", 7002, ""}));
    CHECK(map.master_of(100)->port == 7002);
    CHECK(map.master_of(101)->port == 7001);
    CHECK_FALSE(map.move(100, ClusterNode{"127.0.0.1", 7002, ""}));  // already so: refresh instead
    SECTION("to a node the map did not know (a new master after a failover)") {
      CHECK(map.move(101, ClusterNode{"127.0.0.1", 7004, ""}));
      CHECK(map.master_of(101)->port == 7004);
      CHECK(map.masters().size() == 4);
    }
  }
}

TEST_CASE("a partial or odd CLUSTER SLOTS reply", "[unit][cluster]") {
  SECTION("slots nobody serves") {
    auto map = ClusterMap::from_slots_reply(
        arr({arr({num(0), num(99), slots_node("10.0.0.1", 7001, "a")})}), "10.0.0.9");
    CHECK(map.unserved_slots() == 16384 - 100);
    CHECK(map.master_of(100) == nullptr);
    CHECK(map.replicas_of(100).empty());
  }
  SECTION("an empty host is the node that answered") {
    auto map = ClusterMap::from_slots_reply(
        arr({arr({num(0), num(16383), slots_node("", 7001, "a")})}), "10.0.0.9");
    CHECK(map.master_of(5)->host == "10.0.0.9");
  }
  SECTION("a Redis 6 node: no metadata") {
    auto map = ClusterMap::from_slots_reply(
        arr({arr({num(0), num(16383), arr({str("10.0.0.1"), num(7001)})})}), "x");
    CHECK(map.master_of(5)->id.empty());
    CHECK(map.master_of(5)->port == 7001);
  }
}

TEST_CASE("a malformed CLUSTER SLOTS reply is refused, naming the entry", "[unit][cluster]") {
  auto refused = [](const Reply& reply) {
    try {
      (void)ClusterMap::from_slots_reply(reply, "127.0.0.1");
    } catch (const sp::Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK_THAT(refused(str("OK")), Catch::Contains("not an array"));
  CHECK_THAT(refused(arr({arr({num(0), num(5)})})), Catch::Contains("entry 0"));
  CHECK_THAT(refused(arr({arr({num(0), num(16384), slots_node("h", 1, "a")})})),
             Catch::Contains("out of bounds"));
  CHECK_THAT(refused(arr({arr({num(9), num(5), slots_node("h", 1, "a")})})),
             Catch::Contains("out of bounds"));
  CHECK_THAT(refused(arr({arr({str("0"), num(5), slots_node("h", 1, "a")})})),
             Catch::Contains("not an integer"));
  CHECK_THAT(refused(arr({arr({num(0), num(5), slots_node("h", 0, "a")})})),
             Catch::Contains("port is out of range"));
  CHECK_THAT(refused(arr({arr({num(0), num(5), slots_node("?", 7001, "a")})})),
             Catch::Contains("unknown ('?')"));
  CHECK_THAT(refused(arr({arr({num(0), num(5), arr({num(1), num(2)})})})),
             Catch::Contains("host is not a string"));
  CHECK_THAT(refused(arr({arr({num(0), num(9), slots_node("h", 1, "a")}),
                          arr({num(5), num(20), slots_node("h", 2, "b")})})),
             Catch::Contains("entry 1: a slot is claimed by two masters"));
}

TEST_CASE("a name's group puts its keys in the group's slot, collision-free", "[unit][cluster]") {
  const sp::detail::KeyLayout keys("P");
  using sp::detail::resource_group;
  CHECK(resource_group("{order-17}/items") == "order-17");
  CHECK(resource_group("x{a}y{b}") == "a");  // the first tag only, as Redis reads it
  CHECK(resource_group("{{a}}") == "{a");
  CHECK_FALSE(resource_group("plain"));
  CHECK_FALSE(resource_group("{}/x"));  // an empty tag is no group
  CHECK_FALSE(resource_group("}{"));
  CHECK_FALSE(resource_group("a{"));

  // Resources of one group share a slot, whatever else their names hold.
  const int slot = key_slot(keys.lease("{order-17}/items"));
  for (const std::string& r : {std::string("{order-17}/payment"), std::string("x{order-17}"),
                               std::string("{order-17}{other}")}) {
    CHECK(key_slot(keys.lease(r)) == slot);
    CHECK(key_slot(keys.version(r)) == slot);
    CHECK(key_slot(keys.lock(r, "k")) == slot);
    CHECK(key_slot(keys.idempotency(r, "key")) == slot);
    CHECK(sp::detail::resource_slot(r) == slot);
  }
  CHECK(keys.lease("{order-17}/items") ==
        "P:lease:=7b6f726465722d31377d2f6974656d73{6f726465722d3137}");
  CHECK(keys.lease("job") == "P:lease:{6a6f62}");  // a plain name keeps its old key

  // Every name maps to its own key and back, plain and grouped alike.
  const std::vector<std::string> names = {
      "a",    "{a}",    "{a}b",    "b{a}", "{a}{a}", "{}",   "{}a",
      "a{}",  "}{",     "{",       "}",    "=",      "={a}", std::string("\0{\0}", 4),
      "{ü}ß", "6a6f62", "{6a6f62}"};
  std::set<std::string> seen;
  for (const auto& n : names) {
    const std::string k = keys.version(n);
    CHECK(seen.insert(k).second);
    CHECK(keys.resource_of("version", k) == n);
    CHECK(sp::detail::glob_accepts(keys.scan_pattern("version", ""), k));
    CHECK(sp::detail::glob_accepts(keys.scan_pattern("version", n), k));
    CHECK(key_slot(k) == sp::detail::resource_slot(n));
  }
  // Keys of other kinds, other prefixes, with suffixes, or in a form this layout never writes.
  CHECK_FALSE(keys.resource_of("version", keys.lease("a")));
  CHECK_FALSE(keys.resource_of("version", keys.lock("a", "k")));
  CHECK_FALSE(keys.resource_of("version", "Q:version:{61}"));
  CHECK_FALSE(keys.resource_of("version", "P:version:{7b617d}"));     // "{a}" belongs in the = form
  CHECK_FALSE(keys.resource_of("version", "P:version:=61{61}"));      // "a" has no group
  CHECK_FALSE(keys.resource_of("version", "P:version:=7b617d{62}"));  // not "{a}"'s group
  CHECK_FALSE(keys.resource_of("version", "P:version:{6}"));
  CHECK_FALSE(keys.resource_of("version", "P:version:}"));
  // A literal prefix narrows the scan for both forms.
  CHECK_FALSE(sp::detail::glob_accepts(keys.scan_pattern("version", "b"), keys.version("{a}")));
  CHECK(sp::detail::glob_accepts(keys.scan_pattern("version", "{a"), keys.version("{a}b")));
}

TEST_CASE("keys earlier versions wrote for grouped names map to the grouped form",
          "[unit][cluster]") {
  const sp::detail::KeyLayout keys("P*");
  // Earlier versions keyed every name like a plain one: "{<hex name>}".
  const std::string items = "{order-17}/items";
  const std::string hex = "7b6f726465722d31377d2f6974656d73";
  for (const char* kind : {"lease", "fence", "version", "state", "policy"}) {
    INFO(kind);
    const std::string old = std::string("P*:") + kind + ":{" + hex + "}";
    const auto move = keys.regrouped(old);
    REQUIRE(move);
    CHECK(move->resource == items);
    CHECK(move->kind == kind);
    CHECK(move->to == std::string("P*:") + kind + ":=" + hex + "{6f726465722d3137}");
    CHECK(sp::detail::glob_accepts(keys.regrouped_pattern(), old));
  }
  // Keys with a suffix (locks, idempotency records) keep it.
  const auto lock = keys.regrouped("P*:lock:{" + hex + "}:6b");
  REQUIRE(lock);
  CHECK(lock->to == keys.lock(items, "k"));
  const auto idem = keys.regrouped("P*:idem:{" + hex + "}:6b6579");
  REQUIRE(idem);
  CHECK(idem->to == keys.idempotency(items, "key"));
  // Not moved: plain names, keys already grouped, other prefixes, malformed keys.
  CHECK_FALSE(keys.regrouped(keys.lease("plain")));
  CHECK_FALSE(keys.regrouped(keys.lease("{}/x")));  // an empty tag is no group
  CHECK_FALSE(keys.regrouped(keys.lease(items)));
  CHECK_FALSE(keys.regrouped("Q:lease:{" + hex + "}"));
  CHECK_FALSE(keys.regrouped("P*:lease:{" + hex));
  CHECK_FALSE(keys.regrouped("P*:lease:{7b6}"));
  CHECK_FALSE(keys.regrouped("P*:lock:{" + hex + "}:zz"));
  CHECK_FALSE(keys.regrouped("P*:lock:{" + hex + "}x"));
  CHECK_FALSE(keys.regrouped("P*:waits"));
  // The pattern escapes the prefix's glob characters.
  CHECK_FALSE(sp::detail::glob_accepts(keys.regrouped_pattern(), "Px:lease:{" + hex + "}"));
}

TEST_CASE("a request over resources of two slots is refused before anything is sent",
          "[unit][cluster]") {
  using sp::detail::require_one_slot;
  require_one_slot("the commit", {});
  require_one_slot("the commit", {"{order-17}/items", "{order-17}/payment", "{order-17}"});
  require_one_slot("the commit", {"order-17", "{order-17}/items"});  // the plain name hashes alike
  try {
    require_one_slot("the commit", {"{order-17}/items", "{order-17}/payment", "invoices"});
    FAIL("accepted");
  } catch (const sp::InvalidArgumentError& e) {
    const std::string m = e.what();
    CHECK_THAT(m, Catch::Contains("the commit spans hash slots"));
    CHECK_THAT(m, Catch::Contains(fmt::format("'{{order-17}}/items' is in slot {}",
                                              sp::detail::resource_slot("{order-17}/items"))));
    CHECK_THAT(m, Catch::Contains(
                      fmt::format("'invoices' in slot {}", sp::detail::resource_slot("invoices"))));
    CHECK_THAT(m, Catch::Contains("nothing was sent"));
    CHECK_THAT(m, Catch::Contains("'{order-17}/payment'"));  // how to co-locate them
  }
}

TEST_CASE("cluster seeds are host:port", "[unit][cluster]") {
  sp::RedisOptions o;
  o.cluster_seeds({"10.0.0.5:7001", "redis-2.internal:6379", "[::1]:7002"});
  CHECK(o.cluster_seeds().size() == 3);
  for (const char* bad : {"10.0.0.5", "10.0.0.5:", ":7001", "h:0", "h:65536", "h:70000x",
                          "::1:7001", "h h:1", "h:123456", "user@h:1"}) {
    INFO(bad);
    CHECK_THROWS_AS(o.cluster_seeds({"10.0.0.5:7001", bad}), sp::InvalidArgumentError);
    CHECK(o.cluster_seeds().size() == 3);  // unchanged
  }
  // The router reads the seeds with the same function: host without brackets, port as a number.
  using sp::detail::HostPort;
  CHECK(sp::detail::parse_host_port("seed", "10.0.0.5:7001") == HostPort{"10.0.0.5", 7001});
  CHECK(sp::detail::parse_host_port("seed", "[::1]:7002") == HostPort{"::1", 7002});
  CHECK(sp::detail::parse_host_port("seed", "redis-2.internal:6379") ==
        HostPort{"redis-2.internal", 6379});
  CHECK_THROWS_AS(o.replicas_to_ack(-1), sp::InvalidArgumentError);
  CHECK_THROWS_AS(o.replicas_to_ack(17), sp::InvalidArgumentError);
  CHECK(o.replicas_to_ack(1).replicas_to_ack() == 1);
  CHECK_THROWS_AS(o.replica_ack_timeout(0ms), sp::InvalidArgumentError);
}

TEST_CASE("a node's reply is delivered, followed or retried later", "[unit][cluster]") {
  using sp::detail::cluster_step;
  using Kind = sp::detail::ClusterStep::Kind;
  auto error = [](std::string text) {
    sp::detail::RedisReply r;
    r.type = sp::detail::RedisReply::Type::error;
    r.str = std::move(text);
    return r;
  };
  int redirects = 0;
  // Answers, and errors that are the caller's (NOSCRIPT goes back to the script run).
  CHECK(cluster_step(str("ok"), true, redirects).kind == Kind::deliver);
  CHECK(cluster_step(error("NOSCRIPT No matching script"), true, redirects).kind == Kind::deliver);
  CHECK(cluster_step(error("ERR x"), true, redirects).kind == Kind::deliver);
  // Busy for now: retried within the deadline, also before the router learnt it talks to a
  // cluster (only a cluster node sends these).
  CHECK(cluster_step(error("TRYAGAIN Multiple keys request during rehashing of slot"), true,
                     redirects)
            .kind == Kind::retry_later);
  CHECK(cluster_step(error("CLUSTERDOWN The cluster is down"), true, redirects).kind ==
        Kind::retry_later);
  CHECK(cluster_step(error("TRYAGAIN x"), false, redirects).kind == Kind::retry_later);
  CHECK(cluster_step(error("CLUSTERDOWN x"), false, redirects).kind == Kind::retry_later);
  CHECK(redirects == 0);
  // Redirections are followed, even from a node taken for a single server.
  auto moved = cluster_step(error("MOVED 3999 127.0.0.1:7002"), false, redirects);
  CHECK(moved.kind == Kind::follow);
  CHECK(moved.redirect->kind == Redirect::Kind::moved);
  CHECK(moved.redirect->port == 7002);
  auto ask = cluster_step(error("ASK 3999 127.0.0.1:7003"), true, redirects);
  CHECK(ask.kind == Kind::follow);
  CHECK(ask.redirect->kind == Redirect::Kind::ask);
  CHECK(redirects == 2);
  // A malformed redirection is the server's error, with its text.
  CHECK(cluster_step(error("MOVED x"), true, redirects).kind == Kind::deliver);
  // Too many: the cluster disagrees with itself; the caller gets a retryable error.
  redirects = sp::detail::max_redirects;
  try {
    (void)cluster_step(error("MOVED 1 127.0.0.1:7001"), true, redirects);
    FAIL("followed a 17th redirection");
  } catch (const sp::BackendUnavailableError& e) {
    CHECK_THAT(e.what(), Catch::Contains("redirected 16 times"));
    CHECK(e.retryable());
  }
}

TEST_CASE("retries wait longer each time, within bounds, jittered", "[unit][cluster]") {
  using sp::detail::retry_pause;
  CHECK(retry_pause(0, 0) == 10ms);
  CHECK(retry_pause(1, 0) == 20ms);
  CHECK(retry_pause(4, 0) == 160ms);
  CHECK(retry_pause(50, 0) == 160ms);
  CHECK(retry_pause(-1, 0) == 10ms);
  CHECK(retry_pause(0, 9) == 19ms);
  CHECK(retry_pause(0, 12345) == 15ms);
}
