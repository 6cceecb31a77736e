// The usage block of README.md compiles and runs: it is copied below between the markers, and a
// test compares the copy with the README, so the two cannot drift apart.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "../support/run.hpp"

// clang-format off
// ---- begin: README.md usage ----
#include <statepact/statepact.hpp>
using namespace std::chrono_literals;
using statepact::SessionOptions;

asio::awaitable<void> worker(statepact::Manager<statepact::MemoryBackend>& manager,
                             statepact::LeaseManager<statepact::MemoryBackend>& leases) {
  auto lease = co_await leases.lease("job-42", "worker-a", 30s);       // token 1; registers job-42
  auto busy = co_await leases.try_acquire("job-42", "worker-b", 30s);  // empty: worker-a holds it
  auto session = co_await manager.session(SessionOptions("worker-a").resource("job-42").fence(lease.token));
  co_await session.write("status", busy ? "double-booked" : "running");
  co_await session.commit();          // LeaseLostError if a newer token exists: stop, re-acquire
  lease = co_await leases.renew(lease);                                // heartbeat before expiry
  co_await leases.release(lease);
}
// ---- end: README.md usage ----
// clang-format on

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The text between two marker lines (exclusive), or "" if they are missing.
std::string between(const std::string& text, const std::string& begin, const std::string& end) {
  const auto b = text.find(begin);
  if (b == std::string::npos) return "";
  const auto start = text.find('\n', b) + 1;
  const auto e = text.find(end, start);
  if (e == std::string::npos) return "";
  return text.substr(start, e - start);
}

struct Outcome {
  statepact::Token fence = 0;
  std::optional<statepact::Value> status;
  statepact::Token next_token = 0;
};

asio::awaitable<Outcome> run_usage() {
  statepact::MemoryBackend backend;
  statepact::Manager<statepact::MemoryBackend> manager(backend);
  statepact::LeaseManager<statepact::MemoryBackend> leases(backend);
  co_await worker(manager, leases);
  Outcome out;
  out.fence = co_await backend.current_fence("job-42");
  out.status = (co_await backend.read("job-42", "status")).value;
  out.next_token = (co_await backend.acquire_lease("job-42", "worker-b", 30s)).token;
  co_return out;
}

}  // namespace

TEST_CASE("the README usage block is the one compiled here", "[unit][usage]") {
  const auto here = std::filesystem::path(__FILE__);
  const auto readme = slurp(here.parent_path() / ".." / ".." / "README.md");
  const auto copy = between(slurp(here), "// ---- begin: README.md usage ----",
                            "// ---- end: README.md usage ----");
  const auto block = between(readme, "```cpp", "```");
  REQUIRE(!copy.empty());
  REQUIRE(!block.empty());
  CHECK(block == copy);
}

TEST_CASE("the README usage block runs as written", "[unit][usage]") {
  auto out = statepact::test::run([](asio::any_io_executor) { return run_usage(); });
  CHECK(out.fence == 1);  // one lease, token 1, as the comment in the block says
  REQUIRE(out.status);
  CHECK(*out.status == statepact::Value("running"));
  CHECK(out.next_token == 2);  // released at the end: another owner gets the next token
}
