// A pool connection driven without blocking: a statement goes out with libpq's non-blocking API
// and its answer is awaited on the socket by Asio, on the calling coroutine's executor, so a call
// needs no thread of its own and costs no thread switch. The socket stays registered with that
// executor's io_context between statements (socket_watch.hpp). Opening one blocks (connect,
// settings, prepared statements) and runs on a connection thread.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <asio/awaitable.hpp>

#include "connection.hpp"
#include "row.hpp"
#include "socket_watch.hpp"

struct pg_conn;

namespace statepact::detail::pg {

// A statement's parameter as text; none is SQL NULL.
using Param = std::optional<std::string>;
using Params = std::vector<Param>;

// How one statement ended. The caller maps it (async_call.hpp), as autocommit() maps libpqxx's
// exceptions.
// Not an aggregate: g++ 12 destroys an aggregate temporary twice inside `co_await`.
struct Answer {
  Answer() = default;
  enum class Status { rows, server_error, broken };
  Status status = Status::rows;
  Rows rows;
  std::string state;  // server_error: the SQLSTATE (may be empty)
  std::string text;   // server_error, broken: what the server or libpq said
};

class AsyncLink {
 public:
  // Connects and sets the connection up as Link does (the schema is migrated already). Blocks.
  // Throws statepact's errors; nothing has been sent on the pool's behalf then.
  static std::unique_ptr<AsyncLink> open(const Settings& s);
  ~AsyncLink();
  AsyncLink(const AsyncLink&) = delete;
  AsyncLink& operator=(const AsyncLink&) = delete;

  // An idle connection has nothing to read unless the server is closing it: such a connection is
  // replaced before a statement is sent on it.
  bool looks_dead() const;

  // Runs one prepared statement. Never throws for what the server or the network did: that is in
  // the answer. Not cancellable: it ends when the server answers or the connection breaks
  // (tcp_user_timeout bounds a silent network).
  asio::awaitable<Answer> exec(const char* statement, Params params);

 private:
  explicit AsyncLink(pg_conn* conn) : conn_(conn) {}
  pg_conn* conn_;
  SocketWatch watch_;
};

inline Param param(std::string s) {
  return Param(std::move(s));
}
// Without it a string literal would pick param(bool).
inline Param param(const char* s) {
  return Param(std::string(s));
}
inline Param param(long long v) {
  return Param(std::to_string(v));
}
inline Param param(bool b) {
  return Param(b ? "true" : "false");
}
inline Param param(std::optional<std::string> s) {
  return s;
}

}  // namespace statepact::detail::pg
