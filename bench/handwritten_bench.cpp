// The whole transaction through the public API against what a team would write by hand, on the
// same servers in the same run: a one-key fenced write (session with the lease's fence, write,
// commit), a lease acquire (by its owner, extending it), a renew, and a release (after an acquire:
// a release needs a lease, so the pair is one operation), each against one hand-written statement
// (pgbench) or script (redis-benchmark; the release pair from threads with blocking hiredis
// connections, since redis-benchmark sends one command per request). The hand-written calls live
// beside this file in bench/handwritten/, each doing only what the rule needs. A benchmark, never
// a timed test.
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
#include <thread>
#include <vector>

#include <hiredis/hiredis.h>

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

enum class Op { fenced_write, acquire, renew, release };

const char* name_of(Op op) {
  switch (op) {
    case Op::fenced_write:
      return "one-key fenced write";
    case Op::acquire:
      return "acquire";
    case Op::renew:
      return "renew";
    case Op::release:
      return "acquire + release";
  }
  return "?";
}

const char* file_of(Op op) {
  switch (op) {
    case Op::fenced_write:
      return "fenced_write";
    case Op::acquire:
      return "acquire";
    case Op::renew:
      return "renew";
    case Op::release:
      return "release";
  }
  return "?";
}

// The targets of the comparison: a fenced write against hand-written SQL at 0.5, everything
// else at 0.8.
double target_of(const char* backend, Op op) {
  return op == Op::fenced_write && std::string(backend) == "PostgreSQL" ? 0.5 : 0.8;
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
        } else if (op == Op::acquire) {
          auto again = co_await backend->acquire_lease(lease.resource, "bench", 30s);
          if (again.token != lease.token) throw std::runtime_error("token changed");
        } else if (op == Op::renew) {
          co_await backend->renew_lease(lease);
        } else {
          auto held = co_await backend->acquire_lease(lease.resource, "bench", 30s);
          if (!co_await backend->release_lease(held)) throw std::runtime_error("release refused");
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
  // Each pgbench client holds a live lease with token 1 on its own resource (again, after the
  // release pairs of an earlier round moved the tokens on).
  std::string sql;
  for (int w = 0; w < workers; ++w)
    sql += fmt::format(
        "INSERT INTO handwritten_leases VALUES ('{}', 'bench', 1, now() + interval '1 hour') "
        "ON CONFLICT (resource) DO UPDATE SET owner = 'bench', token = 1, "
        "expires_at = EXCLUDED.expires_at;",
        resource(prefix, w));
  shell(fmt::format("psql -q -v ON_ERROR_STOP=1 -c {} {}", shell_quoted(sql), shell_quoted(url)));
}

double pgbench(const std::string& url, const std::string& prefix, Op op, int clients,
               std::chrono::seconds length) {
  const std::string file = kDir + fmt::format("postgres_{}.sql", file_of(op));
  const std::string out =
      shell(fmt::format("{} -n -M prepared -D prefix={} -f {} -c {} -j {} -T {} {}",
                        env_or("STATEPACT_PGBENCH", "pgbench"), prefix, shell_quoted(file), clients,
                        clients, length.count(), shell_quoted(url)));
  std::istringstream lines(out);
  double tps = -1;
  for (std::string line; std::getline(lines, line);) std::sscanf(line.c_str(), "tps = %lf", &tps);
  return tps;
}

// ---- Redis: redis-benchmark running bench/handwritten/redis_*.lua -----------------------------

using RedisServer = sp::bench::RedisAddress;

struct RedisScripts {
  std::string fenced_write, acquire, renew, release;  // SHAs
};

// Loads the scripts, sets the fence of the 8 resources redis-benchmark writes, and gives each of
// the 8 a lease of "bench" with token 1 (renewed by the renew script, extended by the acquire).
RedisScripts redis_setup(const RedisServer& srv, const std::string& prefix) {
  const std::string cli = fmt::format("redis-cli -h {} -p {}", srv.host, srv.port);
  auto load = [&](const char* name) {
    std::ifstream f(kDir + fmt::format("redis_{}.lua", name));
    std::stringstream source;
    source << f.rdbuf();
    std::string sha = shell(fmt::format("{} SCRIPT LOAD {}", cli, shell_quoted(source.str())));
    sha.erase(sha.find_last_not_of(" \r\n") + 1);
    return sha;
  };
  RedisScripts s{load("fenced_write"), load("acquire"), load("renew"), load("release")};
  for (int i = 0; i < 8; ++i) {
    shell(fmt::format("{} SET {} 1", cli,
                      shell_quoted(fmt::format("{}:fence:{{{:012d}}}", prefix, i))));
    shell(fmt::format("{} EVALSHA {} 2 {} {} bench 3600000", cli, s.acquire,
                      shell_quoted(fmt::format("{}:hwlease:{{{:012d}}}", prefix, i)),
                      shell_quoted(fmt::format("{}:hwfence:{{{:012d}}}", prefix, i))));
  }
  return s;
}

// redis-benchmark --csv: "test","rps",...; the keys' __rand_int__ picks one of 8 resources.
double redis_benchmark(const RedisServer& srv, const RedisScripts& sha, Op op,
                       const std::string& prefix, int clients, int requests) {
  std::string call;
  if (op == Op::fenced_write)
    call = fmt::format("{} 2 {}:fence:{{__rand_int__}} {}:state:{{__rand_int__}} 1 k 1",
                       sha.fenced_write, prefix, prefix);
  else if (op == Op::acquire)
    call = fmt::format("{} 2 {}:hwlease:{{__rand_int__}} {}:hwfence:{{__rand_int__}} bench 3600000",
                       sha.acquire, prefix, prefix);
  else
    call = fmt::format("{} 1 {}:hwlease:{{__rand_int__}} bench 1 3600000", sha.renew, prefix);
  const std::string out =
      shell(fmt::format("redis-benchmark -h {} -p {} -c {} -n {} -r 8 --csv EVALSHA {}", srv.host,
                        srv.port, clients, requests, call));
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

// The hand-written acquire + release pair on Redis: `clients` threads, each with its own blocking
// hiredis connection and its own lease, acquire and then release with the token the acquire gave,
// for `length`; pairs per second.
double redis_release_pairs(const RedisServer& srv, const RedisScripts& sha,
                           const std::string& prefix, int clients, std::chrono::seconds length) {
  std::atomic<long> pairs{0};
  std::atomic<bool> failed{false};
  const auto t0 = Steady::now(), end = t0 + length;
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c)
    threads.emplace_back([&, c] {
      redisContext* ctx = redisConnect(srv.host.c_str(), srv.port);
      const std::string lease = fmt::format("{}:hwpair:{{{}}}", prefix, c);
      const std::string fence = fmt::format("{}:hwpairfence:{{{}}}", prefix, c);
      while (ctx && !ctx->err && !failed && Steady::now() < end) {
        auto* a = static_cast<redisReply*>(redisCommand(ctx, "EVALSHA %s 2 %s %s pair 30000",
                                                        sha.acquire.c_str(), lease.c_str(),
                                                        fence.c_str()));
        const long long token = a && a->type == REDIS_REPLY_INTEGER ? a->integer : -1;
        if (a) freeReplyObject(a);
        auto* r = static_cast<redisReply*>(redisCommand(ctx, "EVALSHA %s 1 %s pair %lld",
                                                        sha.release.c_str(), lease.c_str(), token));
        const bool released = r && r->type == REDIS_REPLY_INTEGER && r->integer == 1;
        if (r) freeReplyObject(r);
        if (token < 0 || !released) failed = true;
        ++pairs;
      }
      if (!ctx || ctx->err) failed = true;
      if (ctx) redisFree(ctx);
    });
  for (auto& t : threads) t.join();
  if (failed) throw std::runtime_error("the hand-written acquire + release pair failed");
  return static_cast<double>(pairs.load()) /
         std::chrono::duration<double>(Steady::now() - t0).count();
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
      for (Op op : {Op::fenced_write, Op::acquire, Op::renew, Op::release}) {
        const auto [mine, theirs] =
            compare([&] { return ours(make, op, prefix + "-pg", workers, length); },
                    [&] { return pgbench(pg_url, prefix + "-pg", op, workers, length); });
        row("PostgreSQL", op, workers, mine, theirs, target_of("PostgreSQL", op));
      }
    }
  }
  const std::string redis_url = env_or("STATEPACT_TEST_REDIS_URL", "");
  if ((which == "all" || which == "redis") && !redis_url.empty()) {
    const RedisServer srv = sp::bench::redis_address(redis_url);
    const RedisScripts sha = redis_setup(srv, prefix);
    std::function<std::unique_ptr<sp::RedisBackend>(asio::io_context&, int)> make =
        [&](asio::io_context& io, int) {
          return std::make_unique<sp::RedisBackend>(io.get_executor(), redis_url);
        };
    for (int workers : {1, 8}) {
      // redis-benchmark runs a fixed count: about what ours did in the same time at 1 worker.
      const int requests = workers == 1 ? 20000 : 80000;
      for (Op op : {Op::fenced_write, Op::acquire, Op::renew, Op::release}) {
        const auto [mine, theirs] = compare(
            [&] { return ours(make, op, prefix + "-redis", workers, length); },
            [&] {
              return op == Op::release ? redis_release_pairs(srv, sha, prefix, workers, length)
                                       : redis_benchmark(srv, sha, op, prefix, workers, requests);
            });
        row("Redis", op, workers, mine, theirs, target_of("Redis", op));
      }
    }
  }
  std::printf(
      "\n%d rounds of %lld s for ours, alternating who goes first; each side's median. Ours: the "
      "public API, one coroutine per worker on one thread; hand-written: pgbench / "
      "redis-benchmark with one connection per worker (Redis's acquire + release pairs: a "
      "thread per worker, blocking hiredis).\n",
      rounds, static_cast<long long>(length.count()));
  return 0;
}
