#include "connection.hpp"

#include <csignal>
#include <ctime>
#include <functional>
#include <optional>

#include <pthread.h>

#include <asio/async_result.hpp>
#include <asio/dispatch.hpp>
#include <asio/execution/outstanding_work.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/post.hpp>
#include <asio/prefer.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>

#include <statepact/errors.hpp>

#include "link_state.hpp"
#include "server_errors.hpp"

namespace statepact::detail {

// One hiredis context and the descriptor Asio watches for it. While hiredis owns the context, the
// link keeps its connection alive (`owner`); hiredis's cleanup hook ends that.
struct RedisConnection::Link : std::enable_shared_from_this<Link> {
  explicit Link(const asio::strand<asio::any_io_executor>& s) : sd(s), connect_timer(s) {}

  std::shared_ptr<RedisConnection> owner;
  redisAsyncContext* ac = nullptr;
  asio::posix::stream_descriptor sd;
  asio::steady_timer connect_timer;
  // Its life and setup (link_state.hpp); the decisions are there.
  LinkState state;
  // The event adapter's bits: what hiredis asked to watch, and what is armed or under way.
  struct {
    bool reading = false, writing = false, read_armed = false, write_armed = false;
    bool flush_posted = false;  // a flush of hiredis's output buffer is queued on the strand
    bool in_write = false;  // inside redisAsyncHandleWrite: a partial write waits for the reactor
    bool in_start = false;  // inside redisAsyncCommandArgv from send(), which writes after it
  } io;
  std::string error;
  // Requests held until the setup is done, so a failed step never lets one run on the wrong
  // database or against a server that may evict.
  std::deque<std::shared_ptr<Request>> waiting;
};

// A request's bookkeeping (stage, deadline, resend rules) is its RequestBook; the rest is I/O.
struct RedisConnection::Request : RequestBook {
  using RequestBook::RequestBook;
  std::shared_ptr<RedisConnection> owner;
  std::function<void(std::exception_ptr, RedisReply)> done;
  std::shared_ptr<Link> link;
  Args args;
  Around around;
  bool after_due = false;           // `around.after` was queued: the call ends with its reply
  std::optional<RedisReply> first;  // the call's own reply, while that one is due
};

struct RedisConnection::SetupStep {
  std::shared_ptr<Link> link;
  int step;
};

namespace {

RedisReply convert(const redisReply* r) {
  RedisReply out;
  switch (r->type) {
    case REDIS_REPLY_STRING:
      out.type = RedisReply::Type::string;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_STATUS:
      out.type = RedisReply::Type::status;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_ERROR:
      out.type = RedisReply::Type::error;
      out.str.assign(r->str, r->len);
      break;
    case REDIS_REPLY_INTEGER:
      out.type = RedisReply::Type::integer;
      out.integer = r->integer;
      break;
    case REDIS_REPLY_ARRAY:
      out.type = RedisReply::Type::array;
      out.elements.reserve(r->elements);
      for (std::size_t i = 0; i < r->elements; ++i) out.elements.push_back(convert(r->element[i]));
      break;
    default:
      out.type = RedisReply::Type::nil;
  }
  return out;
}

// hiredis writes with write(2): to a socket the server has closed, that raises SIGPIPE, which kills
// a process that did not ignore it. A library must not: SIGPIPE is blocked on this thread for the
// write, and one the write raised is taken before the mask is restored (libpq does the same).
class NoSigpipe {
 public:
  NoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  // `failed`: the write may have raised one (the connection died in it).
  void done(bool failed) {
    if (failed && !sigismember(&old_, SIGPIPE)) {
      const timespec zero{0, 0};
      sigtimedwait(&pipe_, nullptr, &zero);
    }
  }
  ~NoSigpipe() { pthread_sigmask(SIG_SETMASK, &old_, nullptr); }
  NoSigpipe(const NoSigpipe&) = delete;
  NoSigpipe& operator=(const NoSigpipe&) = delete;

 private:
  sigset_t pipe_, old_;
};

std::exception_ptr unavailable(const std::string& what) {
  return std::make_exception_ptr(BackendUnavailableError("redis: " + what));
}

}  // namespace

RedisConnection::RedisConnection(asio::any_io_executor ex, RedisUrl url,
                                 std::chrono::milliseconds command_timeout,
                                 std::chrono::milliseconds connect_timeout, std::string client_name,
                                 bool refuse_eviction)
    : strand_(asio::make_strand(std::move(ex))),
      url_(std::move(url)),
      command_timeout_(command_timeout),
      connect_timeout_(connect_timeout),
      client_name_(std::move(client_name)),
      refuse_eviction_(refuse_eviction),
      deadline_timer_(strand_) {}

RedisConnection::~RedisConnection() = default;

asio::awaitable<RedisReply> RedisConnection::call(Args args, LostReply lost) {
  return call(std::move(args), lost, Around{});
}

asio::awaitable<RedisReply> RedisConnection::call(Args args, LostReply lost, Around around) {
  auto self = shared_from_this();
  auto initiation = [self, lost, around = std::move(around)](auto handler, Args a) {
    using Handler = decltype(handler);
    auto h = std::make_shared<Handler>(std::move(handler));
    // The caller's executor, tracked so its io_context keeps running until we complete.
    asio::any_io_executor target = asio::prefer(asio::get_associated_executor(*h, self->strand_),
                                                asio::execution::outstanding_work.tracked);
    auto req = std::make_shared<Request>(lost);
    req->owner = self;
    req->args = std::move(a);
    req->around = around;
    req->done = [h, target](std::exception_ptr e, RedisReply r) {
      asio::post(target, [h, e, r = std::move(r)]() mutable { (*h)(e, std::move(r)); });
    };
    // Runs start() at once when the strand is free and we are on its thread: one scheduler turn
    // less per command.
    asio::dispatch(self->strand_, [self, req] { self->start(req); });
  };
  return asio::async_initiate<const asio::use_awaitable_t<>&, void(std::exception_ptr, RedisReply)>(
      initiation, asio::use_awaitable, std::move(args));
}

void RedisConnection::close() {
  asio::post(strand_, [self = shared_from_this()] {
    self->closing_ = true;
    // An idle deadline timer would keep the caller's io_context running after the backend is
    // gone; with replies still due it stays, and complete() cancels it after the last one.
    if (self->pending_.drop_finished()) self->deadline_timer_.cancel();
    if (!self->link_ || !self->link_->state.alive()) return;
    // Graceful when connected: hiredis frees the context once the pending replies arrived.
    if (self->link_->state.connected())
      redisAsyncDisconnect(self->link_->ac);
    else
      redisAsyncFree(self->link_->ac);
  });
}

void RedisConnection::start(const std::shared_ptr<Request>& req) {
  if (closing_) return complete(*req, unavailable("the backend is shutting down"), {});
  if (!link_) open();
  if (!link_) return complete(*req, unavailable("cannot connect: " + open_error_), {});
  const bool idle = pending_.drop_finished();
  req->start(std::chrono::steady_clock::now(), command_timeout_);
  if (!link_->state.ready()) {
    // Sent once the link's setup succeeded (or failed with it); its deadline runs meanwhile.
    req->link = link_;
    req->wait_for_setup();
    link_->waiting.push_back(req);
    watch(req);
    return;
  }
  send(req, idle);
}

namespace {

// One command into hiredis's output buffer, as argv.
int queue_command(redisAsyncContext* ac, redisCallbackFn* fn, void* privdata,
                  const std::vector<std::string>& args) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  argv.reserve(args.size());
  lens.reserve(args.size());
  for (const auto& a : args) {
    argv.push_back(a.data());
    lens.push_back(a.size());
  }
  return redisAsyncCommandArgv(ac, fn, privdata, static_cast<int>(argv.size()), argv.data(),
                               lens.data());
}

}  // namespace

void RedisConnection::send(const std::shared_ptr<Request>& req, bool idle) {
  auto link = link_;
  auto* holder = new std::shared_ptr<Request>(req);
  link->io.in_start = true;
  // All of a request's commands are queued in this one strand turn, so no other caller's command
  // falls between them.
  int rc = REDIS_OK;
  if (req->around.before) rc = queue_command(link->ac, nullptr, nullptr, *req->around.before);
  if (rc == REDIS_OK) rc = queue_command(link->ac, &RedisConnection::on_reply, holder, *req->args);
  if (rc != REDIS_OK) {
    link->io.in_start = false;
    delete holder;
    return complete(*req, unavailable("the connection is closing"), {});
  }
  if (req->around.after) {
    auto* after_holder = new std::shared_ptr<Request>(req);
    if (queue_command(link->ac, &RedisConnection::on_after_reply, after_holder,
                      *req->around.after) != REDIS_OK) {
      delete after_holder;
      // The call itself is queued and may still run: its outcome is unknown.
      link->io.in_start = false;
      req->link = link;
      return complete(*req,
                      lost_reply_error("redis", req->lost(), Loss::disconnected,
                                       "the connection closed under the call"),
                      {});
    }
    req->after_due = true;
  }
  link->io.in_start = false;
  // It waited for this link's setup: already watched.
  const bool watched = req->link == link && req->stage() == RequestBook::Stage::waiting;
  req->link = link;
  req->written();
  // hiredis copied the command; only a read keeps it, for a resend.
  if (!req->keeps_command()) {
    req->args.reset();
    req->around = Around{};
  }
  if (!watched) watch(req);
  if (!link->state.alive() || !link->state.connected() || !link->io.writing || link->io.write_armed)
    return;
  // An idle connection writes now (the lowest latency); a busy one lets the commands of this turn
  // share one write.
  if (idle)
    write_now(link);
  else
    flush(link);
}

void RedisConnection::watch(const std::shared_ptr<Request>& req) {
  pending_.push(req);
  if (!deadline_armed_) arm_deadline();
}

void RedisConnection::arm_deadline() {
  const auto first = pending_.next_deadline();
  if (!first) return;
  deadline_armed_ = true;
  deadline_timer_.expires_at(*first);
  deadline_timer_.async_wait([self = shared_from_this()](std::error_code ec) {
    self->deadline_armed_ = false;
    if (!ec) self->on_deadline();
  });
}

void RedisConnection::on_deadline() {
  // A copy: on_timeout drops the connection, which completes the others.
  for (const auto& r : pending_.expired(std::chrono::steady_clock::now())) on_timeout(r);
  arm_deadline();
}

void RedisConnection::open() {
  redisAsyncContext* ac = url_.unix_path.empty() ? redisAsyncConnect(url_.host.c_str(), url_.port)
                                                 : redisAsyncConnectUnix(url_.unix_path.c_str());
  if (!ac) {
    open_error_ = "out of memory";
    return;
  }
  if (ac->err) {
    open_error_ = ac->errstr;
    redisAsyncFree(ac);
    return;
  }
  auto link = std::make_shared<Link>(strand_);
  std::error_code ec;
  link->sd.assign(ac->c.fd, ec);
  if (ec) {
    open_error_ = ec.message();
    redisAsyncFree(ac);
    return;
  }
  link->ac = ac;
  link->owner = shared_from_this();
  ac->data = link.get();
  ac->ev.data = link.get();
  ac->ev.addRead = &RedisConnection::ev_add_read;
  ac->ev.delRead = &RedisConnection::ev_del_read;
  ac->ev.addWrite = &RedisConnection::ev_add_write;
  ac->ev.delWrite = &RedisConnection::ev_del_write;
  ac->ev.cleanup = &RedisConnection::ev_cleanup;
  redisAsyncSetConnectCallback(ac, &RedisConnection::on_connect);
  redisAsyncSetDisconnectCallback(ac, &RedisConnection::on_disconnect);
  link_ = link;
  // hiredis learns that a non-blocking connect finished from writability: watch for it now, or
  // an idle connection never completes its connect.
  ev_add_write(link.get());
  link->connect_timer.expires_after(connect_timeout_);
  link->connect_timer.async_wait([link](std::error_code e) {
    if (e || !link->state.alive() || link->state.connected()) return;
    link->error = "connect timed out";
    redisAsyncFree(link->ac);
  });
  // Queued before any user command; user commands wait until all of them answered.
  if (!url_.password.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!url_.user.empty()) auth.push_back(url_.user);
    auth.push_back(url_.password);
    queue_setup(link, auth, setup_auth);
  }
  if (url_.db != 0) queue_setup(link, {"SELECT", std::to_string(url_.db)}, setup_select);
  if (!client_name_.empty()) queue_setup(link, {"CLIENT", "SETNAME", client_name_}, setup_setname);
  // INFO, not CONFIG GET: it works where CONFIG is renamed or refused.
  if (refuse_eviction_) queue_setup(link, {"INFO", "memory"}, setup_eviction);
}

void RedisConnection::queue_setup(const std::shared_ptr<Link>& link,
                                  const std::vector<std::string>& args, int step) {
  std::vector<const char*> argv;
  std::vector<std::size_t> lens;
  for (const auto& a : args) argv.push_back(a.data()), lens.push_back(a.size());
  auto* holder = new SetupStep{link, step};
  if (redisAsyncCommandArgv(link->ac, &RedisConnection::on_setup_reply, holder,
                            static_cast<int>(argv.size()), argv.data(), lens.data()) != REDIS_OK) {
    delete holder;
    link->state.setup_not_queued(unavailable("the connection is closing"));
    return;
  }
  link->state.setup_queued();
}

void RedisConnection::on_setup_reply(redisAsyncContext* ac, void* reply, void* privdata) {
  std::unique_ptr<SetupStep> step(static_cast<SetupStep*>(privdata));
  auto link = step->link;
  if (!reply || !link->state.alive())
    return;  // the link is going: its cleanup fails the waiting ones
  const RedisReply r = convert(static_cast<redisReply*>(reply));
  auto owner = link->owner;
  std::exception_ptr refused;
  if (r.is_error())
    refused = setup_failure(step->step, r.str, owner->url_);
  else if (step->step == setup_eviction)
    refused = eviction_verdict(r.str, owner->url_);
  if (!link->state.setup_answered(std::move(refused))) return;
  if (link->state.setup_error()) {
    // Nothing of the waiting requests was sent. hiredis frees the context after this callback.
    fail_waiting(*link, link->state.setup_error());
    link->error = "connection setup failed";
    redisAsyncFree(ac);
    return;
  }
  // Sent from the strand, not from inside hiredis's read callback.
  asio::post(owner->strand_, [owner, link] {
    auto waiting = std::move(link->waiting);
    link->waiting.clear();
    for (auto& req : waiting) {
      if (req->finished()) continue;
      if (owner->link_ != link) {  // the link died meanwhile: start over
        req->link.reset();
        owner->start(req);
        continue;
      }
      owner->send(req, false);
    }
  });
}

void RedisConnection::fail_waiting(Link& link, const std::exception_ptr& error) {
  auto waiting = std::move(link.waiting);
  link.waiting.clear();
  for (auto& req : waiting) complete(*req, error, {});
}

void RedisConnection::complete(Request& req, std::exception_ptr error, RedisReply reply) {
  if (!req.finish()) return;
  if (req.owner && req.owner->pending_.drop_finished() && req.owner->closing_)
    req.owner->deadline_timer_.cancel();
  auto done = std::move(req.done);
  done(error, std::move(reply));
}

std::exception_ptr RedisConnection::lost_error(const Request& req, const Link& link) {
  const std::string why = link.error.empty() ? "connection closed" : link.error;
  if (!link.state.connected())
    return lost_reply_error("redis", req.lost(), Loss::not_sent, "could not connect: " + why);
  const Loss loss = req.loss_on_disconnect(link.state.connected());
  return lost_reply_error("redis", req.lost(), loss,
                          loss == Loss::not_sent
                              ? "connection lost before the command was sent: " + why
                              : "connection lost (" + why + ")");
}

bool RedisConnection::resend(const std::shared_ptr<Request>& req) {
  auto owner = req->owner;
  if (!req->resend_after_loss(req->link->state.connected(), owner->closing_)) return false;
  // Posted: hiredis is still tearing the old context down, and link_ is reset when it is done.
  asio::post(owner->strand_, [owner, req] {
    if (!req->finished()) owner->start(req);
  });
  return true;
}

void RedisConnection::on_timeout(const std::shared_ptr<Request>& req) {
  if (req->finished()) return;
  auto link = req->link;
  const auto ms = req->owner->command_timeout_.count();
  complete(*req,
           lost_reply_error("redis", req->lost(), req->loss_on_timeout(link->state.connected()),
                            fmt::format("no reply within {} ms", ms)),
           {});
  // The late reply would sit in front of every later one: drop the connection; the next command
  // opens a fresh one, so replies are never matched to the wrong request.
  if (link->state.alive()) {
    link->error = "a reply was late; connection dropped";
    redisAsyncFree(link->ac);
  }
}

void RedisConnection::on_reply(redisAsyncContext* ac, void* reply, void* privdata) {
  std::unique_ptr<std::shared_ptr<Request>> holder(
      static_cast<std::shared_ptr<Request>*>(privdata));
  Request& req = **holder;
  if (reply) {
    RedisReply r = convert(static_cast<redisReply*>(reply));
    // A command follows it: the call completes with that one's reply.
    if (req.after_due) {
      req.first = std::move(r);
      return;
    }
    return complete(req, nullptr, std::move(r));
  }
  // hiredis runs the pending callbacks before its disconnect callback: take the reason here.
  if (req.link->error.empty() && ac->err) req.link->error = ac->errstr;
  if (resend(*holder)) return;
  complete(req, lost_error(req, *req.link), {});
}

void RedisConnection::on_after_reply(redisAsyncContext* ac, void* reply, void* privdata) {
  std::unique_ptr<std::shared_ptr<Request>> holder(
      static_cast<std::shared_ptr<Request>*>(privdata));
  Request& req = **holder;
  if (reply && req.first) {
    RedisReply both;
    both.type = RedisReply::Type::array;
    both.elements.push_back(std::move(*req.first));
    both.elements.push_back(convert(static_cast<redisReply*>(reply)));
    req.first.reset();
    return complete(req, nullptr, std::move(both));
  }
  if (req.finished()) return;
  if (req.link->error.empty() && ac->err) req.link->error = ac->errstr;
  complete(req, lost_error(req, *req.link), {});
}

void RedisConnection::on_connect(const redisAsyncContext* ac, int status) {
  auto* link = static_cast<Link*>(ac->data);
  if (status == REDIS_OK) {
    link->state.connect_completed();
    link->connect_timer.cancel();
  } else {
    link->error = ac->errstr;
  }
}

void RedisConnection::on_disconnect(const redisAsyncContext* ac, int status) {
  auto* link = static_cast<Link*>(ac->data);
  if (status != REDIS_OK && link->error.empty()) link->error = ac->errstr;
}

void RedisConnection::ev_add_read(void* data) {
  auto* link = static_cast<Link*>(data);
  link->io.reading = true;
  arm_read(link->shared_from_this());
}

void RedisConnection::ev_del_read(void* data) {
  static_cast<Link*>(data)->io.reading = false;
}

void RedisConnection::ev_add_write(void* data) {
  auto* link = static_cast<Link*>(data);
  link->io.writing = true;
  // A connected socket is almost always writable: write at once (after the commands queued in
  // this turn, so they share one write) instead of asking the reactor. A partial write, and the
  // connect itself, wait for writability.
  if (!link->state.connected() || link->io.in_write)
    arm_write(link->shared_from_this());
  else if (!link->io.in_start)  // start() writes once hiredis has returned
    flush(link->shared_from_this());
}

void RedisConnection::ev_del_write(void* data) {
  static_cast<Link*>(data)->io.writing = false;
}

void RedisConnection::ev_cleanup(void* data) {
  auto link = static_cast<Link*>(data)->shared_from_this();
  link->state.closed();
  link->ac = nullptr;
  link->io.reading = link->io.writing = false;
  link->connect_timer.cancel();
  if (!link->waiting.empty()) {
    const std::string why = link->error.empty() ? "connection closed" : link->error;
    auto owner_ = link->owner;
    // Nothing of the waiting requests was sent: after a loss during setup (not a refusal), each
    // starts over once on a fresh connection, whatever its kind.
    if (owner_ && link->state.restart_waiting(owner_->closing_)) {
      auto waiting = std::move(link->waiting);
      link->waiting.clear();
      for (auto& req : waiting) {
        if (req->finished()) continue;
        if (!req->restart_after_setup_loss()) {
          complete(*req, unavailable("connection lost during its setup: " + why), {});
          continue;
        }
        asio::post(owner_->strand_, [owner_, req] {
          if (!req->finished()) owner_->start(req);
        });
      }
    } else {
      fail_waiting(*link, link->state.setup_error()
                              ? link->state.setup_error()
                              : unavailable("connection lost during its setup: " + why));
    }
  }
  // hiredis closes the descriptor itself.
  link->sd.release();
  auto owner = link->owner;
  if (owner && owner->link_ == link) owner->link_.reset();
  // Dropping the owner may destroy the connection: not while hiredis is still on the stack.
  asio::post(owner->strand_, [link] { link->owner.reset(); });
}

void RedisConnection::arm_read(const std::shared_ptr<Link>& link) {
  if (link->io.read_armed || !link->state.alive()) return;
  link->io.read_armed = true;
  link->sd.async_wait(asio::posix::descriptor_base::wait_read, [link](std::error_code ec) {
    link->io.read_armed = false;
    if (ec || !link->state.alive() || !link->io.reading) return;
    redisAsyncHandleRead(link->ac);
    if (link->state.alive() && link->io.reading) arm_read(link);
  });
}

void RedisConnection::arm_write(const std::shared_ptr<Link>& link) {
  if (link->io.write_armed || !link->state.alive()) return;
  link->io.write_armed = true;
  link->sd.async_wait(asio::posix::descriptor_base::wait_write, [link](std::error_code ec) {
    link->io.write_armed = false;
    if (ec || !link->state.alive() || !link->io.writing) return;
    write_now(link);
  });
}

void RedisConnection::flush(const std::shared_ptr<Link>& link) {
  if (link->io.flush_posted || link->io.write_armed || !link->state.alive()) return;
  link->io.flush_posted = true;
  asio::post(link->sd.get_executor(), [link] {
    link->io.flush_posted = false;
    if (!link->state.alive() || !link->io.writing || link->io.write_armed) return;
    write_now(link);
  });
}

void RedisConnection::write_now(const std::shared_ptr<Link>& link) {
  link->io.in_write = true;
  {
    NoSigpipe guard;
    redisAsyncHandleWrite(link->ac);
    guard.done(!link->state.alive() || link->ac->err != 0);
  }
  link->io.in_write = false;
  if (link->state.alive() && link->io.writing) arm_write(link);
}

}  // namespace statepact::detail
