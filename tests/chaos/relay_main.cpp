// statepact_chaos_relay: a TCP relay between chaos clients and the server, so the harness can add
// network faults the kernel's loopback never shows: latency, dropped connections, and a silent
// partition in which the relay stops forwarding in one or both directions while every connection
// stays open (nothing is lost: like TCP over a cut cable, bytes wait until the partition heals or a
// side gives up).
//
//   statepact_chaos_relay --listen PORT --to PORT --control FILE
//
// Both ends are 127.0.0.1: the relay never listens on or connects to anything else. The control
// file (written by scripts/chaos.sh, read every 20 ms) holds one line:
//
//   MODE LATENCY_MS DROP_GENERATION
//
// MODE is normal, partition-up (client to server stopped), partition-down (server to client
// stopped) or partition-both; each chunk is delayed by LATENCY_MS in both directions; whenever
// DROP_GENERATION grows, every open connection is reset. The relay runs until SIGTERM or SIGINT.
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <system_error>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/redirect_error.hpp>
#include <asio/signal_set.hpp>
#include <asio/steady_timer.hpp>
#include <asio/this_coro.hpp>
#include <asio/use_awaitable.hpp>
#include <asio/write.hpp>

namespace {

using asio::ip::tcp;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

struct Control {
  bool up_stopped = false;    // client -> server
  bool down_stopped = false;  // server -> client
  milliseconds latency{0};
  long long drop_generation = 0;
};

// Parses the control line; a malformed line keeps the previous state (the script writes whole
// lines with a rename, so a partial line is never seen).
bool parse_control(const std::string& line, Control& out) {
  std::istringstream in(line);
  std::string mode;
  long long latency = -1, generation = -1;
  if (!(in >> mode >> latency >> generation) || latency < 0 || latency > 60'000 || generation < 0)
    return false;
  Control c;
  if (mode == "partition-up" || mode == "partition-both") c.up_stopped = true;
  if (mode == "partition-down" || mode == "partition-both") c.down_stopped = true;
  if (mode != "normal" && !c.up_stopped && !c.down_stopped) return false;
  c.latency = milliseconds(latency);
  c.drop_generation = generation;
  out = c;
  return true;
}

class Relay;

// One client connection and its upstream connection.
struct Link : std::enable_shared_from_this<Link> {
  Link(tcp::socket c, tcp::socket s) : client(std::move(c)), server(std::move(s)) {}
  void close() {
    std::error_code ignored;
    // A reset, not a FIN: the connection is dropped as a broken network would drop it.
    client.set_option(asio::socket_base::linger(true, 0), ignored);
    server.set_option(asio::socket_base::linger(true, 0), ignored);
    client.close(ignored);
    server.close(ignored);
  }
  tcp::socket client;
  tcp::socket server;
};

class Relay {
 public:
  Relay(asio::io_context& io, unsigned short listen, unsigned short to, std::string control)
      : io_(io),
        acceptor_(io, tcp::endpoint(asio::ip::address_v4::loopback(), listen)),
        upstream_(asio::ip::address_v4::loopback(), to),
        control_path_(std::move(control)) {}

  asio::awaitable<void> accept_loop() {
    for (;;) {
      tcp::socket client = co_await acceptor_.async_accept(asio::use_awaitable);
      asio::co_spawn(io_, serve(std::move(client)), asio::detached);
    }
  }

  asio::awaitable<void> control_loop() {
    asio::steady_timer timer(io_);
    for (;;) {
      std::ifstream in(control_path_);
      std::string line;
      Control next = control_;
      if (in && std::getline(in, line) && parse_control(line, next)) {
        const bool drop = next.drop_generation > control_.drop_generation;
        control_ = next;
        if (drop) {
          for (const auto& link : links_) link->close();
          links_.clear();
        }
      }
      timer.expires_after(milliseconds(20));
      co_await timer.async_wait(asio::use_awaitable);
    }
  }

  void stop() {
    std::error_code ignored;
    acceptor_.close(ignored);
    for (const auto& link : links_) link->close();
    links_.clear();
    io_.stop();
  }

 private:
  asio::awaitable<void> serve(tcp::socket client) {
    tcp::socket server(io_);
    std::error_code ec;
    co_await server.async_connect(upstream_, asio::redirect_error(asio::use_awaitable, ec));
    if (ec) co_return;  // the server is down: the client sees its connection closed
    auto link = std::make_shared<Link>(std::move(client), std::move(server));
    links_.insert(link);
    asio::co_spawn(io_, pump(link, true), asio::detached);
    asio::co_spawn(io_, pump(link, false), asio::detached);
  }

  bool stopped(bool up) const { return up ? control_.up_stopped : control_.down_stopped; }

  // Moves bytes one way. While that way is partitioned it neither reads nor writes, so the
  // sender's kernel buffers fill as over a dead link.
  asio::awaitable<void> pump(std::shared_ptr<Link> link, bool up) {
    tcp::socket& from = up ? link->client : link->server;
    tcp::socket& to = up ? link->server : link->client;
    asio::steady_timer timer(io_);
    char buf[16384];
    std::error_code ec;
    for (;;) {
      while (stopped(up) && from.is_open()) {
        timer.expires_after(milliseconds(10));
        co_await timer.async_wait(asio::use_awaitable);
      }
      const std::size_t n = co_await from.async_read_some(
          asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
      const auto due = steady_clock::now() + control_.latency;
      timer.expires_at(due);
      co_await timer.async_wait(asio::redirect_error(asio::use_awaitable, ec));
      while (stopped(up) && to.is_open()) {
        timer.expires_after(milliseconds(10));
        co_await timer.async_wait(asio::use_awaitable);
      }
      co_await asio::async_write(to, asio::buffer(buf, n),
                                 asio::redirect_error(asio::use_awaitable, ec));
      if (ec) break;
    }
    link->close();
    links_.erase(link);
  }

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  tcp::endpoint upstream_;
  std::string control_path_;
  Control control_;
  std::set<std::shared_ptr<Link>> links_;
};

[[noreturn]] void usage(const std::string& msg) {
  std::cerr << "statepact_chaos_relay: " << msg
            << "\nusage: statepact_chaos_relay --listen PORT --to PORT --control FILE\n";
  std::exit(2);
}

unsigned short port_arg(const std::string& name, const std::string& v) {
  try {
    std::size_t used = 0;
    const long p = std::stol(v, &used);
    if (used == v.size() && p >= 1 && p <= 65535) return static_cast<unsigned short>(p);
  } catch (const std::exception&) {
  }
  usage(name + " must be a port from 1 to 65535, not '" + v + "'");
}

}  // namespace

int main(int argc, char** argv) {
  unsigned short listen = 0, to = 0;
  std::string control;
  for (int i = 1; i < argc; i += 2) {
    const std::string k = argv[i];
    if (i + 1 >= argc) usage(k + " needs a value");
    const std::string v = argv[i + 1];
    if (k == "--listen")
      listen = port_arg(k, v);
    else if (k == "--to")
      to = port_arg(k, v);
    else if (k == "--control")
      control = v;
    else
      usage("unknown option " + k);
  }
  if (!listen || !to || control.empty()) usage("--listen, --to and --control are required");
  try {
    asio::io_context io;
    Relay relay(io, listen, to, control);
    asio::signal_set signals(io, SIGINT, SIGTERM);
    signals.async_wait([&](const std::error_code&, int) { relay.stop(); });
    asio::co_spawn(io, relay.accept_loop(), asio::detached);
    asio::co_spawn(io, relay.control_loop(), asio::detached);
    io.run();
  } catch (const std::exception& e) {
    std::cerr << "statepact_chaos_relay: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
