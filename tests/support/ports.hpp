// Loopback ports for servers a test starts itself. A port is free when the kernel hands it out for
// port 0; a lock file (flock, released when the process ends) keeps a second test process that was
// handed the same number from using it too, so two runs never collide.
#pragma once

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <stdexcept>
#include <string>

namespace statepact::test {

// A port nobody listened on when it was picked (the socket is closed again).
inline int unused_loopback_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  const bool ok = fd >= 0 && ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                  ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  if (fd >= 0) ::close(fd);
  if (!ok) throw std::runtime_error("cannot find a free loopback port");
  return ntohs(addr.sin_port);
}

// A free port that no other process using this function holds, until this process ends.
inline int reserve_loopback_port() {
  for (int attempt = 0; attempt < 50; ++attempt) {
    const int port = unused_loopback_port();
    // Shared by every user's runs (sticky and world-writable, like /tmp); may exist already.
    if (::mkdir("/tmp/statepact-ports", 01777) == 0) ::chmod("/tmp/statepact-ports", 01777);
    const std::string lock = "/tmp/statepact-ports/" + std::to_string(port) + ".lock";
    const int fd = ::open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
    if (fd < 0) continue;
    if (::flock(fd, LOCK_EX | LOCK_NB) == 0) return port;  // fd stays open: the reservation
    ::close(fd);
  }
  throw std::runtime_error("cannot reserve a loopback port");
}

}  // namespace statepact::test
