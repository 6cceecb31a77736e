// Throughput and latency of RedisBackend's lease and commit operations at 1 and 64 commands in
// flight, next to redis-benchmark running the same scripts with EVALSHA at the same concurrency
// (64 connections there, one pipelined connection here). Needs STATEPACT_TEST_REDIS_URL (or the
// URL as argv[1]; argv[2] is the number of rounds, default 5) and redis-benchmark on PATH. A
// benchmark, never a timed test.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <hiredis/hiredis.h>
#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <statepact/redis.hpp>

#include "commit_codec.hpp"
#include "median.hpp"
#include "redis_address.hpp"
#include "scripts.hpp"

namespace sp = statepact;
using Clock = std::chrono::steady_clock;

namespace {

struct Stats {
  double per_second = 0, p50_ms = 0, p99_ms = 0;
};

Stats summarize(std::vector<double> lat_ms, double seconds) {
  Stats s;
  if (lat_ms.empty()) return s;
  std::sort(lat_ms.begin(), lat_ms.end());
  s.per_second = lat_ms.size() / seconds;
  s.p50_ms = lat_ms[lat_ms.size() / 2];
  s.p99_ms = lat_ms[std::min(lat_ms.size() - 1, lat_ms.size() * 99 / 100)];
  return s;
}

// The run with the median throughput (its latencies come with it).
Stats median(std::vector<Stats> runs) {
  return statepact::bench::median_by(std::move(runs), [](const Stats& s) { return s.per_second; });
}

using Op = std::function<asio::awaitable<void>(int worker, int i)>;

asio::awaitable<void> worker(Op op, int id, int count, std::vector<double>& lat) {
  for (int i = 0; i < count; ++i) {
    const auto t0 = Clock::now();
    co_await op(id, i);
    lat.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
  }
}

// Runs `op` `total` times split over `inflight` coroutines.
Stats measure(asio::io_context& io, int inflight, int total, Op op) {
  std::vector<std::vector<double>> lat(inflight);
  const int each = total / inflight;
  std::exception_ptr failure;
  int done = 0;
  const auto t0 = Clock::now();
  for (int w = 0; w < inflight; ++w)
    asio::co_spawn(io, worker(op, w, each, lat[w]), [&](std::exception_ptr e) {
      if (e) failure = e;
      ++done;
    });
  // The backend's connection keeps the io_context busy: run until the workers finished.
  io.restart();
  while (done < inflight) io.run_one();
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (failure) std::rethrow_exception(failure);
  std::vector<double> all;
  for (auto& l : lat) all.insert(all.end(), l.begin(), l.end());
  return summarize(std::move(all), seconds);
}

using Server = statepact::bench::RedisAddress;

std::string script_load(const Server& srv, const char* source) {
  redisContext* c = redisConnect(srv.host.c_str(), srv.port);
  if (!c || c->err) throw std::runtime_error("cannot connect for SCRIPT LOAD");
  auto* r = static_cast<redisReply*>(redisCommand(c, "SCRIPT LOAD %s", source));
  std::string sha = r && r->type == REDIS_REPLY_STRING ? std::string(r->str, r->len) : "";
  if (r) freeReplyObject(r);
  redisFree(c);
  return sha;
}

void run_command(const Server& srv, const std::vector<std::string>& args) {
  redisContext* c = redisConnect(srv.host.c_str(), srv.port);
  if (!c || c->err) throw std::runtime_error("cannot connect to prepare keys");
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) argv.push_back(a.data()), lens.push_back(a.size());
  if (auto* r = redisCommandArgv(c, static_cast<int>(argv.size()), argv.data(), lens.data()))
    freeReplyObject(r);
  redisFree(c);
}

// redis-benchmark --csv: "test","rps","avg","min","p50","p95","p99","max".
Stats redis_benchmark(const Server& srv, int clients, int requests, const std::string& command) {
  const auto cmd = fmt::format("redis-benchmark -h {} -p {} -c {} -n {} -r 1000000 --csv {}",
                               srv.host, srv.port, clients, requests, command);
  Stats s;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return s;
  char buf[4096];
  std::string last;
  while (fgets(buf, sizeof buf, p)) last = buf;
  pclose(p);
  std::vector<std::string> cols;
  std::stringstream ss(last);
  for (std::string c; std::getline(ss, c, ',');) {
    c.erase(std::remove(c.begin(), c.end(), '"'), c.end());
    cols.push_back(c);
  }
  if (cols.size() >= 7) {
    try {
      s.per_second = std::stod(cols[1]);
      s.p50_ms = std::stod(cols[4]);
      s.p99_ms = std::stod(cols[6]);
    } catch (...) {
    }
  }
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("STATEPACT_TEST_REDIS_URL");
  const std::string url = argc > 1 ? argv[1] : env ? env : "";
  if (url.empty()) {
    std::fprintf(stderr,
                 "usage: statepact_bench_redis redis://host:port/db (or set "
                 "STATEPACT_TEST_REDIS_URL)\n");
    return 2;
  }
  const Server srv = statepact::bench::redis_address(url);
  std::random_device rd;
  const std::string run = fmt::format("bench-{:08x}", rd());
  asio::io_context io;
  sp::RedisBackend backend(io.get_executor(), url);

  // Same scripts, same key shapes for redis-benchmark (its keys are random, ours are fresh).
  const std::string acquire_sha = script_load(srv, sp::detail::scripts::acquire);
  const std::string renew_sha = script_load(srv, sp::detail::scripts::renew);
  const std::string release_sha = script_load(srv, sp::detail::scripts::release);
  const std::string commit_sha = script_load(srv, sp::detail::scripts::commit);

  // Rounds alternate who goes first, so neither side always meets a warmer (or more loaded)
  // server; the table shows each side's median over the rounds.
  const int rounds = argc > 2 ? std::max(1, std::atoi(argv[2])) : 5;
  const std::string p = "statepact:";
  // redis-benchmark's renew needs a live lease and its commit a registered resource.
  run_command(srv, {"HSET", p + "lease:{rb-1}", "owner", "bench", "token", "1", "exp",
                    "99999999999999", "ttl", "60000"});
  // redis-benchmark's commit is the call the backend itself makes for one write (no idempotency
  // key, fences, checks or locks), laid out by the backend's own codec.
  const sp::detail::KeyLayout layout("statepact");
  sp::CommitRequest one_write;
  one_write.resources = {"rb"};
  one_write.writes = {{"rb", "k", sp::Value("v")}};
  one_write.fingerprint = "fp";
  const auto commit_call =
      sp::detail::encode_commit(one_write, layout, std::chrono::seconds(1), {}, "");
  run_command(srv, {"SET", layout.version("rb"), "0"});
  auto shell_quoted = [](const std::string& s) {
    std::string out = "'";
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out + "'";
  };
  std::string commit_command = fmt::format("EVALSHA {} {}", commit_sha, commit_call.keys.size());
  for (const auto& k : commit_call.keys) commit_command += " " + shell_quoted(k);
  for (const auto& a : commit_call.args) commit_command += " " + shell_quoted(a);
  const char* ops[] = {"acquire", "renew", "release", "commit"};
  std::printf(
      "| op | in flight | statepact ops/s | p50 ms | p99 ms | redis-benchmark ops/s | "
      "p50 ms | p99 ms | ratio |\n|---|---|---|---|---|---|---|---|---|\n");
  for (int inflight : {1, 64}) {
    const int total = inflight == 1 ? 20000 : 64 * 1000;
    std::map<std::string, std::vector<Stats>> ours, theirs;
    auto run_theirs = [&](const std::string& op) {
      std::string cmd;
      if (op == "acquire")
        cmd = fmt::format(
            "EVALSHA {} 2 {}lease:{{rb-__rand_int__}} {}fence:{{rb-__rand_int__}} bench 60000",
            acquire_sha, p, p);
      else if (op == "renew")
        cmd = fmt::format("EVALSHA {} 2 {}lease:{{rb-1}} {}fence:{{rb-1}} bench 1 60000", renew_sha,
                          p, p);
      else if (op == "release")
        cmd = fmt::format("EVALSHA {} 1 {}lease:{{rb-__rand_int__}} bench 1", release_sha, p);
      else
        cmd = commit_command;
      theirs[op].push_back(redis_benchmark(srv, inflight, total, cmd));
    };
    for (int round = 0; round < rounds; ++round) {
      auto name = [&](int w, int i) {
        return fmt::format("{}-{}-{}-{}-{}", run, round, inflight, w, i);
      };
      std::vector<std::vector<sp::Lease>> leases(inflight);
      const bool theirs_first = round % 2 == 1;
      for (const std::string op : ops) {
        if (theirs_first) run_theirs(op);
        if (op == "acquire") {
          ours[op].push_back(
              measure(io, inflight, total, [&](int w, int i) -> asio::awaitable<void> {
                leases[w].push_back(
                    co_await backend.acquire_lease(name(w, i), "bench", std::chrono::seconds(60)));
              }));
        } else if (op == "renew") {
          ours[op].push_back(
              measure(io, inflight, total, [&](int w, int i) -> asio::awaitable<void> {
                co_await backend.renew_lease(leases[w][i % leases[w].size()], std::nullopt);
              }));
        } else if (op == "release") {
          ours[op].push_back(
              measure(io, inflight, total, [&](int w, int i) -> asio::awaitable<void> {
                co_await backend.release_lease(leases[w][i]);
              }));
        } else {
          const std::string res = fmt::format("{}-commit-{}-{}", run, round, inflight);
          bool registered = false;
          asio::co_spawn(io, backend.register_resource(res, sp::Value::object()),
                         [&](std::exception_ptr, bool) { registered = true; });
          io.restart();
          while (!registered) io.run_one();
          ours[op].push_back(measure(io, inflight, total, [&](int, int i) -> asio::awaitable<void> {
            sp::CommitRequest req;
            req.agent_id = "bench";
            req.resources.push_back(res);
            sp::WriteOp w;
            w.resource = res;
            w.key = "k";
            w.value = sp::Value(i);
            req.writes.push_back(std::move(w));
            co_await backend.commit(std::move(req));
          }));
        }
        if (!theirs_first) run_theirs(op);
      }
    }
    for (const char* op : ops) {
      const Stats a = median(ours[op]), b = median(theirs[op]);
      std::printf("| %s | %d | %.0f | %.3f | %.3f | %.0f | %.3f | %.3f | %.2f |\n", op, inflight,
                  a.per_second, a.p50_ms, a.p99_ms, b.per_second, b.p50_ms, b.p99_ms,
                  b.per_second > 0 ? a.per_second / b.per_second : 0.0);
      std::fflush(stdout);
    }
  }
  std::printf(
      "\n%d rounds, each side's median; redis-benchmark: %s; its release targets random (mostly "
      "absent) leases, ours real ones.\n",
      rounds, "one connection per command in flight, ours one pipelined connection");
  return 0;
}
