// The cost of running on a Redis Cluster: the same lease and commit operations at 64 in flight on
// one server and on a cluster, in the same run, rounds alternating which goes first; the table
// shows each side's median round and the ratio cluster / one server. Needs
// STATEPACT_TEST_REDIS_URL and STATEPACT_TEST_REDIS_CLUSTER_URL (scripts/servers/redis.sh and
// redis_cluster.sh start both), or the two URLs as argv[1] and argv[2]; argv[3] is the number of
// rounds (default 5). On one machine the cluster's six servers share its cores with the client
// (and each master's writes go to a replica, which one server does not have), so that ratio is the
// cost of routing plus that of five more processes. The routing alone is measured on two servers
// the benchmark starts for itself with the same settings, a plain one and a cluster of one master
// (own_redis.hpp): same server work, so their ratio is what cluster mode costs. The client's CPU
// time per call is shown too. A benchmark, never a timed test.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>

#include <fmt/format.h>
#include <asio/io_context.hpp>

#include <statepact/redis.hpp>

#include "median.hpp"
#include "own_redis.hpp"
#include "workers.hpp"

namespace sp = statepact;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int in_flight = 64;
constexpr int per_worker = 300;

struct Stats {
  double per_second = 0, p50_ms = 0, p99_ms = 0;
  double client_us = 0;  // this process's CPU time (user + system) per call
};

double cpu_seconds() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

// One side: a backend and, per worker, a registered resource of its own (names spread over every
// slot) and the lease it holds on it.
struct Side {
  std::string name;
  int base;  // the side its ratios are against
  std::unique_ptr<sp::RedisBackend> backend;
  std::vector<std::string> resources;
  std::vector<sp::Lease> leases;
};

// `op(side, worker, i)` per_worker times on each of the in_flight workers.
template <class Op>
Stats measure(asio::io_context& io, Side& side, Op op) {
  std::vector<std::vector<double>> lat(in_flight);
  const double cpu0 = cpu_seconds();
  const auto t0 = Clock::now();
  statepact::bench::run_to_end(io, [&]() -> asio::awaitable<void> {
    co_await statepact::bench::side_by_side(in_flight, [&](int w) -> asio::awaitable<void> {
      for (int i = 0; i < per_worker; ++i) {
        const auto start = Clock::now();
        co_await op(side, w, i);
        lat[w].push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
      }
    });
  });
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  std::vector<double> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  std::sort(all.begin(), all.end());
  Stats s;
  s.per_second = all.size() / seconds;
  s.p50_ms = all[all.size() / 2];
  s.p99_ms = all[all.size() * 99 / 100];
  s.client_us = cpu * 1e6 / all.size();
  return s;
}

asio::awaitable<void> commit_one(Side& side, int w, int i, bool fenced) {
  sp::CommitRequest req;
  req.agent_id = "bench";
  req.resources.push_back(side.resources[w]);
  if (fenced) req.fences.push_back(sp::FenceCheck{side.resources[w], side.leases[w].token});
  sp::WriteOp write;
  write.resource = side.resources[w];
  write.key = "k";
  write.value = sp::Value(i);
  req.writes.push_back(std::move(write));
  co_await side.backend->commit(std::move(req));
}

}  // namespace

int main(int argc, char** argv) {
  const char* single_env = std::getenv("STATEPACT_TEST_REDIS_URL");
  const char* cluster_env = std::getenv("STATEPACT_TEST_REDIS_CLUSTER_URL");
  const std::string single_url = argc > 1 ? argv[1] : single_env ? single_env : "";
  const std::string cluster_url = argc > 2 ? argv[2] : cluster_env ? cluster_env : "";
  if (single_url.empty() || cluster_url.empty()) {
    std::fprintf(
        stderr,
        "usage: statepact_bench_redis_cluster redis://one-server redis://cluster-node "
        "[rounds] (or set STATEPACT_TEST_REDIS_URL and STATEPACT_TEST_REDIS_CLUSTER_URL)\n");
    return 2;
  }
  const int rounds = argc > 3 ? std::max(1, std::atoi(argv[3])) : 5;
  std::random_device rd;
  const std::string run = fmt::format("cbench-{:08x}", rd());
  asio::io_context io;

  // The cluster twice: resources spread over every slot (so over the three masters), and all in
  // one group (one slot, one master, one connection: the routing without the spread). Then the
  // routing alone: a plain server and a one-master cluster of the benchmark's own.
  const statepact::bench::OwnRedis own_plain(false);
  const statepact::bench::OwnRedis own_cluster(true);
  struct Plan {
    const char* name;
    std::string url;
    int base;
    bool grouped;
  };
  const std::vector<Plan> plans = {{"one server", single_url, 0, false},
                                   {"cluster, spread", cluster_url, 0, false},
                                   {"cluster, one group", cluster_url, 0, true},
                                   {"own plain server", own_plain.url(), 3, false},
                                   {"own one-master cluster", own_cluster.url(), 3, false}};
  const int n_sides = static_cast<int>(plans.size());
  std::vector<Side> sides(plans.size());
  for (int k = 0; k < n_sides; ++k) {
    Side& side = sides[k];
    side.name = plans[k].name;
    side.base = plans[k].base;
    side.backend = std::make_unique<sp::RedisBackend>(io.get_executor(), plans[k].url);
    for (int w = 0; w < in_flight; ++w)
      side.resources.push_back(plans[k].grouped ? fmt::format("{{{}}}-{}", run, w)
                                                : fmt::format("{}-{}-{}", run, k, w));
    side.leases.resize(in_flight);
    statepact::bench::run_to_end(io, [&]() -> asio::awaitable<void> {
      // A listing asks the server whether it is a cluster (CLUSTER SLOTS), so the one-master
      // cluster's calls are routed by slot from the start, as they would be after a MOVED.
      co_await side.backend->list_leases(run + "-none-*");
      for (const auto& r : side.resources) co_await side.backend->register_resource(r);
    });
  }

  // acquire + renew + fenced commit + release: what a worker holding a job does; then each alone.
  const std::vector<std::string> ops = {"lease cycle", "acquire", "renew", "commit", "release"};
  std::vector<std::map<std::string, std::vector<Stats>>> results(sides.size());
  for (int round = 0; round < rounds; ++round) {
    for (const auto& op : ops) {
      for (int k = 0; k < n_sides; ++k) {
        const int which = (k + round) % n_sides;
        Side& side = sides[which];
        const std::string owner = fmt::format("o-{}-{}", round, op);
        Stats s;
        if (op == "lease cycle") {
          s = measure(io, side, [&](Side& sd, int w, int i) -> asio::awaitable<void> {
            const std::string cycle_owner = fmt::format("{}-{}", owner, i);
            sd.leases[w] = co_await sd.backend->acquire_lease(sd.resources[w], cycle_owner,
                                                              std::chrono::minutes(1));
            sd.leases[w] = co_await sd.backend->renew_lease(sd.leases[w], std::nullopt);
            co_await commit_one(sd, w, i, true);
            co_await sd.backend->release_lease(sd.leases[w]);
          });
        } else if (op == "acquire") {
          // The same owner again: each call extends its live lease (one script, like a new one).
          s = measure(io, side, [&](Side& sd, int w, int) -> asio::awaitable<void> {
            sd.leases[w] =
                co_await sd.backend->acquire_lease(sd.resources[w], owner, std::chrono::minutes(1));
          });
        } else if (op == "renew") {
          s = measure(io, side, [&](Side& sd, int w, int) -> asio::awaitable<void> {
            sd.leases[w] = co_await sd.backend->renew_lease(sd.leases[w], std::nullopt);
          });
        } else if (op == "commit") {
          s = measure(io, side, [&](Side& sd, int w, int i) -> asio::awaitable<void> {
            co_await commit_one(sd, w, i, true);
          });
        } else {
          // Release, then take it again for the next call: two scripts per call.
          s = measure(io, side, [&](Side& sd, int w, int) -> asio::awaitable<void> {
            co_await sd.backend->release_lease(sd.leases[w]);
            sd.leases[w] =
                co_await sd.backend->acquire_lease(sd.resources[w], owner, std::chrono::minutes(1));
          });
        }
        results[which][op].push_back(s);
      }
    }
    // The next round's lease cycle starts with free resources.
    for (auto& side : sides)
      statepact::bench::run_to_end(io, [&]() -> asio::awaitable<void> {
        for (auto& lease : side.leases)
          if (lease.token != 0) co_await side.backend->release_lease(lease);
      });
  }
  auto med = [&](int side, const std::string& op) {
    return statepact::bench::median_by(results[side][op],
                                       [](const Stats& s) { return s.per_second; });
  };
  auto table = [&](const char* title, int first, int last) {
    std::printf(
        "%s\n\n| op (64 in flight) | where | ops/s | p50 ms | p99 ms | client CPU us/op | "
        "throughput / %s | client CPU / %s |\n|---|---|---|---|---|---|---|---|\n",
        title, sides[first].name.c_str(), sides[first].name.c_str());
    for (const auto& op : ops) {
      for (int k = first; k <= last; ++k) {
        const Stats base = med(sides[k].base, op);
        const Stats x = med(k, op);
        std::printf("| %s | %s | %.0f | %.2f | %.2f | %.1f | %.2f | %.2f |\n", op.c_str(),
                    sides[k].name.c_str(), x.per_second, x.p50_ms, x.p99_ms, x.client_us,
                    base.per_second > 0 ? x.per_second / base.per_second : 0.0,
                    base.client_us > 0 ? x.client_us / base.client_us : 0.0);
      }
    }
    std::printf("\n");
  };
  table("The test servers: one server against the 3-master, 3-replica cluster", 0, 2);
  table("The routing alone: the same server plain and as a one-master cluster", 3, 4);
  std::printf("\n%d rounds, %d workers x %d calls per side and op; medians of the rounds.\n",
              rounds, in_flight, per_worker);
  return 0;
}
