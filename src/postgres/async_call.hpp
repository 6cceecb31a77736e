// A call on the pool's non-blocking connections (async_pool.hpp), run on the caller's own
// executor: no thread switch on the way out or back. The same rules as a call on a connection
// thread (call.hpp, autocommit() in failures.hpp): a client-side deadline races the call, a read
// is sent again once on a new connection after a connection failure, and every failure becomes
// statepact's error by what the statement may have done.
#pragma once

#include <exception>
#include <memory>
#include <utility>

#include <asio/async_result.hpp>
#include <asio/awaitable.hpp>
#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/use_awaitable.hpp>

#include <fmt/format.h>

#include <statepact/errors.hpp>

#include "async_link.hpp"
#include "async_pool.hpp"
#include "call.hpp"
#include "sqlstate.hpp"

namespace statepact::detail::pg {

// The statement, then, when it has no row, the one that says why or does the rest
// (statements.hpp).
inline asio::awaitable<Answer> exec_or_explain(AsyncLink& link, const char* statement,
                                               Params params, const char* explain,
                                               Params explain_params) {
  Answer a = co_await link.exec(statement, std::move(params));
  if (a.status != Answer::Status::rows || !a.rows.empty()) co_return a;
  co_return co_await link.exec(explain, std::move(explain_params));
}

// Something other than the server or the network failed (out of memory): what the statement did
// is unknown.
inline std::exception_ptr unexpected_failure(LostReply lost, std::exception_ptr e) {
  std::string what = "unknown";
  try {
    std::rethrow_exception(e);
  } catch (const Error&) {
    return std::current_exception();
  } catch (const std::exception& x) {
    what = x.what();
  } catch (...) {
  }
  return lost_reply_error("PostgreSQL", lost, Loss::disconnected,
                          fmt::format("unexpected failure ({})", what));
}

// A pool slot while a call holds it (a connection, or leave to open one). However the call ends,
// its coroutine destroyed with its io_context included, the slot goes back to the pool.
class Slot {
 public:
  explicit Slot(std::shared_ptr<AsyncPool> pool) : pool_(std::move(pool)) {}
  ~Slot() {
    if (held_) pool_->drop();
  }
  Slot(const Slot&) = delete;
  Slot& operator=(const Slot&) = delete;
  // The connection is sound: the next call may use it.
  void give_back(std::unique_ptr<AsyncLink> link) {
    held_ = false;
    pool_->give_back(std::move(link));
  }
  // The connection is gone or doubtful (the caller closes it); only the slot goes back.
  void drop() {
    held_ = false;
    pool_->drop();
  }

 private:
  std::shared_ptr<AsyncPool> pool_;
  bool held_ = true;
};

// The body of async_call(), on the caller's executor. `open()` opens a connection (on a thread);
// `f(AsyncLink&)` runs the call's statements.
template <class R, class Open, class F>
asio::awaitable<void> run_on_pool(std::shared_ptr<R> race, std::shared_ptr<AsyncPool> pool,
                                  Open open, F f) {
  const LostReply lost = race->deadline().lost;
  std::exception_ptr error;
  Rows rows;
  bool resent = false;
  for (;;) {
    std::unique_ptr<AsyncLink> link;
    try {
      if (!pool->try_take(link)) link = co_await pool->take();
    } catch (...) {
      error = std::current_exception();
    }
    if (error) break;
    Slot slot(pool);
    if (link && link->looks_dead()) {
      // Closed by the server while idle; nothing was sent on it.
      link.reset();
      slot.drop();
      continue;
    }
    if (!link) {
      try {
        link = co_await open();
      } catch (...) {
        error = std::current_exception();
      }
      if (error) break;
    }
    if (!race->start()) {
      // The deadline answered first: nothing is sent.
      slot.give_back(std::move(link));
      co_return;
    }
    Answer a;
    try {
      a = co_await f(*link);
    } catch (...) {
      error = unexpected_failure(lost, std::current_exception());
    }
    if (error) break;  // the connection closes with `link`
    if (a.status == Answer::Status::rows) {
      slot.give_back(std::move(link));
      rows = std::move(a.rows);
      break;
    }
    const bool may_resend = lost.resendable() && !resent;
    resent = true;
    if (a.status == Answer::Status::server_error) {
      if (drops_connection(a.state)) {
        link.reset();
        slot.drop();
      } else {
        slot.give_back(std::move(link));
      }
      if (may_resend && kind_of(a.state) == Kind::connection) continue;
      error = sqlstate_error(a.state, a.text, lost);
      break;
    }
    link.reset();
    slot.drop();
    if (may_resend) continue;
    error = connection_lost_error(a.text, lost);
    break;
  }
  race->finish(error, std::move(rows));
}

// Runs `f(AsyncLink&) -> awaitable<Answer>` on a pool connection within `deadline`; its rows.
template <class Open, class F>
asio::awaitable<Rows> async_call(std::shared_ptr<AsyncPool> pool, Deadline deadline, Open open,
                                 F f) {
  auto init = [&](auto handler) {
    using H = decltype(handler);
    auto race = std::make_shared<Race<Rows, H>>(std::move(handler), deadline);
    race->arm();
    auto ex = race->executor();
    auto r = race;
    asio::co_spawn(ex, run_on_pool(std::move(race), std::move(pool), std::move(open), std::move(f)),
                   asio::detached);
    r->answer_inline();  // run_on_pool has answered already, or is waiting for the server
  };
  co_return co_await asio::async_initiate<const asio::use_awaitable_t<>&,
                                          void(std::exception_ptr, Rows)>(init,
                                                                          asio::use_awaitable);
}

}  // namespace statepact::detail::pg
