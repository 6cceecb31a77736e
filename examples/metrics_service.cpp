// A service that exposes statepact's metrics on http://127.0.0.1:PORT/metrics (prometheus-cpp's
// Exposer) while its workers hold job leases and update a shared counter on the memory backend.
//
//   statepact_example_metrics_service [--port 9464] [--seconds 0 (run until killed)] [--self-check]
//   curl -s http://127.0.0.1:9464/metrics | grep '^statepact_'
//
// --self-check scrapes its own /metrics once the time is up, prints the statepact counters and
// fails unless commits were counted.
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <sstream>
#include <string>

#include <asio/co_spawn.hpp>
#include <asio/detached.hpp>
#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/read.hpp>
#include <asio/steady_timer.hpp>
#include <asio/write.hpp>

#include <prometheus/exposer.h>
#include <prometheus/registry.h>

#include <statepact/prometheus.hpp>
#include <statepact/statepact.hpp>

namespace sp = statepact;
using namespace std::chrono_literals;
using Backend = sp::MemoryBackend;

asio::awaitable<void> pause(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(asio::use_awaitable);
}

// Holds a job's lease (auto-renewed) and records progress under its token; then takes a share of
// a counter every worker updates, so some commits conflict and are retried.
asio::awaitable<void> worker(sp::Manager<Backend>& manager, sp::LeaseManager<Backend>& leases,
                             int id, const std::atomic<bool>& stop) {
  const std::string me = "worker-" + std::to_string(id);
  for (int round = 0; !stop; ++round) {
    const std::string job = "job-" + std::to_string(round % 3);
    auto work = [&](const sp::Lease& lease) -> asio::awaitable<void> {
      auto s = co_await manager.session(sp::SessionOptions(me).resource(job).fence(lease));
      co_await s.write("progress", round);
      co_await s.commit();
      co_await pause(40ms);  // the job's work: long enough for a renewal
    };
    try {
      co_await leases.hold(job, me, work, sp::HoldOptions().wait(20ms).auto_renew(true));
    } catch (const sp::LeaseNotAvailableError&) {
      // Another worker has this job: fine, the metrics count it.
    } catch (const sp::LeaseLostError&) {
      // Renewal came too late (a stalled process): stop this job; the metrics count the loss.
    }
    auto add_one = [round](sp::Session<Backend>& s) -> asio::awaitable<void> {
      auto n = co_await s.read("n");
      if (round % 4 == 0) co_await pause(1ms);  // others may commit meanwhile: a conflict
      co_await s.write("n", n ? n->get<int>() + 1 : 1);
    };
    try {
      co_await manager.run(sp::SessionOptions(me).resource("counter"), add_one,
                           sp::RetryPolicy().max_attempts(10));
    } catch (const sp::ConflictError&) {
      // Out of attempts: the metrics count each conflict and retry.
    }
  }
}

// GET /metrics over plain HTTP/1.0, as curl would.
std::string scrape(int port) {
  asio::io_context io;
  asio::ip::tcp::socket socket(io);
  socket.connect({asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});
  const std::string request = "GET /metrics HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  asio::write(socket, asio::buffer(request));
  std::string response;
  asio::error_code ec;
  asio::read(socket, asio::dynamic_buffer(response), ec);  // until the server closes
  if (ec && ec != asio::error::eof) throw std::system_error(ec);
  return response;
}

int main(int argc, char** argv) {
  int port = 9464;
  int seconds = 0;
  bool self_check = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--port") && i + 1 < argc) {
      port = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--seconds") && i + 1 < argc) {
      seconds = std::atoi(argv[++i]);
    } else if (!std::strcmp(argv[i], "--self-check")) {
      self_check = true;
    } else {
      std::fprintf(stderr, "usage: %s [--port N] [--seconds S] [--self-check]\n", argv[0]);
      return 2;
    }
  }

  auto registry = std::make_shared<prometheus::Registry>();
  sp::PrometheusObserver metrics(*registry, {{"backend", "memory"}});
  // Loopback only: metrics are for a local scraper (or a sidecar), not the world.
  prometheus::Exposer exposer("127.0.0.1:" + std::to_string(port));
  exposer.RegisterCollectable(registry);
  port = exposer.GetListeningPorts().at(0);
  std::printf("serving http://127.0.0.1:%d/metrics\n", port);
  std::fflush(stdout);

  Backend backend;
  sp::Manager<Backend> manager(backend);
  manager.set_observer(&metrics);
  sp::LeaseManager<Backend> leases(backend, 90ms);  // renewed every 30 ms while held
  leases.set_observer(&metrics);

  asio::io_context io;
  asio::co_spawn(io, manager.register_resource("counter"), asio::detached);  // done before workers
  std::atomic<bool> stop{false};
  int failed = 0;
  for (int id = 1; id <= 4; ++id)
    asio::co_spawn(io, worker(manager, leases, id, stop), [&](std::exception_ptr e) {
      if (!e) return;
      ++failed;
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& x) {
        std::fprintf(stderr, "worker failed: %s\n", x.what());
      }
    });
  asio::steady_timer deadline(io);
  if (seconds > 0) {
    deadline.expires_after(std::chrono::seconds(seconds));
    deadline.async_wait([&](asio::error_code) { stop = true; });
  }
  io.run();
  if (failed) return 1;
  if (!self_check) return 0;

  const std::string body = scrape(port);
  std::istringstream lines(body);
  bool counted = false;
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("statepact_", 0) != 0 || line.find("_total{") == std::string::npos) continue;
    std::printf("%s\n", line.c_str());
    if (line.rfind("statepact_commits_total{", 0) == 0 && line.find("applied") != line.npos &&
        line.substr(line.rfind(' ') + 1) != "0")
      counted = true;
  }
  if (!counted) {
    std::fprintf(stderr, "no applied commits in /metrics:\n%s\n", body.c_str());
    return 1;
  }
  return 0;
}
