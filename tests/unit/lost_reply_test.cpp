// The one model of a lost reply: what the caller is told for each kind of request and each way
// the reply was lost, the same for Redis and PostgreSQL.
#include <catch2/catch.hpp>

#include <exception>
#include <string>

#include <statepact/detail/lost_reply.hpp>

#include "../support/caught.hpp"

namespace sp = statepact;
namespace d = statepact::detail;

namespace {

sp::test::Caught told(d::LostReply request, d::Loss loss) {
  return sp::test::caught(d::lost_reply_error("redis", request, loss, "no reply within 40 ms"));
}

}  // namespace

TEST_CASE("lost reply: a request never sent did nothing, whatever it was", "[lost_reply]") {
  for (auto request : {d::LostReply::read(), d::LostReply::write(), d::LostReply::in_transaction(),
                       d::LostReply::commit(true), d::LostReply::commit(false)}) {
    const auto t = told(request, d::Loss::not_sent);
    CHECK(t.code == sp::ErrorCode::backend_unavailable);
    CHECK_FALSE(t.commit_unknown);
    CHECK(t.retryable);
    CHECK(t.text == "redis: no reply within 40 ms; nothing was sent");
  }
}

TEST_CASE("lost reply: a commit sent may have been applied", "[lost_reply]") {
  for (auto loss : {d::Loss::no_reply, d::Loss::disconnected}) {
    const auto keyed = told(d::LostReply::commit(true), loss);
    CHECK(keyed.commit_unknown);
    CHECK(keyed.retryable);  // resending with its idempotency key finds out
    CHECK(keyed.has("after the commit was sent; it may or may not have been applied"));
    const auto bare = told(d::LostReply::commit(false), loss);
    CHECK(bare.commit_unknown);
    CHECK_FALSE(bare.retryable);
  }
}

TEST_CASE("lost reply: reads, writes and statements of a transaction", "[lost_reply]") {
  const auto read = told(d::LostReply::read(), d::Loss::no_reply);
  CHECK(read.text == "redis: no reply within 40 ms");
  CHECK(read.retryable);
  const auto write = told(d::LostReply::write(), d::Loss::disconnected);
  CHECK(write.has("may or may not have happened"));
  CHECK(write.retryable);
  CHECK_FALSE(write.commit_unknown);
  const auto tx = told(d::LostReply::in_transaction(), d::Loss::disconnected);
  CHECK(tx.has("the server rolls the transaction back, nothing was applied"));
  CHECK_FALSE(tx.commit_unknown);

  CHECK(d::LostReply::read().resendable());
  for (auto request :
       {d::LostReply::write(), d::LostReply::in_transaction(), d::LostReply::commit(true)})
    CHECK_FALSE(request.resendable());
}

#include <statepact/detail/unknown_outcome.hpp>

TEST_CASE("unknown outcome: only a refusal made before anything is written ends it",
          "[lost_reply][unknown_outcome]") {
  using C = sp::ErrorCode;
  for (C c : {C::conflict, C::lease_lost, C::fence_required, C::resource_not_found,
              C::invalid_argument, C::idempotency_key_reused})
    CHECK(d::proves_not_applied(c));
  // A lock wait or a deadlock on a resend may come while the first send holds its locks, applied.
  for (C c : {C::deadlock, C::lock_timeout, C::backend_unavailable, C::commit_unknown,
              C::lease_not_available, C::configuration})
    CHECK_FALSE(d::proves_not_applied(c));
}

TEST_CASE("unknown outcome: a resend starts only in the first half of the retention",
          "[lost_reply][unknown_outcome]") {
  using steady = std::chrono::steady_clock;
  const steady::time_point sent{std::chrono::hours(5)};
  const d::ResendWindow window(sent, std::chrono::milliseconds(1000));
  CHECK(window.open(sent));
  CHECK(window.open(sent + std::chrono::milliseconds(499)));
  CHECK_FALSE(window.open(sent + std::chrono::milliseconds(500)));
  CHECK_FALSE(window.open(sent + std::chrono::hours(1)));
  CHECK_FALSE(d::ResendWindow().open(steady::now()));  // no first send: nothing to resend
}

TEST_CASE("unknown outcome: the longest resend schedule is the sum of the backoff ceilings",
          "[lost_reply][unknown_outcome]") {
  using std::chrono::milliseconds;
  CHECK(d::longest_resend_schedule(5, milliseconds(10), 2.0, milliseconds(1000)) ==
        milliseconds(10 + 20 + 40 + 80 + 160));
  CHECK(d::longest_resend_schedule(4, milliseconds(10), 2.0, milliseconds(30)) ==
        milliseconds(10 + 20 + 30 + 30));
  // An hour's cap over many attempts: far past a one-hour retention, and no overflow.
  CHECK(d::longest_resend_schedule(1000000, milliseconds(3600000), 2.0, milliseconds(3600000)) >
        std::chrono::hours(24 * 365));
}
