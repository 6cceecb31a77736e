// worker-a takes job-42, pauses past its ttl, worker-b takes over and finishes, worker-a wakes and
// writes. Told twice: with the lease's token as a fence (storage refuses the stale write) and with
// a plain lock-style check only (the stale write lands).
#include <cstdio>
#include <string>

#include <fmt/format.h>

#include <statepact/statepact.hpp>
#include <statepact/testing/manual_clock.hpp>

#include "stories.hpp"
#include "table.hpp"

namespace sp = statepact;
using namespace std::chrono_literals;

namespace demo {
namespace {

class Timeline {
 public:
  explicit Timeline(const sp::testing::ManualClock& clock) : clock_(clock), start_(clock.now()) {}
  void add(const std::string& who, const std::string& what, const std::string& outcome) {
    const auto t = std::chrono::duration<double>(clock_.now() - start_).count();
    table_.add({fmt::format("{:5.1f}s", t), who, what, outcome});
  }
  void print() const { table_.print(); }

 private:
  const sp::testing::ManualClock& clock_;
  sp::time_point start_;
  Table table_{{"time", "who", "what", "outcome"}};
};

std::string show(const std::optional<sp::Value>& v) {
  return v ? v->dump() : "(absent)";
}

// Returns the final state of job-42 after the story.
asio::awaitable<std::string> tell(bool fenced) {
  sp::testing::ManualClock clock;
  sp::MemoryBackend backend(sp::MemoryOptions().clock(clock.source()));
  sp::Manager<sp::MemoryBackend> manager(backend);
  sp::LeaseManager<sp::MemoryBackend> leases(backend);
  Timeline timeline(clock);
  auto options = [&](const std::string& who, const sp::Lease& lease) {
    auto o = sp::SessionOptions(who).resource("job-42");
    if (fenced) o.fence(lease.token);
    return o;
  };

  auto a = co_await leases.lease("job-42", "worker-a", 30s);
  timeline.add("worker-a", "acquires the lease on job-42 (ttl 30s)",
               fmt::format("token {}", a.token));
  clock.advance(100ms);
  {
    auto s = co_await manager.session(options("worker-a", a));
    co_await s.write("status", "running");
    auto r = co_await s.commit();
    timeline.add("worker-a", "writes status=\"running\"",
                 fmt::format("committed (version {})", r.versions.at("job-42")));
  }
  clock.advance(100ms);
  timeline.add("worker-a", "pauses: a long GC, a VM migration, a partition", "");
  clock.advance(30s);
  timeline.add("", "worker-a's lease expires; it does not know", "");
  clock.advance(1s);
  auto b = co_await leases.lease("job-42", "worker-b", 30s);
  timeline.add("worker-b", "acquires the lease on job-42", fmt::format("token {}", b.token));
  clock.advance(2s);
  {
    auto s = co_await manager.session(options("worker-b", b));
    co_await s.write("status", "done");
    co_await s.write("result", "invoice-7781.pdf");
    auto r = co_await s.commit();
    timeline.add("worker-b", "finishes: status=\"done\", result=\"invoice-7781.pdf\"",
                 fmt::format("committed (version {})", r.versions.at("job-42")));
  }
  clock.advance(12s);
  {
    // worker-a's own check passes: it still holds its lease object and token.
    auto s = co_await manager.session(options("worker-a", a));
    co_await s.write("status", "running");
    co_await s.write("result", sp::Value());
    std::string outcome;
    try {
      auto r = co_await s.commit();
      outcome =
          fmt::format("committed (version {}): the stale write LANDED", r.versions.at("job-42"));
    } catch (const sp::LeaseLostError& e) {
      outcome = fmt::format("REFUSED by storage: LeaseLostError (token {} < fence {})", e.token(),
                            e.current_fence());
    }
    timeline.add("worker-a", "wakes up, believes it owns job-42, writes status=\"running\"",
                 outcome);
  }
  timeline.print();
  auto status = co_await backend.read("job-42", "status");
  auto result = co_await backend.read("job-42", "result");
  co_return fmt::format("status={} result={}", show(status.value), show(result.value));
}

}  // namespace

asio::awaitable<void> fencing_story() {
  std::puts("1. A paused worker wakes up after a takeover (the lease alone is not enough)\n");
  std::puts(
      "   With a fencing token: every write carries the lease's token and storage checks it.\n");
  const auto with_fence = co_await tell(true);
  std::printf("\n   job-42 afterwards: %s\n", with_fence.c_str());
  std::puts("   -> correct: worker-b's finished job stands; worker-a learns it lost the lease.\n");
  std::puts("   Without a fence: each worker only checks that it believes it holds the lock.\n");
  const auto without = co_await tell(false);
  std::printf("\n   job-42 afterwards: %s\n", without.c_str());
  std::puts("   -> CORRUPTED: a finished job is marked running again and its result is gone.\n");
  std::puts(
      "   Note: expiry alone does not block writes. Had nobody taken over, worker-a's late write");
  std::puts(
      "   would land, harmlessly: the fence only refuses a token older than the newest one.\n");
}

}  // namespace demo
