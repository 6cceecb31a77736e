// Decides whether a recorded history could have happened in a correct system, and names every
// anomaly it finds. Pure code over a History (history.hpp); each workload's operations:
//
//   acquire   args {resource, owner}            ret {token, expires_us, ttl_ms}
//   release   args {resource, token}            ret {released}
//   revoke    args {resource}
//   append    args {resource, token, n}                         (the fenced log)
//   read      args {resource}                   ret {entries: [[client, token, n], ...]}
//   bank_read                                   ret {total_expected, balances: {account: n}}
//   increment args {id}                                         (idempotent, through run())
//   counter   (a final read)                    ret {counter, applied: [id, ...], version}
//   txn       args {mops, isolation}            ret {mops}      (list append, Elle-style)
//             mops: [["append", key, value] | ["r", key, null or [values]]]
//   hold      args {resource, owner, ttl_ms}                    (LeaseManager::hold() around a
//                                                               body that records these events:)
//   hold_start  event {resource, owner, token, expires_us, ttl_ms}  the body started
//   hold_act    event {resource, token, n, expires_us}              the body acted
//   hold_end    event {resource, token}                             the body ended
//
// expires_us is a lease's expiry by storage's clock (microseconds since the epoch), as the reply
// reported it; ttl_ms the ttl the reply reported, so expires_us - ttl_ms is storage's clock when it
// granted the lease. Faults a check looks at: pause-client {client}, clock-jump-server {seconds}
// (negative: the clock stepped back).
#pragma once

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "history.hpp"

namespace statepact::chaos {

struct Anomaly {
  std::string kind;
  std::string detail;
};

inline std::string describe(const Operation& o) {
  return fmt::format("client {} {} {} at {} ({})", o.client, o.op, o.args.dump(), o.where,
                     to_string(o.result));
}

// One lease the history shows granted: an ok acquire, or a hold() body's start (its acquisition
// was invoked with the hold and completed at the latest when the body started).
struct Grant {
  const Operation* op = nullptr;    // the acquire, or the hold_start event
  const Operation* hold = nullptr;  // the enclosing hold, for a hold
  std::string resource, owner;
  std::uint64_t token = 0;
  std::int64_t invoked_ns = 0, completed_ns = 0;
  std::optional<std::int64_t> expires_us, ttl_ms;  // by storage's clock, from the reply
  std::int64_t last_event_ns = 0;                  // a hold: its body's last event
};

// Every grant, in invocation order.
inline std::vector<Grant> grants(const History& h) {
  std::vector<Grant> out;
  std::map<int, std::vector<const Operation*>> holds;  // per client, in invocation order
  for (const auto& o : h.operations)
    if (o.op == "hold") holds[o.client].push_back(&o);
  auto optional_int = [](const json& j, const char* name) -> std::optional<std::int64_t> {
    auto it = j.find(name);
    if (it == j.end() || !it->is_number_integer()) return std::nullopt;
    return it->get<std::int64_t>();
  };
  std::map<std::pair<std::string, std::uint64_t>, std::size_t> hold_grant;
  for (const auto& o : h.operations) {
    const bool acquire = o.op == "acquire" && o.result == Result::ok;
    if (!acquire && o.op != "hold_start") continue;
    const json& j = acquire ? o.ret : o.args;
    Grant g;
    g.op = &o;
    g.resource = o.args.at("resource").get<std::string>();
    g.owner = o.args.value("owner", std::string());
    g.token = j.at("token").get<std::uint64_t>();
    g.invoked_ns = o.invoked_ns;
    g.completed_ns = g.last_event_ns = o.completed_ns;
    g.expires_us = optional_int(j, "expires_us");
    g.ttl_ms = optional_int(j, "ttl_ms");
    if (!acquire) {
      // The hold this body ran in: the client's last one invoked before the body started.
      for (const Operation* hold : holds[o.client])
        if (hold->invoked_ns <= o.invoked_ns) g.hold = hold;
      if (g.hold) g.invoked_ns = g.hold->invoked_ns;
      hold_grant[{g.resource, g.token}] = out.size();
    }
    out.push_back(std::move(g));
  }
  for (const auto& o : h.operations)
    if (o.op == "hold_act" || o.op == "hold_end") {
      auto it = hold_grant.find(
          {o.args.at("resource").get<std::string>(), o.args.at("token").get<std::uint64_t>()});
      if (it != hold_grant.end())
        out[it->second].last_event_ns = std::max(out[it->second].last_event_ns, o.invoked_ns);
    }
  std::stable_sort(out.begin(), out.end(),
                   [](const Grant& a, const Grant& b) { return a.invoked_ns < b.invoked_ns; });
  return out;
}

// Whether a fault of `kind` (and, if given, of that client) was going on at some time in [from,
// to]; an open fault lasts to the end.
inline constexpr std::int64_t clock_step_settle_ns = 5'000'000'000;

inline bool fault_during(const History& h, const std::string& kind, std::int64_t from,
                         std::int64_t to, std::optional<int> client = std::nullopt,
                         bool backward_only = false) {
  for (const auto& f : h.faults) {
    if (f.kind != kind) continue;
    if (client && f.args.value("client", -1) != *client) continue;
    if (backward_only && f.args.value("seconds", 0) >= 0) continue;
    std::int64_t end = f.end_ns.value_or(INT64_MAX);
    // A server process under libfaketime may read the new offset seconds after the nemesis wrote
    // it (a run showed a PostgreSQL backend on the old offset 1.5 s after the step's start), so a
    // step counts until clock_step_settle_ns after its logged end.
    if (kind == "clock-jump-server" && end != INT64_MAX) end += clock_step_settle_ns;
    if (f.start_ns <= to && end >= from) return true;
  }
  return false;
}

namespace check {

// Tokens per resource: none issued twice, and an acquisition that completed before another was
// invoked holds the smaller token.
inline void tokens(const History& h, std::vector<Anomaly>& out) {
  std::map<std::string, std::vector<Grant>> by_resource;
  for (auto& g : grants(h)) by_resource[g.resource].push_back(std::move(g));
  for (auto& [resource, gs] : by_resource) {
    std::map<std::uint64_t, const Grant*> seen;
    for (const Grant& g : gs) {
      auto [it, fresh] = seen.emplace(g.token, &g);
      if (!fresh)
        out.push_back(
            {"token-reused", fmt::format("resource '{}': token {} issued to {} and to {}", resource,
                                         g.token, describe(*it->second->op), describe(*g.op))});
    }
    // Sweep in invocation order, keeping the largest token completed before each invocation.
    std::vector<const Grant*> by_completion;
    for (const Grant& g : gs) by_completion.push_back(&g);
    std::sort(by_completion.begin(), by_completion.end(),
              [](auto* a, auto* b) { return a->completed_ns < b->completed_ns; });
    std::size_t done = 0;
    const Grant* top = nullptr;
    for (const Grant& g : gs) {  // in invocation order
      while (done < by_completion.size() && by_completion[done]->completed_ns < g.invoked_ns) {
        const Grant* c = by_completion[done++];
        if (!top || c->token > top->token) top = c;
      }
      if (top && top->token >= g.token)
        out.push_back({"token-order",
                       fmt::format("resource '{}': {} got a token not above {}, which completed "
                                   "before it was invoked",
                                   resource, describe(*g.op), describe(*top->op))});
    }
  }
}

// Two owners never hold a lease at once: a lease granted with a newer token was granted, by
// storage's clock, no earlier than the older lease's expiry, unless the older one may have been
// released or revoked before the newer grant completed.
//
// Clocks: both sides are storage's clock as its replies report it: the older lease's expires_us
// and the newer one's expires_us - ttl_ms (its grant time). Nothing is compared with a client's
// clock. Conservative, so a correct system never fails it:
// - while storage's clock only moves forward, every newer grant is judged (grants happen in token
//   order, so each is no earlier than the first grant after the older lease). When it stepped back
//   (clock-jump-server with negative seconds) between the older lease's invocation and the newer
//   grant's completion, an expired lease superseded before the step stays ended although the clock
//   reads an earlier time again: only the very next token (t + 1) is judged then;
// - the older lease's expiry is the one its grant reported; a renewal (a hold's) only moves it
//   later while storage's clock moves forward, so a renewed lease is not judged at all across a
//   backward step (a renewal after it may shorten the lease);
// - any release of the older token invoked before the newer grant completed counts as done
//   unless it answered "not released" (a failed one may have been applied: lease writes with a
//   lost reply are BackendUnavailableError); a hold's release follows its body's last event, so
//   that event counts as a release; any revoke of the resource counts;
// - storage reports times to the microsecond or millisecond: 1 ms of slack.
inline void mutual_exclusion(const History& h, std::vector<Anomaly>& out) {
  std::map<std::pair<std::string, std::uint64_t>, std::int64_t> released;  // earliest invocation
  std::map<std::string, std::int64_t> revoked;                             // earliest invocation
  for (const auto& o : h.operations) {
    if (o.op == "release") {
      if (o.result == Result::ok && !o.ret.value("released", true)) continue;
      auto [it, fresh] = released.emplace(std::make_pair(o.args.at("resource").get<std::string>(),
                                                         o.args.at("token").get<std::uint64_t>()),
                                          o.invoked_ns);
      if (!fresh) it->second = std::min(it->second, o.invoked_ns);
    } else if (o.op == "revoke") {
      auto [it, fresh] = revoked.emplace(o.args.at("resource").get<std::string>(), o.invoked_ns);
      if (!fresh) it->second = std::min(it->second, o.invoked_ns);
    }
  }
  std::map<std::string, std::vector<Grant>> by_resource;
  for (auto& g : grants(h)) by_resource[g.resource].push_back(std::move(g));
  for (auto& [resource, gs] : by_resource) {
    std::sort(gs.begin(), gs.end(),
              [](const Grant& a, const Grant& b) { return a.token < b.token; });
    auto rv = revoked.find(resource);
    for (std::size_t j = 0; j < gs.size(); ++j) {
      const Grant& b = gs[j];
      if (!b.expires_us || !b.ttl_ms) continue;
      const std::int64_t granted_us = *b.expires_us - *b.ttl_ms * 1000;
      if (rv != revoked.end() && rv->second < b.completed_ns) continue;
      for (std::size_t i = 0; i < j; ++i) {
        const Grant& a = gs[i];
        if (a.token == b.token || a.owner == b.owner || !a.expires_us) continue;
        if (granted_us + 1000 >= *a.expires_us) continue;
        auto rl = released.find({resource, a.token});
        if (rl != released.end() && rl->second < b.completed_ns) continue;
        if (a.hold && a.last_event_ns < b.completed_ns) continue;
        if ((a.hold || b.token != a.token + 1) &&
            fault_during(h, "clock-jump-server", a.invoked_ns, b.completed_ns, std::nullopt, true))
          continue;
        out.push_back(
            {"mutual-exclusion",
             fmt::format("resource '{}': {} was granted token {} at {} us by storage's clock, "
                         "while token {} of {} was live until {} us and not released",
                         resource, describe(*b.op), b.token, granted_us, a.token, describe(*a.op),
                         *a.expires_us)});
      }
    }
  }
}

// hold() bodies stop before their lease can be lost: no body acts after another owner's
// acquisition of its resource (a newer token) completed. Not judged where no lease mechanism can
// help: the body's own client was paused (a process stopped past its ttl acts on waking before
// anything can stop it), storage's clock jumped (an early expiry the holder cannot see), or the
// resource was revoked.
inline void holds(const History& h, std::vector<Anomaly>& out) {
  std::map<std::string, std::vector<Grant>> by_resource;
  std::map<std::pair<std::string, std::uint64_t>, const Grant*> own;
  auto all = grants(h);
  for (const Grant& g : all) by_resource[g.resource].push_back(g);
  for (auto& [resource, gs] : by_resource)
    for (const Grant& g : gs) own[{resource, g.token}] = &g;
  std::map<std::string, std::int64_t> revoked;
  for (const auto& o : h.operations)
    if (o.op == "revoke") {
      auto [it, fresh] = revoked.emplace(o.args.at("resource").get<std::string>(), o.invoked_ns);
      if (!fresh) it->second = std::min(it->second, o.invoked_ns);
    }
  for (const auto& o : h.operations) {
    if (o.op != "hold_act") continue;
    const auto resource = o.args.at("resource").get<std::string>();
    const auto token = o.args.at("token").get<std::uint64_t>();
    const Grant* newer = nullptr;
    for (const Grant& g : by_resource[resource])
      if (g.token > token && g.completed_ns < o.invoked_ns &&
          (!newer || g.completed_ns < newer->completed_ns))
        newer = &g;
    if (!newer) continue;
    auto mine = own.find({resource, token});
    const std::int64_t since = mine != own.end() ? mine->second->invoked_ns : 0;
    if (fault_during(h, "pause-client", since, o.invoked_ns, o.client)) continue;
    if (fault_during(h, "clock-jump-server", since, o.invoked_ns)) continue;
    if (auto rv = revoked.find(resource); rv != revoked.end() && rv->second < o.invoked_ns)
      continue;
    out.push_back({"hold-outlived-lease",
                   fmt::format("resource '{}': the hold() body with token {} acted at {} after {} "
                               "had taken the lease with token {}",
                               resource, token, o.where, describe(*newer->op), newer->token)});
  }
}

// The fenced log: entries (client, token, n) appended under a resource with fenced commits.
inline void fenced_log(const History& h, std::vector<Anomaly>& out) {
  using Id = std::pair<int, std::int64_t>;  // (client, n)
  std::map<std::string, std::vector<const Operation*>> acquires;
  std::map<std::string, std::map<Id, const Operation*>> appends;
  std::map<std::string, const Operation*> last_read;
  for (const auto& o : h.operations) {
    if (o.op == "acquire" && o.result == Result::ok)
      acquires[o.args.at("resource").get<std::string>()].push_back(&o);
    if (o.op == "append")
      appends[o.args.at("resource").get<std::string>()]
             [{o.client, o.args.at("n").get<std::int64_t>()}] = &o;
  }
  // The newest token whose acquisition completed before t (per resource).
  auto newest_before = [&](const std::string& resource, std::int64_t t) {
    std::uint64_t top = 0;
    for (const Operation* a : acquires[resource])
      if (a->completed_ns < t) top = std::max(top, a->ret.at("token").get<std::uint64_t>());
    return top;
  };
  for (const auto& o : h.operations) {
    if (o.op == "append" && o.result == Result::ok) {
      const auto resource = o.args.at("resource").get<std::string>();
      const auto token = o.args.at("token").get<std::uint64_t>();
      const auto newer = newest_before(resource, o.invoked_ns);
      if (newer > token)
        out.push_back({"stale-write-accepted",
                       fmt::format("{} was acknowledged although token {} had been issued before "
                                   "it was invoked",
                                   describe(o), newer)});
    }
    if (o.op != "read" || o.result != Result::ok) continue;
    const auto resource = o.args.at("resource").get<std::string>();
    const json& entries = o.ret.at("entries");
    std::uint64_t previous = 0;
    std::set<Id> in_read;
    for (const json& e : entries) {
      const Id id{e.at(0).get<int>(), e.at(2).get<std::int64_t>()};
      const auto token = e.at(1).get<std::uint64_t>();
      if (token < previous)
        out.push_back(
            {"stale-write-landed", fmt::format("resource '{}': {} shows token {} after token {}",
                                               resource, describe(o), token, previous)});
      previous = std::max(previous, token);
      if (!in_read.insert(id).second)
        out.push_back(
            {"duplicate-write", fmt::format("resource '{}': {} holds client {} entry {} twice",
                                            resource, describe(o), id.first, id.second)});
      auto w = appends[resource].find(id);
      if (w == appends[resource].end()) {
        out.push_back({"unknown-write", fmt::format("resource '{}': {} holds client {} entry {}, "
                                                    "which no client appended",
                                                    resource, describe(o), id.first, id.second)});
        continue;
      }
      if (w->second->result == Result::fail)
        out.push_back({"failed-write-landed", fmt::format("{} failed, yet {} holds it",
                                                          describe(*w->second), describe(o))});
      const auto newer = newest_before(resource, w->second->invoked_ns);
      if (newer > token)
        out.push_back({"stale-write-landed",
                       fmt::format("{} landed although token {} had been issued before it was "
                                   "invoked",
                                   describe(*w->second), newer)});
    }
    auto& last = last_read[resource];
    if (!last || o.invoked_ns > last->invoked_ns) last = &o;
  }
  // Nothing acknowledged is lost: every ok append invoked before the last read completed... and
  // certainly every one that completed before the last read was invoked, is in it.
  for (const auto& [resource, read] : last_read) {
    std::set<Id> present;
    for (const json& e : read->ret.at("entries"))
      present.insert({e.at(0).get<int>(), e.at(2).get<std::int64_t>()});
    for (const auto& [id, w] : appends[resource])
      if (w->result == Result::ok && w->completed_ns < read->invoked_ns && !present.count(id))
        out.push_back({"lost-write", fmt::format("{} was acknowledged but the last read ({}) "
                                                 "does not hold it",
                                                 describe(*w), read->where)});
  }
}

// Bank: every read sees the total the bank started with.
inline void bank(const History& h, std::vector<Anomaly>& out) {
  for (const auto& o : h.operations) {
    if (o.op != "bank_read" || o.result != Result::ok) continue;
    std::int64_t total = 0;
    for (const auto& [account, amount] : o.ret.at("balances").items())
      total += amount.get<std::int64_t>();
    const auto expected = o.ret.at("total_expected").get<std::int64_t>();
    if (total != expected)
      out.push_back({"bank-total",
                     fmt::format("{} saw a total of {}, not {}", describe(o), total, expected)});
  }
}

// Idempotent increments: the final counter equals the applied increments, each applied once;
// every acknowledged one applied, no failed one applied.
inline void increments(const History& h, std::vector<Anomaly>& out) {
  std::map<std::string, const Operation*> by_id;
  const Operation* final_read = nullptr;
  for (const auto& o : h.operations) {
    if (o.op == "increment") by_id[o.args.at("id").get<std::string>()] = &o;
    if (o.op == "counter" && o.result == Result::ok &&
        (!final_read || o.invoked_ns > final_read->invoked_ns))
      final_read = &o;
  }
  if (!final_read) return;
  std::map<std::string, int> applied;
  for (const json& id : final_read->ret.at("applied")) ++applied[id.get<std::string>()];
  const auto counter = final_read->ret.at("counter").get<std::int64_t>();
  std::int64_t sum = 0;
  for (const auto& [id, n] : applied) {
    sum += n;
    if (n > 1)
      out.push_back({"increment-duplicated", fmt::format("increment {} applied {} times", id, n)});
    auto it = by_id.find(id);
    if (it == by_id.end())
      out.push_back({"unknown-write", fmt::format("increment {} applied, never invoked", id)});
    else if (it->second->result == Result::fail)
      out.push_back(
          {"failed-write-landed", fmt::format("{} failed, yet applied", describe(*it->second))});
  }
  if (counter != sum)
    out.push_back({"increment-duplicated",
                   fmt::format("the counter is {} but {} increments are recorded", counter, sum)});
  // Versions: every commit on the counter's resource is one increment writing the counter and a
  // new marker, so the resource's version counts the commits applied. A commit applied twice with
  // identical writes (a replay applied again) leaves every value as it was; only the version shows
  // it.
  if (final_read->ret.contains("version")) {
    const auto version = final_read->ret.at("version").get<std::int64_t>();
    if (version != static_cast<std::int64_t>(applied.size()))
      out.push_back({"increment-reapplied",
                     fmt::format("the counter's resource is at version {} but {} increments are "
                                 "applied: a commit was applied more than once",
                                 version, applied.size())});
  }
  for (const auto& [id, o] : by_id)
    if (o->result == Result::ok && o->completed_ns < final_read->invoked_ns && !applied.count(id))
      out.push_back(
          {"lost-write", fmt::format("{} was acknowledged but is not applied", describe(*o))});
}

}  // namespace check

// List append: Adya's anomalies as Elle infers them from append-only lists.
namespace elle {

struct Txn {
  const Operation* op;
  std::vector<std::tuple<std::string, std::string, json>> mops;  // (f, key, value)
  bool snapshot = false;  // snapshot isolation: its reads are not validated at commit
};

// Strongly connected components (Tarjan, iterative); returns each node's component id.
inline std::vector<int> components(int n, const std::vector<std::vector<int>>& edges) {
  std::vector<int> index(n, -1), low(n, 0), comp(n, -1);
  std::vector<bool> on(n, false);
  std::vector<int> stack;
  int next = 0, ncomp = 0;
  for (int root = 0; root < n; ++root) {
    if (index[root] != -1) continue;
    std::vector<std::pair<int, std::size_t>> work{{root, 0}};
    while (!work.empty()) {
      auto& [v, i] = work.back();
      if (i == 0) {
        index[v] = low[v] = next++;
        stack.push_back(v);
        on[v] = true;
      }
      if (i < edges[v].size()) {
        int w = edges[v][i++];
        if (index[w] == -1)
          work.push_back({w, 0});
        else if (on[w])
          low[v] = std::min(low[v], index[w]);
        continue;
      }
      if (low[v] == index[v]) {
        int w;
        do {
          w = stack.back();
          stack.pop_back();
          on[w] = false;
          comp[w] = ncomp;
        } while (w != v);
        ++ncomp;
      }
      const int done = v;
      work.pop_back();
      if (!work.empty()) low[work.back().first] = std::min(low[work.back().first], low[done]);
    }
  }
  return comp;
}

// rw_free: an anti-dependency out of a snapshot-isolation transaction on a key it did not write.
// Every other edge points forward in commit order (a validated read was still current when its
// transaction committed; writes are checked in every mode), but a snapshot transaction's unwritten
// reads are not validated, so such an edge may point backward: write skew is allowed there. Cycles
// are looked for without these edges (so snapshot's G-single is not caught; sound, not complete).
enum Dep { ww = 1, wr = 2, rw = 4, rw_free = 8 };

inline void check(const History& h, std::vector<Anomaly>& out) {
  std::vector<Txn> txns;
  for (const auto& o : h.operations) {
    if (o.op != "txn") continue;
    Txn t{&o, {}, o.args.value("isolation", std::string()) == "snapshot"};
    const json& mops = o.result == Result::ok ? o.ret.at("mops") : o.args.at("mops");
    for (const json& m : mops)
      t.mops.emplace_back(m.at(0).get<std::string>(), m.at(1).get<std::string>(), m.at(2));
    txns.push_back(std::move(t));
  }
  if (txns.empty()) return;
  // Who appended each (key, value), and in which position of that transaction's appends to key.
  std::map<std::pair<std::string, std::string>, int> writer;
  std::map<std::pair<std::string, std::string>, bool> last_of_writer;
  for (int i = 0; i < static_cast<int>(txns.size()); ++i) {
    std::map<std::string, std::string> final_append;
    for (auto& [f, key, value] : txns[i].mops)
      if (f == "append") {
        writer[{key, value.dump()}] = i;
        final_append[key] = value.dump();
      }
    for (auto& [f, key, value] : txns[i].mops)
      if (f == "append") last_of_writer[{key, value.dump()}] = final_append[key] == value.dump();
  }
  // The version order of each key: its longest read; every other read must be a prefix of it.
  // And the last read of each key (by invocation), for lost appends below.
  std::map<std::string, std::vector<std::string>> order;
  std::map<std::string, std::pair<const Operation*, std::set<std::string>>> last_read;
  for (const auto& t : txns) {
    if (t.op->result != Result::ok) continue;
    for (auto& [f, key, value] : t.mops) {
      if (f != "r" || value.is_null()) continue;
      std::vector<std::string> list;
      for (const json& v : value) list.push_back(v.dump());
      if (auto& [op, seen] = last_read[key]; !op || op->invoked_ns < t.op->invoked_ns) {
        op = t.op;
        seen = std::set<std::string>(list.begin(), list.end());
      }
      auto& known = order[key];
      const bool known_longer = known.size() >= list.size();
      const auto& shorter = known_longer ? list : known;
      const auto& longer = known_longer ? known : list;
      if (!std::equal(shorter.begin(), shorter.end(), longer.begin()))
        out.push_back({"incompatible-order",
                       fmt::format("key {}: {} read a list that no single order of appends "
                                   "explains (known {} elements)",
                                   key, describe(*t.op), known.size())});
      else if (!known_longer)
        known = list;
    }
  }
  // Nothing acknowledged is lost: an append whose transaction completed before the last read of
  // its key was invoked is in that read (the harness's final reads come after every client
  // stopped, so they must see every acknowledged append).
  for (const auto& t : txns) {
    if (t.op->result != Result::ok) continue;
    for (auto& [f, key, value] : t.mops) {
      if (f != "append") continue;
      auto r = last_read.find(key);
      if (r == last_read.end() || t.op->completed_ns >= r->second.first->invoked_ns) continue;
      if (!r->second.second.count(value.dump()))
        out.push_back({"lost-write", fmt::format("key {}: {} was acknowledged, yet the later {} "
                                                 "does not hold its append of {}",
                                                 key, describe(*t.op), describe(*r->second.first),
                                                 value.dump())});
    }
  }
  const int n = static_cast<int>(txns.size());
  std::map<std::pair<int, int>, int> deps;  // (from, to) -> Dep bits
  auto edge = [&](int from, int to, Dep d) {
    if (from != to) deps[{from, to}] |= d;
  };
  for (const auto& [key, versions] : order)
    for (std::size_t i = 0; i + 1 < versions.size(); ++i) {
      auto a = writer.find({key, versions[i]}), b = writer.find({key, versions[i + 1]});
      if (a != writer.end() && b != writer.end()) edge(a->second, b->second, ww);
    }
  for (int i = 0; i < n; ++i) {
    const Txn& t = txns[i];
    if (t.op->result != Result::ok) continue;
    for (auto& [f, key, value] : t.mops) {
      if (f != "r" || value.is_null()) continue;
      for (const json& v : value) {
        auto w = writer.find({key, v.dump()});
        if (w == writer.end()) {
          out.push_back({"unknown-write", fmt::format("key {}: {} read {}, which nobody appended",
                                                      key, describe(*t.op), v.dump())});
        } else if (txns[w->second].op->result == Result::fail) {
          out.push_back(
              {"G1a", fmt::format("key {}: {} read {} appended by the failed {}", key,
                                  describe(*t.op), v.dump(), describe(*txns[w->second].op))});
        }
      }
      if (!value.empty()) {
        const std::string last = value.back().dump();
        auto w = writer.find({key, last});
        if (w != writer.end() && w->second != i) {
          edge(w->second, i, wr);
          if (!last_of_writer[{key, last}])
            out.push_back(
                {"G1b", fmt::format("key {}: {} read {}, an intermediate append of {}", key,
                                    describe(*t.op), last, describe(*txns[w->second].op))});
        }
      }
      const auto& versions = order[key];
      if (value.size() < versions.size()) {
        auto w = writer.find({key, versions[value.size()]});
        bool wrote = false;
        for (auto& [f2, key2, value2] : t.mops) wrote = wrote || (f2 == "append" && key2 == key);
        if (w != writer.end()) edge(i, w->second, t.snapshot && !wrote ? rw_free : rw);
      }
    }
  }
  // Cycles: G0 in ww alone; G1c in ww+wr with a wr edge; G2 in all with an rw edge.
  auto cycles = [&](int allowed, int required, const char* kind) {
    std::vector<std::vector<int>> adj(n);
    for (const auto& [e, d] : deps)
      if (d & allowed) adj[e.first].push_back(e.second);
    const auto comp = components(n, adj);
    std::map<int, std::vector<int>> members;
    for (int i = 0; i < n; ++i) members[comp[i]].push_back(i);
    for (const auto& [c, nodes] : members) {
      if (nodes.size() < 2) continue;
      bool has_required = false;
      for (const auto& [e, d] : deps)
        if ((d & allowed) && comp[e.first] == c && comp[e.second] == c && (d & required))
          has_required = true;
      if (!has_required) continue;
      std::string list;
      for (std::size_t k = 0; k < nodes.size() && k < 6; ++k)
        list += (k ? "; " : "") + describe(*txns[nodes[k]].op);
      out.push_back({kind, fmt::format("a dependency cycle among {} transactions: {}{}",
                                       nodes.size(), list, nodes.size() > 6 ? "; ..." : "")});
    }
  };
  cycles(ww, ww, "G0");
  cycles(ww | wr, wr, "G1c");
  cycles(ww | wr | rw, rw, "G2");
}

}  // namespace elle

// Every check on one history.
inline std::vector<Anomaly> check_all(const History& h) {
  std::vector<Anomaly> out;
  try {
    check::tokens(h, out);
    check::mutual_exclusion(h, out);
    check::holds(h, out);
    check::fenced_log(h, out);
    check::bank(h, out);
    check::increments(h, out);
    elle::check(h, out);
  } catch (const json::exception& e) {
    throw HistoryError(fmt::format("an operation lacks a field its workload needs: {}", e.what()));
  }
  return out;
}

}  // namespace statepact::chaos
