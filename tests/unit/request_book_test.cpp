// The Redis connection's bookkeeping with no socket and no clock: stages, deadlines, the resend
// rules for a lost reply and the queue of pending requests.
#include <catch2/catch.hpp>

#include <memory>

#include "request_book.hpp"  // src/redis

namespace d = statepact::detail;
using namespace std::chrono_literals;
using Stage = d::RequestBook::Stage;

namespace {

const d::RequestBook::time_point epoch{};

}  // namespace

TEST_CASE("request book: stages and the deadline of the first start", "[request_book]") {
  d::RequestBook r(d::LostReply::write());
  CHECK(r.stage() == Stage::queued);
  r.start(epoch, 100ms);
  CHECK(r.deadline() == epoch + 100ms);
  r.wait_for_setup();
  CHECK_FALSE(r.sent());
  r.written();
  CHECK(r.sent());
  r.start(epoch + 50ms, 100ms);  // started again (a resend): the deadline stays
  CHECK(r.deadline() == epoch + 100ms);
  CHECK(r.finish());
  CHECK(r.finished());
  CHECK_FALSE(r.finish());  // answered once
}

TEST_CASE("request book: what a lost reply means", "[request_book]") {
  d::RequestBook r(d::LostReply::commit(true));
  r.start(epoch, 1s);
  // Not handed over yet, or the connection never came up: nothing was sent.
  CHECK(r.loss_on_disconnect(true) == d::Loss::not_sent);
  CHECK(r.loss_on_timeout(true) == d::Loss::not_sent);
  r.wait_for_setup();
  CHECK(r.loss_on_disconnect(true) == d::Loss::not_sent);
  r.written();
  CHECK(r.loss_on_disconnect(false) == d::Loss::not_sent);
  CHECK(r.loss_on_disconnect(true) == d::Loss::disconnected);
  CHECK(r.loss_on_timeout(true) == d::Loss::no_reply);
  CHECK_FALSE(r.keeps_command());
}

TEST_CASE("request book: a read is resent once, on a connection that was up", "[request_book]") {
  d::RequestBook read(d::LostReply::read());
  CHECK(read.keeps_command());
  CHECK_FALSE(read.resend_after_loss(false, false));  // never connected
  CHECK_FALSE(read.resend_after_loss(true, true));    // the backend is closing
  CHECK(read.resend_after_loss(true, false));
  CHECK_FALSE(read.resend_after_loss(true, false));  // at most twice in all

  for (auto lost : {d::LostReply::write(), d::LostReply::commit(true), d::LostReply::commit(false),
                    d::LostReply::in_transaction()}) {
    d::RequestBook other(lost);
    CHECK_FALSE(other.resend_after_loss(true, false));
  }
  d::RequestBook answered(d::LostReply::read());
  answered.finish();
  CHECK_FALSE(answered.resend_after_loss(true, false));
}

TEST_CASE("request book: a loss during setup restarts any request once", "[request_book]") {
  d::RequestBook commit(d::LostReply::commit(false));
  commit.wait_for_setup();
  CHECK(commit.restart_after_setup_loss());
  CHECK_FALSE(commit.restart_after_setup_loss());
  d::RequestBook read(d::LostReply::read());
  CHECK(read.resend_after_loss(true, false));
  CHECK_FALSE(read.restart_after_setup_loss());  // one second chance, whichever it was
}

TEST_CASE("pending requests: the next deadline, the expired ones, finished ones dropped",
          "[request_book]") {
  d::PendingRequests<std::shared_ptr<d::RequestBook>> pending;
  CHECK_FALSE(pending.next_deadline());
  auto a = std::make_shared<d::RequestBook>();
  auto b = std::make_shared<d::RequestBook>();
  auto c = std::make_shared<d::RequestBook>();
  a->start(epoch, 300ms);
  b->start(epoch, 100ms);  // a shorter timeout behind a longer one
  c->start(epoch, 200ms);
  for (const auto& r : {a, b, c}) pending.push(r);
  CHECK(pending.next_deadline() == epoch + 100ms);
  CHECK(pending.expired(epoch + 99ms).empty());
  CHECK(pending.expired(epoch + 200ms) == std::vector<std::shared_ptr<d::RequestBook>>{b, c});

  b->finish();
  CHECK(pending.next_deadline() == epoch + 200ms);
  CHECK(pending.size() == 3);  // b is not at the front: kept until it is
  a->finish();
  CHECK_FALSE(pending.drop_finished());
  CHECK(pending.size() == 1);  // a and b dropped, c left
  c->finish();
  CHECK(pending.drop_finished());
  CHECK_FALSE(pending.next_deadline());
}
