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
