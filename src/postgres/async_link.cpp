#include "async_link.hpp"

#include <poll.h>

#include <system_error>

#include <asio/posix/stream_descriptor.hpp>
#include <asio/redirect_error.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>

#include <fmt/format.h>
#include <libpq-fe.h>

#include <statepact/errors.hpp>

#include "conninfo.hpp"
#include "sqlstate.hpp"
#include "statements.hpp"

namespace statepact::detail::pg {

namespace {

struct ClearResult {
  void operator()(PGresult* r) const { PQclear(r); }
};
using Result = std::unique_ptr<PGresult, ClearResult>;

std::string trimmed(const char* text) {
  std::string s = text ? text : "";
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// A setup step's failure, as Link::connect maps libpqxx's.
[[noreturn]] void setup_failed(const Settings& s, PGconn* conn, const PGresult* r,
                               const std::string& step) {
  if (PQstatus(conn) == CONNECTION_BAD) connect_failed(s, trimmed(PQerrorMessage(conn)));
  const char* state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : nullptr;
  const std::string text = trimmed(r ? PQresultErrorMessage(r) : PQerrorMessage(conn));
  std::rethrow_exception(sqlstate_error(state ? state : "", fmt::format("{}: {}", step, text),
                                        LostReply::in_transaction()));
}

}  // namespace

std::unique_ptr<AsyncLink> AsyncLink::open(const Settings& s) {
  std::unique_ptr<AsyncLink> link(new AsyncLink(PQconnectdb(s.conninfo.c_str())));
  PGconn* conn = link->conn_;
  if (!conn) throw BackendUnavailableError("cannot connect to PostgreSQL: out of memory");
  if (PQstatus(conn) != CONNECTION_OK) connect_failed(s, trimmed(PQerrorMessage(conn)));
  // A library does not write to the process's stderr (client_min_messages leaves warnings only).
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  const auto p = setup_params(s);
  const char* values[] = {p[0].c_str(), p[1].c_str(), p[2].c_str(), p[3].c_str(), p[4].c_str()};
  Result setup(PQexecParams(conn, setup_sql, 5, nullptr, values, nullptr, nullptr, 0));
  if (PQresultStatus(setup.get()) != PGRES_TUPLES_OK)
    setup_failed(s, conn, setup.get(), "setting up the connection");
  for (const auto& st : stmt::all) {
    Result r(PQprepare(conn, st.name, st.sql, 0, nullptr));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK)
      setup_failed(s, conn, r.get(), "preparing statements");
  }
  if (PQsetnonblocking(conn, 1) != 0) setup_failed(s, conn, nullptr, "setting up the connection");
  return link;
}

AsyncLink::~AsyncLink() {
  watch_.forget();
  if (conn_) PQfinish(conn_);
}

bool AsyncLink::looks_dead() const {
  if (PQstatus(conn_) != CONNECTION_OK) return true;
  pollfd p{PQsocket(conn_), POLLIN, 0};
  if (p.fd < 0) return true;
  return ::poll(&p, 1, 0) != 0;
}

asio::awaitable<Answer> AsyncLink::exec(const char* statement, Params params) {
  Answer answer;
  auto broken = [&] {
    watch_.forget();
    answer.status = Answer::Status::broken;
    answer.text = trimmed(PQerrorMessage(conn_));
    if (answer.text.empty()) answer.text = "the connection broke";
    return answer;
  };
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const auto& p : params) values.push_back(p ? p->c_str() : nullptr);
  if (!PQsendQueryPrepared(conn_, statement, static_cast<int>(values.size()), values.data(),
                           nullptr, nullptr, 0))
    co_return broken();
  const auto ex = co_await asio::this_coro::executor;
  auto& sd = watch_.on(ex, PQsocket(conn_));
  std::error_code ec;
  for (;;) {
    const int flushed = PQflush(conn_);
    if (flushed < 0) co_return broken();
    if (flushed == 0) break;
    co_await sd.async_wait(asio::posix::stream_descriptor::wait_write,
                           asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return broken();
  }
  bool first = true;
  for (;;) {
    while (PQisBusy(conn_)) {
      co_await sd.async_wait(asio::posix::stream_descriptor::wait_read,
                             asio::redirect_error(asio::use_awaitable, ec));
      if (ec || !PQconsumeInput(conn_)) co_return broken();
    }
    Result r(PQgetResult(conn_));
    if (!r) break;
    const ExecStatusType status = PQresultStatus(r.get());
    if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
      if (!first) continue;
      first = false;
      const int rows = PQntuples(r.get()), cols = PQnfields(r.get());
      answer.rows.reserve(static_cast<std::size_t>(rows));
      for (int i = 0; i < rows; ++i) {
        Row& row = answer.rows.emplace_back();
        row.reserve(static_cast<std::size_t>(cols));
        for (int j = 0; j < cols; ++j)
          row.push_back(
              PQgetisnull(r.get(), i, j)
                  ? Field()
                  : Field(std::string(PQgetvalue(r.get(), i, j),
                                      static_cast<std::size_t>(PQgetlength(r.get(), i, j)))));
      }
    } else if (PQstatus(conn_) == CONNECTION_BAD) {
      co_return broken();
    } else if (answer.status == Answer::Status::rows) {
      // The first error is the statement's; the results after it (none, normally) are drained.
      const char* state = PQresultErrorField(r.get(), PG_DIAG_SQLSTATE);
      answer.status = Answer::Status::server_error;
      answer.state = state ? state : "";
      answer.text = trimmed(PQresultErrorMessage(r.get()));
      if (answer.text.empty()) answer.text = PQresStatus(status);
    }
  }
  if (PQstatus(conn_) == CONNECTION_BAD) co_return broken();
  co_return answer;
}

}  // namespace statepact::detail::pg
