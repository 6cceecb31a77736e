// The PostgreSQL transport with no server: the failure map (failures.hpp), the connection threads'
// queue and cancel point (worker), the deadline race of a call (call.hpp) and the migration's
// choice of versions. The Links here never reach a server: their connection string names a
// loopback port nobody listens on (or a socket that hangs up at once).
#include <catch2/catch.hpp>

#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include <asio/bind_cancellation_slot.hpp>
#include <asio/cancellation_signal.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/error.hpp>
#include <asio/io_context.hpp>

#include <fmt/format.h>

#include <pqxx/pqxx>

#include "../postgres/call.hpp"
#include "../postgres/failures.hpp"
#include "../postgres/migrate.hpp"
#include "../postgres/worker.hpp"

#include "../support/caught.hpp"
#include "../support/ports.hpp"

namespace sp = statepact;
namespace d = statepact::detail;
namespace pg = statepact::detail::pg;
using namespace std::chrono_literals;

namespace {

// Settings of a backend whose server is a loopback port; nothing connects unless a test calls
// Link::connection(). SSL and GSS are off so that one connection attempt is one TCP connection.
std::shared_ptr<pg::Shared> pg_transport_shared(int port, std::string extra = "") {
  pg::Settings s;
  s.conninfo =
      fmt::format("host=127.0.0.1 port={} connect_timeout=2 sslmode=disable gssencmode=disable {}",
                  port, extra);
  s.schema = "statepact";
  s.application_name = "statepact-unit";
  s.target = fmt::format("postgresql://127.0.0.1:{}/unit", port);
  return std::make_shared<pg::Shared>(std::move(s));
}

std::shared_ptr<pg::Shared> pg_transport_unreachable() {
  return pg_transport_shared(sp::test::unused_loopback_port());
}

// What rethrow_mapped() makes of `original` when the reply was lost as `lost`.
std::exception_ptr pg_transport_mapped(std::exception_ptr original, d::LostReply lost) {
  pg::Link link(pg_transport_unreachable());
  try {
    try {
      std::rethrow_exception(original);
    } catch (...) {
      pg::rethrow_mapped(link, lost);
    }
  } catch (...) {
    CHECK_FALSE(link.connected());  // mapping never connects
    return std::current_exception();
  }
  return nullptr;  // rethrow_mapped never returns
}

template <class E>
std::exception_ptr pg_transport_mapped(const E& e, d::LostReply lost) {
  return pg_transport_mapped(std::make_exception_ptr(e), lost);
}

template <class E>
bool pg_transport_is(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const E&) {
    return true;
  } catch (...) {
    return false;
  }
}

// has_idempotency_key() of a CommitUnknownError; nullopt for any other exception.
std::optional<bool> pg_transport_commit_key(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const sp::CommitUnknownError& x) {
    return x.has_idempotency_key();
  } catch (...) {
    return std::nullopt;
  }
}

// How a call() ended, as its caller saw it.
struct PgTransportOutcome {
  std::exception_ptr error;
  int value = -1;
  int completions = 0;
  std::thread::id resumed_on;
};

template <class Fn>
asio::awaitable<void> pg_transport_await_call(pg::JobQueue& queue, pg::Deadline deadline, Fn fn,
                                              std::function<void(pg::Link&)> on_skip,
                                              std::shared_ptr<pg::CancelPoint> cancel,
                                              std::uint64_t seq,
                                              std::shared_ptr<PgTransportOutcome> out) {
  auto op =
      pg::call<int>(queue, deadline, std::move(fn), std::move(cancel), seq, std::move(on_skip));
  try {
    out->value = co_await std::move(op);
  } catch (...) {
    out->error = std::current_exception();
  }
  out->resumed_on = std::this_thread::get_id();
  ++out->completions;
}

// Starts a call on `io` (the caller's executor); the outcome fills in as the caller resumes.
template <class Fn>
std::shared_ptr<PgTransportOutcome> pg_transport_spawn(
    asio::io_context& io, pg::JobQueue& queue, pg::Deadline deadline, Fn fn,
    std::function<void(pg::Link&)> on_skip = {}) {
  auto out = std::make_shared<PgTransportOutcome>();
  asio::co_spawn(
      io,
      pg_transport_await_call(queue, deadline, std::move(fn), std::move(on_skip), nullptr, 0, out),
      asio::detached);
  return out;
}

// A call run to its end (bounded: a call that never answers leaves completions at 0).
template <class Fn>
std::shared_ptr<PgTransportOutcome> pg_transport_call(asio::io_context& io, pg::JobQueue& queue,
                                                      pg::Deadline deadline, Fn fn) {
  auto out = pg_transport_spawn(io, queue, deadline, std::move(fn));
  io.restart();
  io.run_for(3s);
  return out;
}

// The connection thread of a test: drains `queue` on its own Link, as a Worker does (with no
// server behind it).
class PgTransportDrainer {
 public:
  explicit PgTransportDrainer(pg::JobQueue& queue)
      : queue_(queue), thread_([&queue, shared = pg_transport_unreachable()] {
          pg::Link link(shared);
          while (auto job = queue.pop()) job->run(link);
        }) {}
  ~PgTransportDrainer() { close_and_join(); }
  std::thread::id id() const { return thread_.get_id(); }
  // Every job pushed so far has run (and is destroyed) when this returns.
  void close_and_join() {
    queue_.close();
    if (thread_.joinable()) thread_.join();
  }

 private:
  pg::JobQueue& queue_;
  std::thread thread_;
};

// Notes what happens to it.
class PgTransportNoteJob final : public pg::Job {
 public:
  PgTransportNoteJob(std::vector<std::string>& notes, std::string name)
      : notes_(notes), name_(std::move(name)) {}
  void run(pg::Link&) noexcept override { notes_.push_back("ran " + name_); }
  void abandon() noexcept override { notes_.push_back("abandoned " + name_); }

 private:
  std::vector<std::string>& notes_;
  std::string name_;
};

// pop() on a thread of its own. Detached, holding the queue: if pop() never returns, the test
// fails on the future's wait instead of hanging in a join.
std::future<std::unique_ptr<pg::Job>> pg_transport_pop_async(std::shared_ptr<pg::JobQueue> q) {
  std::promise<std::unique_ptr<pg::Job>> p;
  auto f = p.get_future();
  std::thread([q = std::move(q), p = std::move(p)]() mutable { p.set_value(q->pop()); }).detach();
  return f;
}

// A loopback socket that accepts each connection and closes it at once, counting them: libpq
// fails during startup, so every connection attempt shows up as one accept.
class PgTransportHangup {
 public:
  PgTransportHangup() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (fd_ < 0 || ::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
        ::listen(fd_, 8) != 0 || ::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
      throw std::runtime_error("cannot listen on loopback");
    port_ = ntohs(addr.sin_port);
    thread_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (::poll(&p, 1, 10) <= 0) continue;
        const int c = ::accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        ++accepted_;
        ::close(c);
      }
    });
  }
  ~PgTransportHangup() {
    stop();
    ::close(fd_);
  }
  int port() const { return port_; }
  // Stops accepting; the count is final then.
  int stop() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
    return accepted_;
  }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  int accepted_ = 0;  // written by the thread only; read after the join
  std::thread thread_;
};

std::string pg_transport_slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

// ---- failures.hpp -------------------------------------------------------------------------------

TEST_CASE("postgres transport: sqlstate_of names the state libpqxx 6 leaves out",
          "[postgres][transport]") {
  // The transaction-rollback class comes without a SQLSTATE: the type says it.
  const pqxx::serialization_failure serialization("could not serialize");
  const pqxx::deadlock_detected deadlock("deadlock detected");
  const pqxx::statement_completion_unknown unknown("completion unknown");
  const pqxx::transaction_rollback rollback("rolled back");
  CHECK(pg::sqlstate_of(static_cast<const pqxx::transaction_rollback&>(serialization)) == "40001");
  CHECK(pg::sqlstate_of(static_cast<const pqxx::transaction_rollback&>(deadlock)) == "40P01");
  CHECK(pg::sqlstate_of(static_cast<const pqxx::transaction_rollback&>(unknown)) == "40003");
  CHECK(pg::sqlstate_of(rollback) == "40000");

  // An sql_error's own state wins over its type.
  CHECK(pg::sqlstate_of(pqxx::sql_error("duplicate key", "INSERT", "23505")) == "23505");
  CHECK(pg::sqlstate_of(pqxx::syntax_error("ambiguous", "SELECT", "42P10")) == "42P10");
  // Without one, the subclasses that say it (the subclasses of syntax_error before it).
  auto of = [](const pqxx::sql_error& e) { return pg::sqlstate_of(e); };
  CHECK(of(pqxx::insufficient_privilege("denied")) == "42501");
  CHECK(of(pqxx::undefined_table("no table")) == "42P01");
  CHECK(of(pqxx::undefined_function("no function")) == "42883");
  CHECK(of(pqxx::undefined_column("no column")) == "42703");
  CHECK(of(pqxx::syntax_error("syntax")) == "42601");
  CHECK(of(pqxx::disk_full("full")) == "53100");
  CHECK(of(pqxx::out_of_memory("oom")) == "53200");
  CHECK(of(pqxx::insufficient_resources("resources")) == "53000");
  // Nothing to go by.
  CHECK(of(pqxx::sql_error("plain")).empty());
  CHECK(of(pqxx::unique_violation("duplicate")).empty());

  CHECK(pg::connection_class(pqxx::sql_error("terminated", "", "57P01")));
  CHECK(pg::connection_class(pqxx::sql_error("broken", "", "08006")));
  CHECK_FALSE(pg::connection_class(pqxx::sql_error("serialize", "", "40001")));
  CHECK_FALSE(pg::connection_class(pqxx::sql_error("plain")));
}

TEST_CASE("postgres transport: a broken connection or a commit in doubt, by what was sent",
          "[postgres][transport]") {
  // in_doubt_error: libpqxx lost the connection during the commit, whatever the call said.
  for (bool keyed : {true, false}) {
    const auto e = pg_transport_mapped(pqxx::in_doubt_error("lost during commit"),
                                       d::LostReply::commit(keyed));
    CHECK(pg_transport_commit_key(e) == keyed);
    CHECK(sp::test::caught(e).text ==
          "PostgreSQL: connection lost (lost during commit) after the commit was sent; it may or "
          "may not have been applied");
  }
  CHECK(pg_transport_commit_key(
            pg_transport_mapped(pqxx::in_doubt_error("x"), d::LostReply::write())) == false);

  const pqxx::broken_connection gone("gone");
  const auto read = sp::test::caught(pg_transport_mapped(gone, d::LostReply::read()));
  CHECK(read.code == sp::ErrorCode::backend_unavailable);
  CHECK(read.retryable);
  CHECK(read.text == "PostgreSQL: connection lost (gone)");
  const auto write = sp::test::caught(pg_transport_mapped(gone, d::LostReply::write()));
  CHECK_FALSE(write.commit_unknown);
  CHECK(write.text ==
        "PostgreSQL: connection lost (gone); the operation may or may not have "
        "happened");
  CHECK(sp::test::caught(pg_transport_mapped(gone, d::LostReply::in_transaction()))
            .has("the server rolls the transaction back, nothing was applied"));
  CHECK(pg_transport_commit_key(pg_transport_mapped(gone, d::LostReply::commit(true))) == true);
  const auto bare = pg_transport_mapped(gone, d::LostReply::commit(false));
  CHECK(pg_transport_commit_key(bare) == false);
  CHECK_FALSE(sp::test::caught(bare).retryable);
  // A subclass is a broken connection too.
  CHECK(pg_transport_is<sp::BackendUnavailableError>(
      pg_transport_mapped(pqxx::too_many_connections("too many"), d::LostReply::write())));
  // The server's idle-in-transaction timeout gets its explanation.
  CHECK(
      sp::test::caught(pg_transport_mapped(pqxx::broken_connection("terminating connection due to "
                                                                   "idle-in-transaction timeout"),
                                           d::LostReply::in_transaction()))
          .has("longer than idle_in_transaction_timeout"));
}

TEST_CASE("postgres transport: rollbacks and SQLSTATEs become the matching errors",
          "[postgres][transport]") {
  const auto write = d::LostReply::write();
  const auto serialization =
      pg_transport_mapped(pqxx::serialization_failure("could not serialize"), write);
  CHECK(pg_transport_is<pg::SerializationConflict>(serialization));
  CHECK(sp::test::caught(serialization).code == sp::ErrorCode::conflict);
  CHECK(sp::test::caught(serialization).retryable);
  CHECK(sp::test::caught(pg_transport_mapped(pqxx::transaction_rollback("rolled back"), write))
            .code == sp::ErrorCode::conflict);
  const auto deadlock = pg_transport_mapped(pqxx::deadlock_detected("deadlock detected"), write);
  CHECK(pg_transport_is<sp::DeadlockError>(deadlock));
  CHECK(sp::test::caught(deadlock).text == "PostgreSQL deadlock: deadlock detected");
  // 40003: the statement may have completed; on a commit, that is an unknown outcome.
  const pqxx::statement_completion_unknown unknown("completion unknown");
  CHECK(pg_transport_commit_key(pg_transport_mapped(unknown, d::LostReply::commit(true))) == true);
  const auto unknown_write = pg_transport_mapped(unknown, write);
  CHECK(pg_transport_is<sp::BackendUnavailableError>(unknown_write));
  CHECK(sp::test::caught(unknown_write).has("connection lost"));

  const auto lock = pg_transport_mapped(pqxx::sql_error("lock timeout", "", "55P03"), write);
  CHECK(pg_transport_is<sp::LockTimeoutError>(lock));
  CHECK(sp::test::caught(lock).code == sp::ErrorCode::lock_timeout);
  CHECK(pg_transport_is<sp::ConfigurationError>(
      pg_transport_mapped(pqxx::sql_error("permission denied", "", "42501"), write)));
  CHECK(sp::test::caught(pg_transport_mapped(pqxx::sql_error("canceling", "", "57014"), write))
            .has("timed out or was cancelled"));
  CHECK(pg_transport_commit_key(pg_transport_mapped(pqxx::sql_error("terminated", "", "57P01"),
                                                    d::LostReply::commit(false))) == false);
  // A state from a subclass' type: a table dropped after the migration is configuration.
  const auto missing =
      sp::test::caught(pg_transport_mapped(pqxx::undefined_table("no table"), write));
  CHECK(missing.configuration);
  CHECK(missing.has("SQLSTATE 42P01"));
  CHECK(sp::test::caught(pg_transport_mapped(pqxx::disk_full("full"), write)).retryable);
  // A state the map does not know: a plain Error, not retried.
  const auto internal = pg_transport_mapped(pqxx::sql_error("internal", "", "XX000"), write);
  CHECK_FALSE(pg_transport_is<sp::BackendUnavailableError>(internal));
  CHECK(sp::test::caught(internal).code == sp::ErrorCode::backend_unavailable);
  CHECK_FALSE(sp::test::caught(internal).retryable);
  CHECK(sp::test::caught(internal).text == "PostgreSQL error XX000; nothing was applied: internal");
  CHECK(sp::test::caught(pg_transport_mapped(pqxx::sql_error("odd"), write)).has("(no SQLSTATE)"));
}

TEST_CASE("postgres transport: other failures, and what passes unchanged",
          "[postgres][transport]") {
  // Anything else after a commit was sent: unknown outcome, the key carried.
  const std::runtime_error bad_reply("bad json");
  for (bool keyed : {true, false}) {
    const auto e = pg_transport_mapped(bad_reply, d::LostReply::commit(keyed));
    CHECK(pg_transport_commit_key(e) == keyed);
    CHECK(sp::test::caught(e).text ==
          "unexpected reply from PostgreSQL after the commit was sent; it may or may not have "
          "been applied: bad json");
  }
  CHECK(pg_transport_commit_key(pg_transport_mapped(42, d::LostReply::commit(true))) == true);
  // Before a commit: a plain Error (not retried), whatever the exception was.
  for (auto original : {std::make_exception_ptr(bad_reply),
                        std::make_exception_ptr(pqxx::conversion_error("not an integer")),
                        std::make_exception_ptr(pqxx::usage_error("misuse"))}) {
    const auto e = pg_transport_mapped(original, d::LostReply::write());
    CHECK_FALSE(pg_transport_is<sp::BackendUnavailableError>(e));
    const auto c = sp::test::caught(e);
    CHECK(c.code == sp::ErrorCode::backend_unavailable);
    CHECK_FALSE(c.retryable);
    CHECK(c.has("unexpected failure talking to PostgreSQL: "));
  }
  CHECK(sp::test::caught(pg_transport_mapped(42, d::LostReply::read())).text ==
        "unexpected failure talking to PostgreSQL");

  // statepact's own errors, UsageError and cancellation pass as they are, even after a commit.
  const auto commit = d::LostReply::commit(true);
  const auto invalid = pg_transport_mapped(sp::InvalidArgumentError("bad name"), commit);
  CHECK(pg_transport_is<sp::InvalidArgumentError>(invalid));
  CHECK(sp::test::caught(invalid).text == "bad name");
  const auto lost = pg_transport_mapped(sp::LeaseLostError("job", "w1", 3, 4, "expired"), commit);
  try {
    std::rethrow_exception(lost);
  } catch (const sp::LeaseLostError& e) {
    CHECK(e.resource() == "job");
    CHECK(e.current_fence() == 4);
  }
  const auto usage = pg_transport_mapped(sp::UsageError("session used after commit"), commit);
  try {
    std::rethrow_exception(usage);
  } catch (const sp::UsageError& e) {
    CHECK(std::string(e.what()) == "session used after commit");
  }
  const auto aborted = pg_transport_mapped(
      std::system_error(make_error_code(asio::error::operation_aborted)), commit);
  try {
    std::rethrow_exception(aborted);
  } catch (const std::system_error& e) {
    CHECK(e.code() == asio::error::operation_aborted);
  }
}

TEST_CASE("postgres transport: autocommit when no connection can be made",
          "[postgres][transport]") {
  SECTION("a closed port: unavailable, nothing sent, whatever the call") {
    const int port = sp::test::unused_loopback_port();
    pg::Link link(pg_transport_shared(port));
    int runs = 0;
    for (auto lost : {d::LostReply::read(), d::LostReply::write(), d::LostReply::commit(true)}) {
      try {
        pg::autocommit(link, lost, [&](pqxx::nontransaction&) { return ++runs; });
        FAIL("autocommit ran with no server");
      } catch (const sp::BackendUnavailableError& e) {
        // Not CommitUnknownError for the commit: it was never sent.
        CHECK(std::string(e.what()).rfind(
                  fmt::format("cannot connect to PostgreSQL at postgresql://127.0.0.1:{}/unit: ",
                              port),
                  0) == 0);
      }
    }
    CHECK(runs == 0);
    CHECK_FALSE(link.connected());
  }
  SECTION("a server that hangs up: one connection attempt per call, the job never runs") {
    // A failed connect is not retried inside autocommit (its resend is for a connection found
    // dead after it was made); the caller's retry of the retryable error is the next attempt.
    PgTransportHangup hangup;
    pg::Link link(pg_transport_shared(hangup.port()));
    int runs = 0;
    for (auto lost : {d::LostReply::read(), d::LostReply::commit(false)}) {
      CHECK_THROWS_AS(pg::autocommit(link, lost, [&](pqxx::nontransaction&) { return ++runs; }),
                      sp::BackendUnavailableError);
    }
    CHECK(hangup.stop() == 2);
    CHECK(runs == 0);
    CHECK_FALSE(link.connected());
  }
  SECTION("a connection string libpq refuses: configuration, not retryable") {
    pg::Link link(pg_transport_shared(sp::test::unused_loopback_port(), "no_such_option=1"));
    try {
      pg::autocommit(link, d::LostReply::read(), [](pqxx::nontransaction&) { return 0; });
      FAIL("autocommit ran with a bad connection string");
    } catch (const sp::ConfigurationError& e) {
      CHECK_FALSE(e.retryable());
      CHECK(std::string(e.what()).find("check the connection string") != std::string::npos);
    }
  }
}

TEST_CASE("postgres transport: a session without its transaction", "[postgres][transport]") {
  pg::Link link(pg_transport_unreachable());
  REQUIRE_FALSE(link.tx);
  pg::roll_back(link);  // nothing to roll back: no connection is made for it
  CHECK_FALSE(link.tx);
  CHECK_FALSE(link.connected());
  bool ran = false;
  try {
    pg::in_transaction(link, [&](pqxx::work&) {
      ran = true;
      return 0;
    });
    FAIL("in_transaction ran with no transaction");
  } catch (const sp::BackendUnavailableError& e) {
    CHECK(std::string(e.what()).find("the session's transaction is gone") != std::string::npos);
  }
  CHECK_FALSE(ran);
  CHECK_FALSE(link.connected());
}

// ---- call.hpp
// -------------------------------------------------------------------------------------

TEST_CASE("postgres transport: a call's answer reaches its caller before the deadline",
          "[postgres][transport]") {
  asio::io_context io;
  pg::JobQueue queue;
  PgTransportDrainer drainer(queue);
  std::thread::id ran_on;
  const auto t0 = std::chrono::steady_clock::now();
  const auto out =
      pg_transport_call(io, queue, pg::Deadline{10s, d::LostReply::read()}, [&](pg::Link& link) {
        ran_on = std::this_thread::get_id();
        CHECK_FALSE(link.connected());
        return 42;
      });
  const auto took = std::chrono::steady_clock::now() - t0;
  const auto drainer_id = drainer.id();
  queue.close();
  REQUIRE(out->completions == 1);
  CHECK_FALSE(out->error);
  CHECK(out->value == 42);
  CHECK(ran_on == drainer_id);                           // the job ran on the connection thread
  CHECK(out->resumed_on == std::this_thread::get_id());  // the caller on its own executor
  CHECK(took < 2s);  // the deadline's timer was cancelled: the io_context did not wait for it
}

TEST_CASE("postgres transport: a started job slower than the deadline gets no reply",
          "[postgres][transport]") {
  asio::io_context io;
  pg::JobQueue queue;
  PgTransportDrainer drainer(queue);
  std::promise<void> started;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<bool> finished{false};
  const auto out =
      pg_transport_spawn(io, queue, pg::Deadline{20ms, d::LostReply::commit(true)}, [&](pg::Link&) {
        started.set_value();
        released.wait_for(3s);  // bounded, so a failing test cannot hang here
        finished = true;
        return 7;
      });
  io.poll();  // the caller runs up to its wait: job queued, deadline armed
  // The deadline can only fire in io.run_for() below, so the job surely started before it.
  REQUIRE(started.get_future().wait_for(2s) == std::future_status::ready);
  io.run_for(3s);  // returns once the deadline answered: a stuck job holds no work
  release.set_value();
  drainer.close_and_join();  // the job finished and tried to answer
  io.restart();
  io.poll();  // the job's late answer, if it were delivered
  REQUIRE(out->completions == 1);
  CHECK(finished);
  CHECK(out->value == -1);
  CHECK(pg_transport_commit_key(out->error) == true);
  CHECK(sp::test::caught(out->error).text ==
        "PostgreSQL: no reply within 20 ms after the commit was sent; it may or may not have "
        "been applied");
}

TEST_CASE("postgres transport: a job never started by the deadline is skipped, nothing sent",
          "[postgres][transport]") {
  asio::io_context io;
  pg::JobQueue queue;  // nobody pops it until the deadline passed
  bool ran = false;
  pg::Link* skipped_with = nullptr;
  const auto out = pg_transport_spawn(
      io, queue, pg::Deadline{20ms, d::LostReply::commit(true)},
      [&](pg::Link&) {
        ran = true;
        return 1;
      },
      [&](pg::Link& l) { skipped_with = &l; });
  io.run_for(3s);
  REQUIRE(out->completions == 1);
  const auto c = sp::test::caught(out->error);
  CHECK_FALSE(c.commit_unknown);  // even for a commit: it was never sent
  CHECK(c.retryable);
  CHECK(c.text == "PostgreSQL: no connection was free within 20 ms; nothing was sent");
  CHECK(skipped_with == nullptr);

  // The connection thread comes to it later: the cleanup runs instead of the job.
  pg::Link link(pg_transport_unreachable());
  auto job = queue.pop();
  REQUIRE(job);
  job->run(link);
  job.reset();
  CHECK_FALSE(ran);
  CHECK(skipped_with == &link);
  io.restart();
  io.poll();
  CHECK(out->completions == 1);
}

TEST_CASE("postgres transport: a call maps what its job throws", "[postgres][transport]") {
  asio::io_context io;
  pg::JobQueue queue;
  PgTransportDrainer drainer(queue);
  const auto deadlock = pg_transport_call(
      io, queue, pg::Deadline{10s, d::LostReply::write()},
      [](pg::Link&) -> int { throw pqxx::deadlock_detected("deadlock detected"); });
  const auto broken =
      pg_transport_call(io, queue, pg::Deadline{10s, d::LostReply::read()},
                        [](pg::Link&) -> int { throw pqxx::broken_connection("gone"); });
  const auto bad_reply =
      pg_transport_call(io, queue, pg::Deadline{10s, d::LostReply::commit(true)},
                        [](pg::Link&) -> int { throw std::runtime_error("bad json"); });
  const auto own =
      pg_transport_call(io, queue, pg::Deadline{10s, d::LostReply::commit(true)},
                        [](pg::Link&) -> int { throw sp::ResourceNotFoundError("accounts"); });
  queue.close();
  for (const auto& out : {deadlock, broken, bad_reply, own}) REQUIRE(out->completions == 1);
  CHECK(pg_transport_is<sp::DeadlockError>(deadlock->error));
  CHECK(sp::test::caught(broken->error).text == "PostgreSQL: connection lost (gone)");
  CHECK(pg_transport_commit_key(bad_reply->error) == true);
  CHECK(sp::test::caught(bad_reply->error).has("unexpected reply from PostgreSQL"));
  CHECK(pg_transport_is<sp::ResourceNotFoundError>(own->error));
}

TEST_CASE("postgres transport: a call on a closed queue is abandoned at once",
          "[postgres][transport]") {
  asio::io_context io;
  pg::JobQueue queue;
  queue.close();
  bool ran = false;
  const auto t0 = std::chrono::steady_clock::now();
  const auto out =
      pg_transport_call(io, queue, pg::Deadline{10s, d::LostReply::write()}, [&](pg::Link&) {
        ran = true;
        return 1;
      });
  CHECK(std::chrono::steady_clock::now() - t0 < 2s);  // not at the deadline
  REQUIRE(out->completions == 1);
  CHECK_FALSE(ran);
  CHECK(pg_transport_is<sp::BackendUnavailableError>(out->error));
  CHECK(sp::test::caught(out->error).text == "the PostgreSQL backend is shutting down");
}

TEST_CASE("postgres transport: cancelling a caller whose statement is not armed cancels nothing",
          "[postgres][transport]") {
  auto point = std::make_shared<pg::CancelPoint>();
  point->cancel(1);
  point->cancel(7);
  CHECK_FALSE(point->cancelled(1));
  CHECK_FALSE(point->cancelled(7));
  point->disarm();
  point->cancel(2);
  CHECK_FALSE(point->cancelled(2));

  // Through call(): the caller's cancellation reaches the point, which has nothing to cancel, and
  // the job's answer still comes back.
  asio::io_context io;
  pg::JobQueue queue;
  PgTransportDrainer drainer(queue);
  std::promise<void> started;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  auto out = std::make_shared<PgTransportOutcome>();
  asio::cancellation_signal signal;
  asio::co_spawn(io,
                 pg_transport_await_call(
                     queue, pg::Deadline{10s, d::LostReply::read()},
                     [&](pg::Link&) {
                       started.set_value();
                       released.wait_for(3s);
                       return 5;
                     },
                     {}, point, 3, out),
                 asio::bind_cancellation_slot(signal.slot(), asio::detached));
  io.poll();
  REQUIRE(started.get_future().wait_for(2s) == std::future_status::ready);
  signal.emit(asio::cancellation_type::terminal);
  release.set_value();
  io.run_for(3s);
  queue.close();
  REQUIRE(out->completions == 1);
  CHECK_FALSE(out->error);
  CHECK(out->value == 5);
  CHECK_FALSE(point->cancelled(3));
}

// ---- worker.hpp
// -----------------------------------------------------------------------------------

TEST_CASE("postgres transport: a job queue runs jobs in order and closes",
          "[postgres][transport]") {
  std::vector<std::string> notes;
  pg::Link link(pg_transport_unreachable());

  SECTION("first in, first out") {
    pg::JobQueue queue;
    for (const char* name : {"a", "b", "c"})
      queue.push(std::make_unique<PgTransportNoteJob>(notes, name));
    for (int i = 0; i < 3; ++i) queue.pop()->run(link);
    CHECK(notes == std::vector<std::string>{"ran a", "ran b", "ran c"});
  }
  SECTION("pop waits for a push") {
    auto queue = std::make_shared<pg::JobQueue>();
    auto popped = pg_transport_pop_async(queue);
    CHECK(popped.wait_for(20ms) == std::future_status::timeout);
    auto job = std::make_unique<PgTransportNoteJob>(notes, "a");
    const pg::Job* pushed = job.get();
    queue->push(std::move(job));
    REQUIRE(popped.wait_for(2s) == std::future_status::ready);
    CHECK(popped.get().get() == pushed);
  }
  SECTION("close wakes a waiting pop, which returns null") {
    auto queue = std::make_shared<pg::JobQueue>();
    auto popped = pg_transport_pop_async(queue);
    CHECK(popped.wait_for(20ms) == std::future_status::timeout);
    queue->close();
    REQUIRE(popped.wait_for(2s) == std::future_status::ready);
    CHECK(popped.get() == nullptr);
  }
  SECTION("a closed queue is drained first; a push after close is abandoned") {
    auto queue = std::make_shared<pg::JobQueue>();
    queue->push(std::make_unique<PgTransportNoteJob>(notes, "a"));
    queue->close();
    queue->push(std::make_unique<PgTransportNoteJob>(notes, "b"));
    CHECK(notes == std::vector<std::string>{"abandoned b"});
    auto first = pg_transport_pop_async(queue);
    REQUIRE(first.wait_for(2s) == std::future_status::ready);
    auto job = first.get();
    REQUIRE(job);
    job->run(link);
    CHECK(notes == std::vector<std::string>{"abandoned b", "ran a"});
    auto second = pg_transport_pop_async(queue);
    REQUIRE(second.wait_for(2s) == std::future_status::ready);
    CHECK(second.get() == nullptr);
  }
}

// ---- migrate.cpp
// ----------------------------------------------------------------------------------

TEST_CASE("postgres transport: migrations are append only, one schema file each",
          "[postgres][transport]") {
  const auto all = pg::migrations_after(0);
  REQUIRE_FALSE(all.empty());
  CHECK(all.front().version == 1);
  for (std::size_t i = 1; i < all.size(); ++i) CHECK(all[i].version > all[i - 1].version);
  CHECK(all.back().version == pg::latest_version());

  // Each version applies its own file, and every schema file is a version.
  const std::filesystem::path dir = std::filesystem::path(STATEPACT_SOURCE_DIR) / "src/postgres";
  for (const auto& m : all) {
    INFO("version " << m.version);
    CHECK(std::string(m.sql) == pg_transport_slurp(dir / fmt::format("schema_v{}.sql", m.version)));
  }
  std::size_t files = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("schema_v", 0) == 0 && entry.path().extension() == ".sql") ++files;
  }
  CHECK(files == all.size());

  // A schema recorded at a version gets exactly the later ones, oldest first.
  for (std::size_t i = 0; i < all.size(); ++i) {
    INFO("current " << all[i].version);
    const auto due = pg::migrations_after(all[i].version);
    REQUIRE(due.size() == all.size() - i - 1);
    for (std::size_t k = 0; k < due.size(); ++k) CHECK(due[k].version == all[i + 1 + k].version);
  }
  // A schema migrated by a newer library: nothing to apply.
  CHECK(pg::migrations_after(pg::latest_version() + 3).empty());
}

TEST_CASE("postgres transport: the schema name is quoted as an identifier",
          "[postgres][transport]") {
  CHECK(pg::quote_ident("statepact") == "\"statepact\"");
  CHECK(pg::quote_ident("my\"schema") == "\"my\"\"schema\"");
  CHECK(pg::quote_ident("\"") == "\"\"\"\"");
  // Case, spaces, dots and UTF-8 are kept as they are: one identifier, never folded or split.
  CHECK(pg::quote_ident("Tenant A.v2") == "\"Tenant A.v2\"");
  CHECK(pg::quote_ident("sch\xc3\xa9ma") == "\"sch\xc3\xa9ma\"");
}
