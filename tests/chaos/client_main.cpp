// statepact_chaos_client: one client process of a fault-injection run. It runs one workload against
// a server for a while and records every operation's invocation and completion in a history file
// (history.hpp; the op schemas are at the top of checker.hpp). scripts/chaos.sh starts many of
// these, pauses and kills them, and kills and restarts the server meanwhile.
//
//   statepact_chaos_client --backend postgres|redis --url URL
//     --workload fenced-log|bank|list-append|increments|holds --client ID --history FILE
//     [--duration SECONDS] [--seed N] [--resources N] [--keys N] [--final]
//
// --final does the final reads of the workload instead (after every client stopped).
//
//   statepact_chaos_client memory --dir DIR [--duration SECONDS] [--seed N] [--clients N]
//
// runs a whole fault-injection run against one in-process memory backend: N clients per workload,
// each on its own thread and reaching storage through a faulty link (faulty_backend.hpp), while a
// nemesis thread pauses clients (blocks their thread past every lease ttl), kills them (stops
// their thread mid-operation and starts a new client), steps the backend's clock forward or back,
// slows or stalls a link, and loses commit replies or holds them past the idempotency retention;
// then the final reads. Histories go to DIR as for the server backends. The run fails (exit 3)
// when a client's coroutine died, an exception from outside the library reached a client, or a
// final read gave up.
//
//   statepact_chaos_client nemesis FILE KIND start|end [ARGS_JSON]
//
// appends one fault line to FILE, with this machine's CLOCK_MONOTONIC like every client line (the
// shell has no monotonic clock of its own).
//
// Outcomes: every statepact::Error but CommitUnknownError means storage applied nothing ("fail");
// CommitUnknownError is "unknown"; anything else escaping the library is a broken contract,
// recorded as "unknown" with "foreign": true and reported on stderr, and the client exits 3. A
// final read that gives up exits 1. The client never decides by its own clock that a lease expired:
// it keeps writing with its token and storage decides.
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <deque>
#include <future>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <nlohmann/json.hpp>

#include <statepact/backends/memory.hpp>
#include <statepact/statepact.hpp>
#ifdef STATEPACT_HAVE_POSTGRES
#include <statepact/postgres.hpp>
#endif
#ifdef STATEPACT_HAVE_REDIS
#include <statepact/redis.hpp>
#endif

#include "faulty_backend.hpp"
#include "loopback.hpp"

namespace sp = statepact;
using json = nlohmann::json;
using std::chrono::milliseconds;

namespace {

struct Args {
  std::string backend, url, workload, history;
  int client = -1;
  double duration_s = 10;
  std::uint64_t seed = 1;
  int resources = 3;
  int keys = 8;
  bool final_reads = false;
  // Memory runs: set when the nemesis kills this client (its thread is then cancelled).
  const std::atomic<bool>* killed = nullptr;
  // Memory runs: counts what fails the run (foreign exceptions, final reads that gave up).
  std::atomic<int>* failures = nullptr;
};

// Thrown through a killed in-process client's coroutine: no completion is recorded after it.
struct Killed {};

[[noreturn]] void bad(const std::string& msg) {
  std::cerr << "statepact_chaos_client: " << msg
            << "\nusage: statepact_chaos_client --backend postgres|redis --url URL --workload "
               "fenced-log|bank|list-append|increments|holds --client ID --history FILE "
               "[--duration S] "
               "[--seed N] [--resources N] [--keys N] [--final]\n";
  std::exit(2);
}

long long number(const std::string& name, const std::string& v, long long lo, long long hi) {
  std::size_t used = 0;
  long long n = 0;
  try {
    n = std::stoll(v, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != v.size() || v.empty() || n < lo || n > hi)
    bad(fmt::format("{} must be an integer from {} to {}, not '{}'", name, lo, hi, v));
  return n;
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--final") {
      a.final_reads = true;
      continue;
    }
    if (i + 1 >= argc) bad(fmt::format("option '{}' needs a value", k));
    const std::string v = argv[++i];
    if (k == "--backend")
      a.backend = v;
    else if (k == "--url")
      a.url = v;
    else if (k == "--workload")
      a.workload = v;
    else if (k == "--history")
      a.history = v;
    else if (k == "--client")
      a.client = static_cast<int>(number(k, v, 0, 1'000'000'000));
    else if (k == "--duration")
      a.duration_s = static_cast<double>(number(k, v, 0, 86'400));
    else if (k == "--seed")
      a.seed = static_cast<std::uint64_t>(number(k, v, 0, INT64_MAX));
    else if (k == "--resources")
      a.resources = static_cast<int>(number(k, v, 1, 64));
    else if (k == "--keys")
      a.keys = static_cast<int>(number(k, v, 1, 256));
    else
      bad(fmt::format("unknown option '{}'", k));
  }
  if (a.backend != "postgres" && a.backend != "redis") bad("--backend must be postgres or redis");
  if (a.url.empty()) bad("--url is required");
  // Loopback only: the harness kills and pauses things, so it must never reach a shared server.
  if (!statepact::chaos::loopback_url(a.url))
    bad("--url's host must be a loopback address (127.x.x.x, localhost or [::1])");
  if (a.workload != "fenced-log" && a.workload != "bank" && a.workload != "list-append" &&
      a.workload != "increments" && a.workload != "holds")
    bad("--workload must be fenced-log, bank, list-append, increments or holds");
  if (a.client < 0) bad("--client is required");
  if (a.history.empty()) bad("--history is required");
  return a;
}

long long mono_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

long long wall_ms() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000LL + ts.tv_nsec / 1'000'000;
}

// Each line goes out in one write(2) on an O_APPEND descriptor, so a SIGKILL never leaves half a
// line and several processes may share a file.
class HistoryFile {
 public:
  explicit HistoryFile(const std::string& path)
      : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)) {
    if (fd_ < 0) {
      std::cerr << "statepact_chaos_client: cannot open " << path << ": " << std::strerror(errno)
                << "\n";
      std::exit(2);
    }
  }
  ~HistoryFile() { ::close(fd_); }
  HistoryFile(const HistoryFile&) = delete;
  HistoryFile& operator=(const HistoryFile&) = delete;

  void line(json j) {
    j["mono_ns"] = mono_ns();
    j["wall_ms"] = wall_ms();
    const std::string text = j.dump() + "\n";
    const ssize_t n = ::write(fd_, text.data(), text.size());
    if (n != static_cast<ssize_t>(text.size())) {
      std::cerr << "statepact_chaos_client: history write failed: " << std::strerror(errno) << "\n";
      std::_Exit(2);
    }
  }

 private:
  int fd_;
};

asio::awaitable<void> pause(milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

template <class B>
class Client {
 public:
  Client(B& backend, const Args& args, HistoryFile& history)
      : manager_(backend),
        args_(args),
        history_(history),
        rng_(args.seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(args.client)),
        agent_(fmt::format("chaos-{}", args.client)),
        deadline_(std::chrono::steady_clock::now() +
                  std::chrono::milliseconds(static_cast<long long>(args.duration_s * 1000))) {}

  asio::awaitable<void> run() {
    co_await setup();
    if (args_.final_reads) {
      co_await final_reads();
      co_return;
    }
    while (!over()) {
      if (args_.workload == "fenced-log")
        co_await fenced_log_round();
      else if (args_.workload == "bank")
        co_await bank_round();
      else if (args_.workload == "list-append")
        co_await list_append_round();
      else if (args_.workload == "holds")
        co_await hold_round();
      else
        co_await increment_round();
    }
  }

  int foreign() const { return foreign_; }
  bool final_failed() const { return final_failed_; }

 private:
  bool over() const { return std::chrono::steady_clock::now() >= deadline_; }
  bool killed() const { return args_.killed && args_.killed->load(); }

  int uniform(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool chance(double p) { return std::uniform_real_distribution<double>(0, 1)(rng_) < p; }

  // Records the invocation, runs the body, records its completion. Returns what the body returned
  // when it succeeded.
  static constexpr const char* op_read = "read";
  static constexpr const char* op_acquire = "acquire";
  static constexpr const char* op_append = "append";
  static constexpr const char* op_release = "release";
  static constexpr const char* op_bank_read = "bank_read";
  static constexpr const char* op_transfer = "transfer";
  static constexpr const char* op_txn = "txn";
  static constexpr const char* op_increment = "increment";
  static constexpr const char* op_counter = "counter";
  static constexpr const char* op_hold = "hold";

  asio::awaitable<std::optional<json>> record(const char* op, json args,
                                              asio::awaitable<json> body) {
    if (killed()) throw Killed{};
    history_.line(json{{"client", args_.client}, {"op", op}, {"phase", "invoke"}, {"args", args}});
    std::string phase = "ok";
    json ret = json::object();
    try {
      ret = co_await std::move(body);
    } catch (const sp::CommitUnknownError& e) {
      phase = "unknown";
      ret = json{{"code", sp::to_string(e.code())}, {"error", e.what()}};
    } catch (const sp::Error& e) {
      phase = "fail";
      ret = json{{"code", sp::to_string(e.code())}, {"error", e.what()}};
    } catch (const std::exception& e) {
      // A killed client's operation stays open, as a SIGKILLed process leaves it.
      if (killed()) throw Killed{};
      phase = "unknown";
      ret = json{{"foreign", true}, {"error", e.what()}};
      ++foreign_;
      if (args_.failures) ++*args_.failures;
      std::cerr << fmt::format("chaos client {}: {} threw a non-statepact exception: {}\n",
                               args_.client, op, e.what());
    }
    if (killed()) throw Killed{};
    history_.line(json{{"client", args_.client}, {"op", op}, {"phase", phase}, {"ret", ret}});
    if (phase == "ok") co_return ret;
    // A short pause after a failure, so a server that is down is not hammered in a tight loop.
    co_await pause(milliseconds(uniform(5, 50)));
    co_return std::nullopt;
  }

  // ---- setup: every resource of the workload exists (registration is idempotent) -------------

  std::vector<std::pair<std::string, json>> resources() const {
    std::vector<std::pair<std::string, json>> out;
    const int r = args_.resources;
    if (args_.workload == "fenced-log") {
      for (int i = 0; i < r; ++i) out.emplace_back(fmt::format("log-{}", i), json::object());
    } else if (args_.workload == "bank") {
      for (int i = 0; i < r; ++i) out.emplace_back(fmt::format("bank-{}", i), json::object());
      for (int a = 0; a < args_.keys; ++a) out[a % r].second[account(a)] = initial_balance;
    } else if (args_.workload == "list-append") {
      for (int i = 0; i < r; ++i) out.emplace_back(fmt::format("la-{}", i), json::object());
    } else if (args_.workload == "holds") {
      for (int i = 0; i < r; ++i) out.emplace_back(fmt::format("hold-{}", i), json::object());
    } else {
      out.emplace_back("counter", json{{"counter", 0}});
    }
    return out;
  }

  asio::awaitable<void> setup() {
    for (const auto& [name, initial] : resources()) {
      for (;;) {
        bool done = false;
        try {
          std::string n = name;
          json v = initial;
          co_await manager_.register_resource(n, v);
          done = true;
        } catch (const sp::Error& e) {
          if (over() && !args_.final_reads) co_return;
          std::cerr << fmt::format("chaos client {}: registering {}: {}\n", args_.client, name,
                                   e.what());
        }
        if (done) break;
        co_await pause(milliseconds(200));
      }
    }
  }

  // ---- fenced log -------------------------------------------------------------------------

  static std::string log_key() { return "log"; }

  // A fresh owner per acquisition: the holder acquiring again would extend its own lease and get
  // the same token back, and every acquisition here must be a new one.
  asio::awaitable<json> acquire(std::string resource, std::string owner, milliseconds ttl,
                                sp::Lease& out) {
    out = co_await manager_.backend().acquire_lease(resource, owner, ttl);
    co_return json{
        {"token", out.token}, {"expires_us", micros(out.expires_at)}, {"ttl_ms", out.ttl.count()}};
  }

  // A time on storage's clock, as the history records it.
  static long long micros(sp::time_point t) {
    return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
  }

  asio::awaitable<json> append(std::string resource, sp::Token token, long long n,
                               sp::Isolation iso) {
    sp::SessionOptions options(agent_);
    options.resource(resource).isolation(iso).fence(token).lock_timeout(milliseconds(1000));
    auto s = co_await manager_.session(options);
    std::string key = log_key();
    std::optional<sp::Value> current = co_await s.read_for_update(key);
    json entries = current && current->is_array() ? *current : json::array();
    entries.push_back(json::array({args_.client, token, n}));
    co_await s.write(key, entries);
    co_await s.commit();
    co_return json::object();
  }

  asio::awaitable<json> read_log(std::string resource) {
    std::string key = log_key();
    sp::Entry e = co_await manager_.backend().read(resource, key);
    json entries = e.value && e.value->is_array() ? *e.value : json::array();
    co_return json{{"entries", entries}};
  }

  asio::awaitable<json> release(sp::Lease lease) {
    const bool released = co_await manager_.backend().release_lease(lease);
    co_return json{{"released", released}};
  }

  asio::awaitable<void> fenced_log_round() {
    const std::string resource = fmt::format("log-{}", uniform(0, args_.resources - 1));
    if (chance(0.1)) {
      json args{{"resource", resource}};
      auto body = read_log(resource);
      co_await record(op_read, args, std::move(body));
      co_return;
    }
    const milliseconds ttl(uniform(200, 500));
    sp::Lease lease;
    const std::string owner = fmt::format("{}-{}", agent_, ++acquisitions_);
    json acquire_args{{"resource", resource}, {"owner", owner}, {"ttl_ms", ttl.count()}};
    auto acquiring = acquire(resource, owner, ttl, lease);
    auto got = co_await record(op_acquire, acquire_args, std::move(acquiring));
    if (!got) {
      co_await pause(milliseconds(uniform(5, 60)));
      co_return;
    }
    const int appends = uniform(1, 5);
    for (int k = 0; k < appends && !over(); ++k) {
      const long long n = ++seq_;
      const sp::Isolation iso =
          chance(0.5) ? sp::Isolation::optimistic : sp::Isolation::pessimistic;
      json args{{"resource", resource},
                {"token", lease.token},
                {"n", n},
                {"isolation", sp::to_string(iso)}};
      auto body = append(resource, lease.token, n, iso);
      auto ok = co_await record(op_append, args, std::move(body));
      // Sometimes dawdle past the lease's ttl: only storage may say whether the next append lands.
      co_await pause(milliseconds(uniform(0, static_cast<int>(ttl.count()) * 3 / 4)));
      if (!ok && chance(0.5)) break;
    }
    if (chance(0.5)) {
      json args{{"resource", resource}, {"token", lease.token}};
      auto body = release(lease);
      co_await record(op_release, args, std::move(body));
    }
  }

  // ---- bank ---------------------------------------------------------------------------------

  static constexpr long long initial_balance = 100;
  static std::string account(int a) { return fmt::format("acct-{}", a); }
  std::string bank_resource(int a) const { return fmt::format("bank-{}", a % args_.resources); }

  sp::Isolation bank_isolation() {
    static constexpr sp::Isolation modes[] = {sp::Isolation::optimistic, sp::Isolation::snapshot,
                                              sp::Isolation::serializable,
                                              sp::Isolation::pessimistic};
    return modes[uniform(0, 3)];
  }

  asio::awaitable<json> transfer(int from, int to, long long amount, sp::Isolation iso) {
    sp::SessionOptions options(agent_);
    options.resource(bank_resource(from))
        .resource(bank_resource(to))
        .isolation(iso)
        .lock_timeout(milliseconds(1000));
    auto s = co_await manager_.session(options);
    std::string rf = bank_resource(from), rt = bank_resource(to), kf = account(from),
                kt = account(to);
    std::optional<sp::Value> a = co_await s.read_for_update(rf, kf);
    std::optional<sp::Value> b = co_await s.read_for_update(rt, kt);
    const long long va = a ? a->get<long long>() : 0;
    const long long vb = b ? b->get<long long>() : 0;
    sp::Value na = va - amount, nb = vb + amount;
    co_await s.write(rf, kf, na);
    co_await s.write(rt, kt, nb);
    co_await s.commit();
    co_return json::object();
  }

  asio::awaitable<json> bank_read(sp::Isolation iso) {
    sp::SessionOptions options(agent_);
    for (int i = 0; i < args_.resources; ++i) options.resource(fmt::format("bank-{}", i));
    options.isolation(iso).lock_timeout(milliseconds(1000));
    auto s = co_await manager_.session(options);
    json balances = json::object();
    for (int a = 0; a < args_.keys; ++a) {
      std::string r = bank_resource(a), k = account(a);
      std::optional<sp::Value> v = co_await s.read(r, k);
      balances[k] = v ? v->get<long long>() : 0;
    }
    // Committing validates what was read (optimistic, serializable) and releases locks.
    co_await s.commit();
    co_return json{{"total_expected", initial_balance * args_.keys}, {"balances", balances}};
  }

  asio::awaitable<void> bank_round() {
    if (chance(0.2)) {
      const sp::Isolation iso = bank_isolation();
      json args{{"isolation", sp::to_string(iso)}};
      auto body = bank_read(iso);
      co_await record(op_bank_read, args, std::move(body));
      co_return;
    }
    const int from = uniform(0, args_.keys - 1);
    int to = uniform(0, args_.keys - 2);
    if (to >= from) ++to;
    const long long amount = uniform(1, 10);
    const sp::Isolation iso = bank_isolation();
    json args{{"from", account(from)},
              {"to", account(to)},
              {"amount", amount},
              {"isolation", sp::to_string(iso)}};
    auto body = transfer(from, to, amount, iso);
    co_await record(op_transfer, args, std::move(body));
  }

  // ---- list append (Elle) ---------------------------------------------------------------------

  // Keys rotate every two seconds of wall time (shared by the clients of a run), so lists stay
  // short and every read in the history stays small; a new generation's keys start empty.
  static long long generation() { return wall_ms() / 2000; }
  std::string la_key(long long k) const { return fmt::format("k{}", k); }
  std::string la_resource(long long k) const { return fmt::format("la-{}", k % args_.resources); }

  asio::awaitable<json> txn(json mops, sp::Isolation iso) {
    sp::SessionOptions options(agent_);
    for (const json& m : mops) {
      const long long k = std::stoll(m.at(1).get<std::string>().substr(1));
      options.resource(la_resource(k));
    }
    options.isolation(iso).lock_timeout(milliseconds(1000));
    auto s = co_await manager_.session(options);
    json done = json::array();
    for (const json& m : mops) {
      const std::string f = m.at(0).get<std::string>();
      std::string key = m.at(1).get<std::string>();
      std::string resource = la_resource(std::stoll(key.substr(1)));
      if (f == "append") {
        std::optional<sp::Value> cur = co_await s.read_for_update(resource, key);
        sp::Value list = cur && cur->is_array() ? *cur : json::array();
        list.push_back(m.at(2));
        co_await s.write(resource, key, list);
        done.push_back(m);
      } else {
        std::optional<sp::Value> cur = co_await s.read(resource, key);
        json list = cur && cur->is_array() ? *cur : json::array();
        done.push_back(json::array({"r", key, list}));
      }
    }
    co_await s.commit();
    co_return json{{"mops", done}};
  }

  asio::awaitable<void> list_append_round() {
    json mops = json::array();
    const int n = uniform(1, 4);
    const long long base = generation() * args_.keys;
    for (int i = 0; i < n; ++i) {
      const std::string key = la_key(base + uniform(0, args_.keys - 1));
      if (chance(0.5))
        mops.push_back(json::array(
            {"append", key, static_cast<long long>(args_.client) * 1'000'000 + ++seq_}));
      else
        mops.push_back(json::array({"r", key, nullptr}));
    }
    // Every validating mode; the checker allows snapshot isolation's write skew (checker.hpp).
    const sp::Isolation iso = bank_isolation();
    json args{{"mops", mops}, {"isolation", sp::to_string(iso)}};
    auto body = txn(mops, iso);
    co_await record(op_txn, args, std::move(body));
  }

  // ---- idempotent increments --------------------------------------------------------------

  asio::awaitable<json> increment(std::string id, sp::Isolation iso) {
    sp::SessionOptions options(agent_);
    options.resource("counter")
        .isolation(iso)
        .idempotency_key("inc-" + id)
        .lock_timeout(milliseconds(1000));
    sp::RetryPolicy policy;
    policy.max_attempts(10).initial_backoff(milliseconds(5)).max_backoff(milliseconds(500));
    auto body = [id](sp::Session<B>& s) -> asio::awaitable<void> {
      std::string counter = "counter", marker = "inc:" + id;
      std::optional<sp::Value> v = co_await s.read_for_update(counter);
      sp::Value next = (v ? v->get<long long>() : 0) + 1;
      sp::Value yes = true;
      co_await s.write(counter, next);
      co_await s.write(marker, yes);
    };
    co_await manager_.run(options, body, policy);
    co_return json::object();
  }

  asio::awaitable<void> increment_round() {
    const std::string id = fmt::format("{}-{}", args_.client, ++seq_);
    const sp::Isolation iso = bank_isolation();
    json args{{"id", id}, {"isolation", sp::to_string(iso)}};
    auto body = increment(id, iso);
    co_await record(op_increment, args, std::move(body));
  }

  asio::awaitable<json> counter_read() {
    std::vector<std::string> names{"counter"};
    std::vector<sp::ResourceSnapshot> snaps = co_await manager_.backend().snapshot(names);
    long long counter = 0;
    json applied = json::array();
    const long long version = static_cast<long long>(snaps.at(0).version);
    for (const auto& [key, entry] : snaps.at(0).entries) {
      if (!entry.value) continue;
      if (key == "counter")
        counter = entry.value->template get<long long>();
      else if (key.rfind("inc:", 0) == 0)
        applied.push_back(key.substr(4));
    }
    co_return json{{"counter", counter}, {"applied", applied}, {"version", version}};
  }

  // ---- hold() bodies ---------------------------------------------------------------------------

  // Something the client did at one instant, recorded while its hold operation is open. A killed
  // client records nothing more, as a SIGKILLed process.
  void event(const char* op, json args) {
    if (killed()) return;
    history_.line(json{{"client", args_.client}, {"op", op}, {"phase", "event"}, {"args", args}});
  }

  // The body of a hold(): acts a few times with pauses between, for one to three ttls, so its
  // lease must be renewed, and records each action with its time. hold() promises that it is
  // cancelled before the lease can be lost; the checker holds it to that (hold-outlived-lease).
  asio::awaitable<void> hold_body(sp::HeldLease& held, std::string resource, std::string owner,
                                  milliseconds ttl, int acts) {
    const sp::Lease lease = held.lease();
    json start{{"resource", resource},
               {"owner", owner},
               {"token", lease.token},
               {"expires_us", micros(lease.expires_at)},
               {"ttl_ms", lease.ttl.count()}};
    event("hold_start", start);
    json end{{"resource", resource}, {"token", lease.token}};
    try {
      for (int k = 0; k < acts; ++k) {
        co_await pause(milliseconds(uniform(0, static_cast<int>(ttl.count()) / 2)));
        const sp::Lease now = held.lease();
        json act{{"resource", resource},
                 {"token", now.token},
                 {"n", ++seq_},
                 {"expires_us", micros(now.expires_at)},
                 {"lost", held.lost()}};
        event("hold_act", act);
      }
    } catch (...) {
      event("hold_end", end);
      throw;
    }
    event("hold_end", end);
  }

  asio::awaitable<json> hold_once(std::string resource, std::string owner, milliseconds ttl) {
    sp::LeaseManager<B> leases(manager_.backend());
    sp::HoldOptions options;
    options.ttl(ttl).auto_renew(true).wait(milliseconds(1500));
    const int acts = uniform(3, 8);
    auto body = [this, resource, owner, ttl, acts](sp::HeldLease& held) {
      return hold_body(held, resource, owner, ttl, acts);
    };
    co_await leases.hold(resource, owner, body, options);
    co_return json::object();
  }

  asio::awaitable<void> hold_round() {
    const std::string resource = fmt::format("hold-{}", uniform(0, args_.resources - 1));
    const milliseconds ttl(uniform(600, 1200));
    const std::string owner = fmt::format("{}-{}", agent_, ++acquisitions_);
    json args{{"resource", resource}, {"owner", owner}, {"ttl_ms", ttl.count()}};
    auto body = hold_once(resource, owner, ttl);
    co_await record(op_hold, args, std::move(body));
    co_await pause(milliseconds(uniform(0, 100)));
  }

  // ---- final reads, after every client stopped ------------------------------------------------

  // Retries a final read until it succeeds (the server may still be recovering).
  template <class Make>
  asio::awaitable<void> until_ok(const char* op, const json& args, const Make& make) {
    for (int attempt = 0; attempt < 60; ++attempt) {
      auto body = make();
      auto got = co_await record(op, args, std::move(body));
      if (got) co_return;
      co_await pause(milliseconds(500));
    }
    // Without the final state nothing can be checked for lost or repeated writes: the run fails.
    std::cerr << fmt::format("chaos client {}: final {} never succeeded\n", args_.client, op);
    final_failed_ = true;
    if (args_.failures) ++*args_.failures;
  }

  // Named locals only: g++ 12 mishandles literals and temporaries in these co_await expressions.
  asio::awaitable<void> final_reads() {
    if (args_.workload == "fenced-log") {
      for (int i = 0; i < args_.resources; ++i) {
        const std::string r = fmt::format("log-{}", i);
        json args{{"resource", r}};
        auto make = [this, r] { return read_log(r); };
        co_await until_ok(op_read, args, make);
      }
    } else if (args_.workload == "bank") {
      json args{{"isolation", "snapshot"}};
      auto make = [this] { return bank_read(sp::Isolation::snapshot); };
      co_await until_ok(op_bank_read, args, make);
    } else if (args_.workload == "list-append") {
      json mops = json::array();
      // The keys of the last two generations: the ones the run wrote last.
      const long long base = (generation() - 1) * args_.keys;
      for (long long k = base; k < base + 2 * args_.keys; ++k)
        mops.push_back(json::array({"r", la_key(k), nullptr}));
      json args{{"mops", mops}, {"isolation", "serializable"}};
      auto make = [this, mops] { return txn(mops, sp::Isolation::serializable); };
      co_await until_ok(op_txn, args, make);
    } else if (args_.workload == "increments") {
      json args = json::object();
      auto make = [this] { return counter_read(); };
      co_await until_ok(op_counter, args, make);
    }
  }

  sp::Manager<B> manager_;
  const Args& args_;
  HistoryFile& history_;
  std::mt19937_64 rng_;
  std::string agent_;
  std::chrono::steady_clock::time_point deadline_;
  long long seq_ = 0;
  long long acquisitions_ = 0;
  int foreign_ = 0;
  bool final_failed_ = false;
};

// The backend lives in the coroutine, so it is closed (its connections and timers gone) before
// io.run() returns.
template <class B, class Options>
asio::awaitable<int> client_main(const Args& args, Options options, HistoryFile& history) {
  B backend(co_await asio::this_coro::executor, args.url, options);
  Client<B> client(backend, args, history);
  co_await client.run();
  co_return client.foreign() ? 3 : client.final_failed() ? 1 : 0;
}

template <class B, class Options>
int run_client(const Args& args, const Options& options, HistoryFile& history) {
  asio::io_context io;
  int status = 1;
  asio::co_spawn(io, client_main<B>(args, options, history), [&](std::exception_ptr e, int result) {
    status = result;
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      std::cerr << fmt::format("chaos client {}: stopped by {}\n", args.client, x.what());
    }
    status = 1;
  });
  io.run();
  return status;
}

// ---- the memory backend: clients, nemesis and storage in one process ----------------------------

int resources_of(const std::string& w) {
  return w == "increments" ? 1 : w == "holds" ? 2 : 3;
}
int keys_of(const std::string& w) {
  return w == "bank" ? 8 : w == "list-append" ? 6 : 1;
}

using statepact::chaos::FaultyBackend;
using statepact::chaos::Link;

asio::awaitable<void> memory_client(sp::MemoryBackend& backend, Link& link, const Args& args,
                                    HistoryFile& history) {
  FaultyBackend faulty(backend, link, args.seed * 0x2545F4914F6CDD1DULL + args.client);
  Client<FaultyBackend> client(faulty, args, history);
  co_await client.run();
}

// One client "process": its own thread and io_context. Killing it stops the thread wherever its
// coroutine is and destroys the coroutine: an operation it had invoked never completes (unknown),
// as with SIGKILL.
class MemoryClient {
 public:
  // A client whose coroutine dies of anything but the nemesis's kill counts in `failures`: the
  // run then fails, as a crashed client process fails a server run.
  MemoryClient(sp::MemoryBackend& backend, Link& link, Args args, std::atomic<int>& failures)
      : args_(std::move(args)), history_(args_.history) {
    args_.killed = &killed_;
    args_.failures = &failures;
    auto done = [this, &failures](std::exception_ptr e) {
      if (!e || killed_) return;
      ++failures;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::cerr << fmt::format("chaos client {}: stopped by {}\n", args_.client, x.what());
      } catch (...) {
        std::cerr << fmt::format("chaos client {}: stopped by a non-std exception\n", args_.client);
      }
    };
    asio::co_spawn(io_, memory_client(backend, link, args_, history_),
                   asio::bind_cancellation_slot(cancel_.slot(), done));
    thread_ = std::thread([this] { io_.run(); });
  }
  ~MemoryClient() {
    if (thread_.joinable()) thread_.join();
  }
  MemoryClient(const MemoryClient&) = delete;
  MemoryClient& operator=(const MemoryClient&) = delete;

  const Args& args() const { return args_; }
  bool done() { return io_.stopped(); }
  // Cancels the client wherever it is (a lock wait, a pause, between operations); the operation it
  // had invoked gets no completion. Its sessions end as their coroutine unwinds, as a server ends
  // a dead client's sessions. Returns false if the client did not stop within `patience`.
  bool kill(milliseconds patience = milliseconds(10'000)) {
    killed_ = true;
    asio::post(io_, [this] { cancel_.emit(asio::cancellation_type::terminal); });
    const auto until = std::chrono::steady_clock::now() + patience;
    while (!io_.stopped() && std::chrono::steady_clock::now() < until)
      std::this_thread::sleep_for(milliseconds(5));
    if (!io_.stopped()) return false;
    thread_.join();
    return true;
  }
  // Blocks the client's thread until `resume` is ready, like SIGSTOP until SIGCONT.
  void pause(std::shared_future<void> resume) {
    asio::post(io_, [resume] { resume.wait(); });
  }

 private:
  Args args_;
  HistoryFile history_;
  std::atomic<bool> killed_{false};
  asio::cancellation_signal cancel_;
  asio::io_context io_;
  std::thread thread_;
};

// The memory run's faults, by name as in chaos.sh's STATEPACT_CHAOS_NEMESES.
const std::vector<std::string> memory_nemeses{"pause-client", "kill-client",   "clock-jump-server",
                                              "net-latency",  "net-partition", "lose-replies",
                                              "late-replies"};

int memory_run(int argc, char** argv) {
  std::string dir;
  double duration_s = 30;
  std::uint64_t seed = 1;
  int clients = 3;
  long long retention_ms = 8000;
  std::vector<std::string> nemeses = memory_nemeses;
  for (int i = 2; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) bad(fmt::format("{} needs a value", k));
    const std::string v = argv[i + 1];
    if (k == "--dir")
      dir = v;
    else if (k == "--duration")
      duration_s = static_cast<double>(number(k, v, 1, 86'400));
    else if (k == "--seed")
      seed = static_cast<std::uint64_t>(number(k, v, 0, std::numeric_limits<long long>::max()));
    else if (k == "--clients")
      clients = static_cast<int>(number(k, v, 1, 64));
    else if (k == "--retention-ms")
      retention_ms = number(k, v, 1000, 86'400'000);
    else if (k == "--nemeses") {
      nemeses.clear();
      std::size_t from = 0;
      while (from <= v.size()) {
        const std::size_t comma = std::min(v.find(',', from), v.size());
        const std::string n = v.substr(from, comma - from);
        if (!n.empty()) {
          if (std::find(memory_nemeses.begin(), memory_nemeses.end(), n) == memory_nemeses.end())
            bad(fmt::format("memory runs have no nemesis '{}'", n));
          nemeses.push_back(n);
        }
        from = comma + 1;
      }
    } else
      bad(fmt::format("unknown option '{}' for memory", k));
  }
  if (dir.empty()) bad("memory needs --dir");

  // The backend's clock: real time plus an offset the nemesis steps forward and back. A short
  // idempotency retention, so replies held past it (late-replies) reach expired records.
  auto offset = std::make_shared<std::atomic<long long>>(0);
  sp::MemoryBackend backend(
      sp::MemoryOptions()
          .clock([offset] { return sp::Clock::now() + std::chrono::milliseconds(offset->load()); })
          .idempotency_retention(milliseconds(retention_ms)));
  // Two links, odd clients on one and even on the other, as with the relays of a server run; the
  // final reads go over a third that no nemesis touches.
  Link links[3];
  std::atomic<int> failures{0};
  HistoryFile nemesis_log(dir + "/nemesis.jsonl");
  std::mt19937_64 rng(seed);
  auto uniform = [&rng](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };

  const std::vector<std::string> workloads{"fenced-log", "bank", "list-append", "increments",
                                           "holds"};
  const auto end = std::chrono::steady_clock::now() +
                   std::chrono::milliseconds(static_cast<long long>(duration_s * 1000));
  auto remaining_s = [&end] {
    return std::chrono::duration<double>(end - std::chrono::steady_clock::now()).count();
  };
  std::deque<std::unique_ptr<MemoryClient>> live;
  int next_id = 1;
  auto start = [&](const std::string& workload) {
    Args a;
    a.backend = "memory";
    a.workload = workload;
    a.client = next_id++;
    a.history = fmt::format("{}/client-{}.jsonl", dir, a.client);
    a.duration_s = remaining_s();
    a.seed = seed;
    a.resources = resources_of(workload);
    a.keys = keys_of(workload);
    if (a.duration_s >= 1)
      live.push_back(std::make_unique<MemoryClient>(backend, links[a.client % 2], a, failures));
  };
  for (const auto& w : workloads)
    for (int i = 0; i < clients; ++i) start(w);

  auto steady_ns = [] {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
  };
  while (remaining_s() > 0 && !nemeses.empty()) {
    std::this_thread::sleep_for(milliseconds(uniform(300, 1500)));
    if (remaining_s() <= 0 || live.empty()) break;
    const std::string kind =
        nemeses[static_cast<std::size_t>(uniform(0, static_cast<int>(nemeses.size()) - 1))];
    const std::size_t pick =
        static_cast<std::size_t>(uniform(0, static_cast<int>(live.size()) - 1));
    MemoryClient& victim = *live[pick];
    const int l = uniform(0, 1);
    Link& link = links[l];
    if (kind == "pause-client") {
      const int ms = uniform(600, 2000);  // past every fenced-log lease ttl (at most 500 ms)
      nemesis_log.line(json{{"nemesis", kind},
                            {"phase", "start"},
                            {"args", {{"client", victim.args().client}, {"ms", ms}}}});
      std::promise<void> resume;
      victim.pause(resume.get_future().share());
      std::this_thread::sleep_for(milliseconds(ms));
      resume.set_value();
      nemesis_log.line(json{{"nemesis", kind}, {"phase", "end"}});
    } else if (kind == "kill-client") {
      nemesis_log.line(json{
          {"nemesis", kind}, {"phase", "start"}, {"args", {{"client", victim.args().client}}}});
      const std::string workload = victim.args().workload;
      if (!victim.kill()) {
        std::cerr << fmt::format("chaos client {}: did not stop within 10 s of its cancellation\n",
                                 victim.args().client);
        std::_Exit(4);
      }
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(pick));
      start(workload);
      nemesis_log.line(json{{"nemesis", kind}, {"phase", "end"}});
    } else if (kind == "clock-jump-server") {
      // Forward (leases expire early) or back (they last longer, as after an NTP step).
      const int seconds = uniform(1, 3) * (uniform(0, 1) ? 1 : -1);
      nemesis_log.line(
          json{{"nemesis", kind}, {"phase", "start"}, {"args", {{"seconds", seconds}}}});
      offset->fetch_add(seconds * 1000LL);
      nemesis_log.line(json{{"nemesis", kind}, {"phase", "end"}});
    } else if (kind == "net-latency") {
      const int latency = uniform(20, 420), ms = uniform(500, 3000);
      nemesis_log.line(json{{"nemesis", kind},
                            {"phase", "start"},
                            {"args", {{"link", l}, {"latency_ms", latency}, {"ms", ms}}}});
      link.latency_ms = latency;
      std::this_thread::sleep_for(milliseconds(ms));
      link.latency_ms = 0;
      nemesis_log.line(json{{"nemesis", kind}, {"phase", "end"}});
    } else if (kind == "net-partition") {
      // Calls wait, both ways, until it heals: a request sent is applied late, a reply comes late.
      const int ms = uniform(300, 3000);
      nemesis_log.line(
          json{{"nemesis", kind}, {"phase", "start"}, {"args", {{"link", l}, {"ms", ms}}}});
      link.stalled_until = steady_ns() + ms * 1'000'000LL;
      std::this_thread::sleep_for(milliseconds(ms));
      nemesis_log.line(json{{"nemesis", kind}, {"phase", "end"}});
    } else if (kind == "lose-replies") {
      const int percent = uniform(20, 60), ms = uniform(500, 3000);
      nemesis_log.line(json{{"nemesis", kind},
                            {"phase", "start"},
                            {"args", {{"link", l}, {"percent", percent}, {"ms", ms}}}});
      link.lose_percent = percent;
      std::this_thread::sleep_for(milliseconds(ms));
      link.lose_percent = 0;
      nemesis_log.line(json{{"nemesis", kind}, {"phase", "end"}});
    } else if (kind == "late-replies") {
      // Commits sent meanwhile are applied, and their replies held past the retention, then lost.
      const int late = static_cast<int>(retention_ms) + uniform(200, 600), ms = uniform(300, 1500);
      nemesis_log.line(json{{"nemesis", kind},
                            {"phase", "start"},
                            {"args", {{"link", l}, {"late_ms", late}, {"ms", ms}}}});
      link.late_reply_ms = late;
      std::this_thread::sleep_for(milliseconds(ms));
      link.late_reply_ms = 0;
      nemesis_log.line(json{{"nemesis", kind}, {"phase", "end"}});
    }
  }
  while (remaining_s() > 0) std::this_thread::sleep_for(milliseconds(50));
  // Clients stop by themselves at the deadline; one still busy after a grace period is killed.
  const auto grace = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (auto& c : live) {
    while (!c->done() && std::chrono::steady_clock::now() < grace)
      std::this_thread::sleep_for(milliseconds(50));
    if (!c->done() && !c->kill()) {
      std::cerr << fmt::format("chaos client {}: did not stop at the end of the run\n",
                               c->args().client);
      std::_Exit(4);
    }
  }
  live.clear();

  int final_id = 900'000;
  for (const auto& w : workloads) {
    if (w == "holds") continue;  // nothing to read back: its checks need no final state
    Args a;
    a.backend = "memory";
    a.workload = w;
    a.client = final_id++;
    a.history = fmt::format("{}/final-{}.jsonl", dir, w);
    a.seed = seed;
    a.resources = resources_of(w);
    a.keys = keys_of(w);
    a.final_reads = true;
    MemoryClient reader(backend, links[2], a, failures);
    while (!reader.done()) std::this_thread::sleep_for(milliseconds(10));
  }
  if (failures.load() > 0) {
    std::cerr << fmt::format(
        "statepact_chaos_client memory: {} client failures (a coroutine that died, an exception "
        "from outside the library, or a final read that gave up)\n",
        failures.load());
    return 3;
  }
  return 0;
}

}  // namespace

int nemesis_line(int argc, char** argv) {
  if (argc < 5 || argc > 6) bad("nemesis needs FILE KIND start|end [ARGS_JSON]");
  const std::string phase = argv[4];
  if (phase != "start" && phase != "end") bad("a nemesis phase is start or end");
  json line{{"nemesis", argv[3]}, {"phase", phase}};
  if (argc == 6) {
    try {
      line["args"] = json::parse(argv[5]);
    } catch (const json::exception& e) {
      bad(fmt::format("nemesis ARGS_JSON is not JSON: {}", e.what()));
    }
  }
  HistoryFile file(argv[2]);
  file.line(line);
  return 0;
}

// A client that crashes leaves its stack in clients.log, so a crash under faults can be traced to
// the library call that made it (only async-signal-safe calls here).
void on_crash(int sig) {
  static const char msg[] = "statepact_chaos_client: crashed; stack:\n";
  (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
  void* frames[64];
  const int n = backtrace(frames, 64);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}

int main(int argc, char** argv) {
  signal(SIGSEGV, on_crash);
  signal(SIGBUS, on_crash);
  signal(SIGABRT, on_crash);
  if (argc > 1 && std::string(argv[1]) == "nemesis") return nemesis_line(argc, argv);
  if (argc > 1 && std::string(argv[1]) == "memory") return memory_run(argc, argv);
  // chaos.sh asks here, so the loopback rule lives in one place (loopback.hpp).
  if (argc == 3 && std::string(argv[1]) == "loopback-url")
    return statepact::chaos::loopback_url(argv[2]) ? 0 : 1;
  const Args args = parse(argc, argv);
  HistoryFile history(args.history);
  const std::string name = fmt::format("chaos-{}", args.client);
  // Short deadlines: a paused or killed server must turn into errors quickly, not stall the run.
#ifdef STATEPACT_HAVE_REDIS
  if (args.backend == "redis") {
    sp::RedisOptions options;
    options.command_timeout(milliseconds(1000))
        .connect_timeout(milliseconds(1000))
        .lock_record_ttl(milliseconds(3000))
        .client_name(name);
    return run_client<sp::RedisBackend>(args, options, history);
  }
#endif
#ifdef STATEPACT_HAVE_POSTGRES
  if (args.backend == "postgres") {
    sp::PostgresOptions options;
    options.pool_size(2)
        .statement_timeout(milliseconds(2000))
        .lock_timeout(milliseconds(1000))
        .connect_timeout(milliseconds(2000))
        .call_timeout(milliseconds(4000))
        .application_name(name);
    return run_client<sp::PostgresBackend>(args, options, history);
  }
#endif
  std::cerr << "statepact_chaos_client: this build has no " << args.backend << " backend\n";
  return 2;
}
