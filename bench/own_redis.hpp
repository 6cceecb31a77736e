// A private redis-server a benchmark starts for itself and stops when done: either a plain server
// or a cluster of one master that holds all 16384 slots. The two run with the same settings
// (loopback, AOF with an fsync per write, no snapshots, no replica), so comparing them measures
// what cluster mode costs (the client's routing and the server's slot checks) and nothing else.
#pragma once

#include <chrono>
#include <stdexcept>
#include <string>
#include <thread>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fmt/format.h>

#include "shell.hpp"

namespace statepact::bench {

// A loopback port nothing listens on now (the kernel's pick for port 0).
inline int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("cannot pick a free port");
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

class OwnRedis {
 public:
  explicit OwnRedis(bool cluster) : port_(free_port()) {
    dir_ = shell("mktemp -d /tmp/statepact-bench-redis.XXXXXX");
    while (!dir_.empty() && (dir_.back() == '\n' || dir_.back() == ' ')) dir_.pop_back();
    std::string cmd = fmt::format(
        "redis-server --port {} --bind 127.0.0.1 --dir {} --appendonly yes --appendfsync always "
        "--save '' --daemonize yes --pidfile {}/redis.pid --logfile {}/redis.log",
        port_, shell_quoted(dir_), shell_quoted(dir_), shell_quoted(dir_));
    if (cluster)
      cmd += fmt::format(
          " --cluster-enabled yes --cluster-port {} --cluster-config-file {}/nodes.conf",
          free_port(), shell_quoted(dir_));
    shell(cmd);
    wait_for("ping", "PONG");
    if (cluster) {
      shell(fmt::format("redis-cli -p {} cluster addslotsrange 0 16383", port_));
      wait_for("cluster info", "cluster_state:ok");
    }
  }
  ~OwnRedis() {
    try {
      shell(fmt::format("redis-cli -p {} shutdown nosave >/dev/null 2>&1; rm -rf {}", port_,
                        shell_quoted(dir_)));
    } catch (...) {
    }
  }
  OwnRedis(const OwnRedis&) = delete;
  OwnRedis& operator=(const OwnRedis&) = delete;

  std::string url() const { return fmt::format("redis://127.0.0.1:{}", port_); }

 private:
  // Waits up to 10 s for `redis-cli <command>` to print `expect`.
  void wait_for(const std::string& command, const std::string& expect) const {
    for (int i = 0; i < 200; ++i) {
      std::string out;
      try {
        out = shell(fmt::format("redis-cli -p {} {}", port_, command));
      } catch (const std::exception&) {
      }
      if (out.find(expect) != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error(
        fmt::format("the benchmark's redis-server on port {} did not answer {}", port_, expect));
  }

  int port_;
  std::string dir_;
};

}  // namespace statepact::bench
