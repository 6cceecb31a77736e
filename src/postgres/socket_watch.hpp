// A pool connection's socket, registered with the reactor of the io_context that last waited on
// it and kept registered between statements: registering for each statement cost three system
// calls out of eleven per call (add, non-blocking mode, remove). A call from another io_context
// moves the registration there. When an io_context shuts down, it first drops the registrations
// it holds, so a connection that outlives its io_context (idle in a backend destroyed later)
// never touches a reactor that is gone. The socket is released, never closed: libpq owns it.
#pragma once

#include <memory>
#include <mutex>
#include <vector>

#include <asio/any_io_executor.hpp>
#include <asio/execution/context.hpp>
#include <asio/execution_context.hpp>
#include <asio/posix/stream_descriptor.hpp>
#include <asio/query.hpp>

namespace statepact::detail::pg {

// One socket's registration, shared by its SocketWatch and the io_context's SocketRegistry.
struct SocketRegistration {
  std::mutex mu;
  asio::execution_context* context = nullptr;  // guarded by mu
  std::unique_ptr<asio::posix::stream_descriptor> sd;

  // Takes the socket out of the reactor (never closes it). The caller holds mu.
  void drop() {
    if (sd) {
      sd->release();
      sd.reset();
    }
    context = nullptr;
  }
};

// A service in each io_context that watches a pool socket. Created after the context's reactor,
// it is shut down before it (Asio shuts services down newest first).
class SocketRegistry : public asio::execution_context::service {
 public:
  using key_type = SocketRegistry;
  explicit SocketRegistry(asio::execution_context& ctx) : service(ctx) {}

  void add(const std::shared_ptr<SocketRegistration>& r) {
    std::lock_guard guard(mu_);
    std::erase_if(registrations_, [](const auto& w) { return w.expired(); });
    registrations_.push_back(r);
  }

 private:
  void shutdown() override {
    std::vector<std::weak_ptr<SocketRegistration>> all;
    {
      std::lock_guard guard(mu_);
      all.swap(registrations_);
    }
    for (const auto& w : all)
      if (auto r = w.lock()) {
        std::lock_guard guard(r->mu);
        if (r->context == &context()) r->drop();
      }
  }

  std::mutex mu_;
  std::vector<std::weak_ptr<SocketRegistration>> registrations_;
};

class SocketWatch {
 public:
  SocketWatch() : registration_(std::make_shared<SocketRegistration>()) {}
  ~SocketWatch() { forget(); }
  SocketWatch(const SocketWatch&) = delete;
  SocketWatch& operator=(const SocketWatch&) = delete;

  // The socket `fd` as registered with the io_context of `ex`, registering it there if it is
  // not. Only one call uses a connection at a time.
  asio::posix::stream_descriptor& on(const asio::any_io_executor& ex, int fd) {
    auto& ctx = asio::query(ex, asio::execution::context);
    std::lock_guard guard(registration_->mu);
    if (registration_->context != &ctx) {  // set exactly while registered
      registration_->drop();
      registration_->sd = std::make_unique<asio::posix::stream_descriptor>(ex, fd);
      registration_->context = &ctx;
      // After the descriptor: the reactor exists, so the registry is shut down before it.
      asio::use_service<SocketRegistry>(ctx).add(registration_);
    }
    return *registration_->sd;
  }

  // As soon as the connection broke (libpq has closed the socket then) and before it is closed: a
  // registration left behind could later remove another socket that reuses the number.
  void forget() {
    std::lock_guard guard(registration_->mu);
    registration_->drop();
  }

 private:
  std::shared_ptr<SocketRegistration> registration_;
};

}  // namespace statepact::detail::pg
