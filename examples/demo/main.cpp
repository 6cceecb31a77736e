// statepact demo on the memory backend: what goes wrong without fencing and isolation, and what
// statepact prevents.
#include <cstdio>
#include <exception>

#include <asio/co_spawn.hpp>
#include <asio/io_context.hpp>

#include "stories.hpp"

static asio::awaitable<void> all_stories() {
  co_await demo::fencing_story();
  co_await demo::stock_race();
  co_await demo::write_skew();
}

int main() {
  asio::io_context io;
  std::exception_ptr failure;
  asio::co_spawn(io, all_stories(), [&](std::exception_ptr e) { failure = e; });
  io.run();
  if (failure) {
    try {
      std::rethrow_exception(failure);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "demo failed: %s\n", e.what());
    }
    return 1;
  }
  return 0;
}
