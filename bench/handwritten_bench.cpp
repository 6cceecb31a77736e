// The whole transaction through the public API against what a team would write by hand, on the
// same servers in the same run: a one-key fenced write (session with the lease's fence, write,
// commit) against one hand-written statement (pgbench) or script (redis-benchmark), and a lease
// acquire against one hand-written INSERT ... ON CONFLICT. The hand-written calls live beside this
// file in bench/handwritten/, each doing only what the rule needs. A benchmark, never a timed test.
//
// Usage: statepact_bench_handwritten [postgres|redis|all] [seconds per run, default 2]
//        [rounds, default 3]
// Servers from STATEPACT_TEST_POSTGRES_URL and STATEPACT_TEST_REDIS_URL; pgbench, psql,
// redis-benchmark and redis-cli on PATH.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/postgres.hpp>
#include <statepact/redis.hpp>
#include <statepact/statepact.hpp>

#include "median.hpp"
#include "redis_address.hpp"
#include "shell.hpp"
#include "workers.hpp"

namespace sp = statepact;
using sp::bench::env_or;
using sp::bench::shell;
using sp::bench::shell_quoted;
using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

namespace {

const std::string kDir = STATEPACT_BENCH_DIR "/handwritten/";

enum class Op { fenced_write, acquire };

const char* name_of(Op op) {
  return op == Op::fenced_write ? "one-key fenced write" : "acquire";
}

std::string resource(const std::string& prefix, int worker) {
  return fmt::format("{}-{}", prefix, worker + 1);
}

// Ours: `workers` coroutines on one thread, each on its own resource with its own lease, for
// `length`; returns operations per second. Registration and leases come before the clock starts.
template <class B>
double ours(std::function<std::unique_ptr<B>(asio::io_context&, int)> make, Op op,
            const std::string& prefix, int workers, std::chrono::seconds length) {
  asio::io_context io(1);
  auto backend = make(io, workers);
  sp::Manager<B> manager(*backend);
  std::atomic<long> count{0};
  Steady::time_point t0, t1;
  auto body = [&]() -> asio::awaitable<void> {
    std::vector<sp::Lease> leases;
    for (int w = 0; w < workers; ++w) {
      co_await backend->register_resource(resource(prefix, w), sp::Value::object());
      leases.push_back(co_await backend->acquire_lease(resource(prefix, w), "bench", 30s));
    }
    t0 = Steady::now();
    const auto end = t0 + length;
    co_await sp::bench::side_by_side(workers, [&](int w) -> asio::awaitable<void> {
      const sp::Lease lease = leases[static_cast<std::size_t>(w)];
      for (int i = 0; Steady::now() < end; ++i) {
        if (op == Op::fenced_write) {
          auto s = co_await manager.session(
              sp::SessionOptions("bench").resource(lease.resource).fence(lease.token));
          co_await s.write("k", sp::Value(i));
          co_await s.commit();
        } else {
          auto again = co_await backend->acquire_lease(lease.resource, "bench", 30s);
          if (again.token != lease.token) throw std::runtime_error("token changed");
        }
        ++count;
      }
    });
    t1 = Steady::now();
  };
  sp::bench::run_to_end(io, body);
  return static_cast<double>(count.load()) / std::chrono::duration<double>(t1 - t0).count();
}

// ---- PostgreSQL: pgbench running bench/handwritten/postgres_*.sql ------------------------------

void postgres_setup(const std::string& url, const std::string& prefix, int workers) {
  shell(fmt::format("psql -q -v ON_ERROR_STOP=1 -f {} {}",
                    shell_quoted(kDir + "postgres_setup.sql"), shell_quoted(url)));
  // Each pgbench client holds a live lease with token 1 on its own resource.
  std::string sql;
  for (int w = 0; w < workers; ++w)
    sql += fmt::format(
        "INSERT INTO handwritten_leases VALUES ('{}', 'bench', 1, now() + interval '1 hour') "
        "ON CONFLICT DO NOTHING;",
        resource(prefix, w));
  shell(fmt::format("psql -q -v ON_ERROR_STOP=1 -c {} {}", shell_quoted(sql), shell_quoted(url)));
}

double pgbench(const std::string& url, const std::string& prefix, Op op, int clients,
               std::chrono::seconds length) {
  const std::string file =
      kDir + (op == Op::fenced_write ? "postgres_fenced_write.sql" : "postgres_acquire.sql");
  const std::string out =
      shell(fmt::format("{} -n -M prepared -D prefix={} -f {} -c {} -j {} -T {} {}",
                        env_or("STATEPACT_PGBENCH", "pgbench"), prefix, shell_quoted(file), clients,
                        clients, length.count(), shell_quoted(url)));
  std::istringstream lines(out);
  double tps = -1;
  for (std::string line; std::getline(lines, line);) std::sscanf(line.c_str(), "tps = %lf", &tps);
  return tps;
}

// ---- Redis: redis-benchmark running bench/handwritten/redis_fenced_write.lua --------------------

using RedisServer = sp::bench::RedisAddress;

// Loads the script and sets the fence of the 8 resources redis-benchmark writes; returns the SHA.
std::string redis_setup(const RedisServer& srv, const std::string& prefix) {
  std::ifstream f(kDir + "redis_fenced_write.lua");
  std::stringstream source;
  source << f.rdbuf();
  std::string sha = shell(fmt::format("redis-cli -h {} -p {} SCRIPT LOAD {}", srv.host, srv.port,
                                      shell_quoted(source.str())));
  sha.erase(sha.find_last_not_of(" \r\n") + 1);
  for (int i = 0; i < 8; ++i)
    shell(fmt::format("redis-cli -h {} -p {} SET {} 1", srv.host, srv.port,
                      shell_quoted(fmt::format("{}:fence:{{{:012d}}}", prefix, i))));
  return sha;
}

// redis-benchmark --csv: "test","rps",...; the keys' __rand_int__ picks one of 8 resources.
double redis_benchmark(const RedisServer& srv, const std::string& sha, const std::string& prefix,
                       int clients, int requests) {
  const std::string out =
      shell(fmt::format("redis-benchmark -h {} -p {} -c {} -n {} -r 8 --csv EVALSHA {} 2 "
                        "{}:fence:{{__rand_int__}} {}:state:{{__rand_int__}} 1 k 1",
                        srv.host, srv.port, clients, requests, sha, prefix, prefix));
  std::istringstream lines(out);
  std::string last;
  for (std::string line; std::getline(lines, line);)
    if (!line.empty()) last = line;
  std::vector<std::string> cols;
  std::stringstream ss(last);
  for (std::string c; std::getline(ss, c, ',');) {
    c.erase(std::remove(c.begin(), c.end(), '"'), c.end());
    cols.push_back(c);
  }
  try {
    return cols.size() >= 2 ? std::stod(cols[1]) : -1;
  } catch (...) {
    return -1;
  }
}

void row(const char* backend, Op op, int workers, double mine, double theirs, double target) {
  const double ratio = theirs > 0 ? mine / theirs : 0;
  std::printf("| %s | %s | %d | %.0f | %.0f | %.2f | %.1f | %s |\n", backend, name_of(op), workers,
              mine, theirs, ratio, target, ratio >= target ? "met" : "missed");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  const std::string which = argc > 1 ? argv[1] : "all";
  if (which != "all" && which != "postgres" && which != "redis") {
    std::fprintf(stderr,
                 "usage: statepact_bench_handwritten [postgres|redis|all] [seconds] "
                 "[rounds]\n");
    return 2;
  }
  const std::chrono::seconds length(argc > 2 ? std::max(1, std::atoi(argv[2])) : 2);
  const int rounds = argc > 3 ? std::max(1, std::atoi(argv[3])) : 3;
  std::mt19937_64 rng(std::random_device{}());
  const std::string prefix = fmt::format("hw{:08x}", static_cast<unsigned>(rng()));
  std::printf(
      "| backend | operation | workers | statepact ops/s | hand-written ops/s | ratio | target | "
      "|\n|---|---|---|---|---|---|---|---|\n");
  // Rounds alternate who goes first; each side's median over the rounds.
  auto compare = [&](auto&& mine, auto&& theirs) {
    std::vector<double> a, b;
    for (int round = 0; round < rounds; ++round) {
      if (round % 2 == 1) b.push_back(theirs());
      a.push_back(mine());
      if (round % 2 == 0) b.push_back(theirs());
    }
    auto id = [](double x) { return x; };
    return std::pair(sp::bench::median_by(a, id), sp::bench::median_by(b, id));
  };
  const std::string pg_url = env_or("STATEPACT_TEST_POSTGRES_URL", "");
  if ((which == "all" || which == "postgres") && !pg_url.empty()) {
    std::function<std::unique_ptr<sp::PostgresBackend>(asio::io_context&, int)> make =
        [&](asio::io_context& io, int workers) {
          return std::make_unique<sp::PostgresBackend>(
              io.get_executor(), pg_url,
              sp::PostgresOptions().pool_size(static_cast<std::size_t>(workers)));
        };
    for (int workers : {1, 8}) {
      postgres_setup(pg_url, prefix + "-pg", workers);
      for (Op op : {Op::fenced_write, Op::acquire}) {
        const auto [mine, theirs] =
            compare([&] { return ours(make, op, prefix + "-pg", workers, length); },
                    [&] { return pgbench(pg_url, prefix + "-pg", op, workers, length); });
        row("PostgreSQL", op, workers, mine, theirs, op == Op::fenced_write ? 0.5 : 0.8);
      }
    }
  }
  const std::string redis_url = env_or("STATEPACT_TEST_REDIS_URL", "");
  if ((which == "all" || which == "redis") && !redis_url.empty()) {
    const RedisServer srv = sp::bench::redis_address(redis_url);
    const std::string sha = redis_setup(srv, prefix);
    std::function<std::unique_ptr<sp::RedisBackend>(asio::io_context&, int)> make =
        [&](asio::io_context& io, int) {
          return std::make_unique<sp::RedisBackend>(io.get_executor(), redis_url);
        };
    for (int workers : {1, 8}) {
      // redis-benchmark runs a fixed count: about what ours did in the same time at 1 worker.
      const int requests = workers == 1 ? 20000 : 80000;
      const auto [mine, theirs] =
          compare([&] { return ours(make, Op::fenced_write, prefix + "-redis", workers, length); },
                  [&] { return redis_benchmark(srv, sha, prefix, workers, requests); });
      row("Redis", Op::fenced_write, workers, mine, theirs, 0.8);
    }
  }
  std::printf(
      "\n%d rounds of %lld s for ours, alternating who goes first; each side's median. Ours: the "
      "public API, one coroutine per worker on one thread; hand-written: pgbench / "
      "redis-benchmark with one connection per worker.\n",
      rounds, static_cast<long long>(length.count()));
  return 0;
}
