// One hiredis async connection driven by Asio: commands are pipelined, each has a deadline, the
// connection is opened on first use and replaced after a loss or a late reply. All hiredis access
// happens on one strand; each call completes on its caller's executor.
#pragma once

#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/awaitable.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include <statepact/detail/lost_reply.hpp>

#include "reply.hpp"
#include "request_book.hpp"
#include "url.hpp"

struct redisAsyncContext;  // hiredis, private to connection.cpp

namespace statepact::detail {

class RedisConnection : public std::enable_shared_from_this<RedisConnection> {
 public:
  // refuse_eviction: every new connection first reads maxmemory_policy (INFO memory) and refuses
  // to carry any command unless it is noeviction.
  RedisConnection(asio::any_io_executor ex, RedisUrl url, std::chrono::milliseconds command_timeout,
                  std::chrono::milliseconds connect_timeout, std::string client_name,
                  bool refuse_eviction);
  ~RedisConnection();

  // Sends one command. Error replies are returned, not thrown; a lost connection or a missed
  // deadline throws what `lost` says it means (a read is sent once more on a fresh connection).
  // Shared, so a caller that may send the same command again (EVAL after NOSCRIPT) keeps it
  // without a copy; the connection drops its reference once hiredis has the command (a read
  // keeps it, for a resend).
  using Args = std::shared_ptr<const std::vector<std::string>>;
  asio::awaitable<RedisReply> call(Args args, LostReply lost = LostReply::write());
  asio::awaitable<RedisReply> call(std::vector<std::string> args,
                                   LostReply lost = LostReply::write()) {
    return call(std::make_shared<const std::vector<std::string>>(std::move(args)), lost);
  }

  // Commands that must sit right next to a call on the same link, with nothing of other callers
  // between them: `before` is sent just ahead of it and its reply dropped (ASKING, which holds for
  // the next command only); `after` is sent right behind it (WAIT, which counts this link's
  // writes), and the call's reply is then an array of the two replies.
  struct Around {
    Args before;
    Args after;
  };
  asio::awaitable<RedisReply> call(Args args, LostReply lost, Around around);

  // Stops accepting commands; replies already on the way are still delivered.
  void close();

  const asio::strand<asio::any_io_executor>& strand() const { return strand_; }

 private:
  struct Link;
  struct Request;
  struct SetupStep;

  void start(const std::shared_ptr<Request>& req);
  void send(const std::shared_ptr<Request>& req, bool idle);
  void open();
  void queue_setup(const std::shared_ptr<Link>& link, const std::vector<std::string>& args,
                   int step);
  static void on_setup_reply(::redisAsyncContext* ac, void* reply, void* privdata);
  // Fails the requests that waited for a link's setup (nothing of theirs was sent).
  static void fail_waiting(Link& link, const std::exception_ptr& error);
  static void complete(Request& req, std::exception_ptr error, RedisReply reply);
  static std::exception_ptr lost_error(const Request& req, const Link& link);
  static bool resend(const std::shared_ptr<Request>& req);
  static void on_timeout(const std::shared_ptr<Request>& req);
  void watch(const std::shared_ptr<Request>& req);
  void arm_deadline();
  void on_deadline();

  // hiredis callbacks and event hooks.
  static void on_reply(::redisAsyncContext* ac, void* reply, void* privdata);
  static void on_after_reply(::redisAsyncContext* ac, void* reply, void* privdata);
  static void on_connect(const ::redisAsyncContext* ac, int status);
  static void on_disconnect(const ::redisAsyncContext* ac, int status);
  static void ev_add_read(void* data);
  static void ev_del_read(void* data);
  static void ev_add_write(void* data);
  static void ev_del_write(void* data);
  static void ev_cleanup(void* data);
  static void arm_read(const std::shared_ptr<Link>& link);
  static void arm_write(const std::shared_ptr<Link>& link);
  static void flush(const std::shared_ptr<Link>& link);
  static void write_now(const std::shared_ptr<Link>& link);

  asio::strand<asio::any_io_executor> strand_;
  RedisUrl url_;
  std::chrono::milliseconds command_timeout_, connect_timeout_;
  std::string client_name_;  // empty: no CLIENT SETNAME
  bool refuse_eviction_;
  // Only touched on the strand.
  std::shared_ptr<Link> link_;
  // Requests sent and not yet answered, oldest first (a resent read goes to the back).
  PendingRequests<std::shared_ptr<Request>> pending_;
  asio::steady_timer deadline_timer_;
  bool deadline_armed_ = false;
  bool closing_ = false;
  std::string open_error_;
};

}  // namespace statepact::detail
