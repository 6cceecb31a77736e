// The Redis connection's bookkeeping, without I/O: where each request is (waiting for a new
// connection's setup, written, finished), its deadline, the rules for a lost reply, and the queue
// of requests awaiting replies. connection.cpp only moves bytes and timers and asks these; the
// unit tests drive them with no socket and no clock.
#pragma once

#include <chrono>
#include <deque>
#include <optional>
#include <vector>

#include <statepact/detail/lost_reply.hpp>

namespace statepact::detail {

class RequestBook {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  enum class Stage {
    queued,   // not handed to a connection yet
    waiting,  // held until its connection's setup (AUTH, SELECT, ...) succeeded: nothing sent
    written,  // handed to hiredis on a live connection: the server may have it
    finished  // its caller has been answered (a reply, or an error)
  };

  explicit RequestBook(LostReply lost = LostReply::write()) : lost_(lost) {}

  const LostReply& lost() const { return lost_; }
  Stage stage() const { return stage_; }
  bool finished() const { return stage_ == Stage::finished; }
  bool sent() const { return stage_ == Stage::written; }
  time_point deadline() const { return deadline_; }

  // Each (re)start: the deadline runs from the first, across a resend.
  void start(time_point now, std::chrono::milliseconds timeout) {
    if (armed_) return;
    armed_ = true;
    deadline_ = now + timeout;
  }
  void wait_for_setup() { stage_ = Stage::waiting; }
  void written() { stage_ = Stage::written; }
  // False when it was finished already: a caller is answered once.
  bool finish() {
    if (stage_ == Stage::finished) return false;
    stage_ = Stage::finished;
    return true;
  }

  // Only a resendable request keeps its command after writing it.
  bool keeps_command() const { return lost_.resendable(); }

  // The connection broke before this request's reply: a read that reached a live connection goes
  // once more on a fresh one (the server may have ended an idle connection before we noticed).
  // True means: start it again.
  bool resend_after_loss(bool connection_was_up, bool closing) {
    if (!lost_.resendable() || resent_ || finished() || !connection_was_up || closing) return false;
    resent_ = true;
    return true;
  }

  // The connection broke during its setup, so nothing of this request was sent: whatever it is,
  // it starts over once. True means: start it again.
  bool restart_after_setup_loss() {
    if (resent_ || finished()) return false;
    resent_ = true;
    return true;
  }

  // How its reply was lost when the connection broke (`connection_was_up`: it had connected).
  Loss loss_on_disconnect(bool connection_was_up) const {
    return connection_was_up && sent() ? Loss::disconnected : Loss::not_sent;
  }
  // How its reply was lost when its deadline passed.
  Loss loss_on_timeout(bool connection_was_up) const {
    return connection_was_up && sent() ? Loss::no_reply : Loss::not_sent;
  }

 private:
  LostReply lost_;
  Stage stage_ = Stage::queued;
  time_point deadline_{};
  bool armed_ = false;
  bool resent_ = false;
};

// The requests written or waiting, oldest first. One timer watches them all (at
// next_deadline()), so a command costs no timer of its own. `Ptr` points to a RequestBook.
template <class Ptr>
class PendingRequests {
 public:
  using time_point = RequestBook::time_point;

  void push(Ptr request) { queue_.push_back(std::move(request)); }

  // Drops finished requests from the front (replies come in order, so that is almost always
  // where they are); true when none is left.
  bool drop_finished() {
    while (!queue_.empty() && queue_.front()->finished()) queue_.pop_front();
    return queue_.empty();
  }

  // The earliest deadline of an unfinished request; empty when there is none.
  std::optional<time_point> next_deadline() {
    if (drop_finished()) return std::nullopt;
    std::optional<time_point> first;
    for (const auto& r : queue_)
      if (!r->finished() && (!first || r->deadline() < *first)) first = r->deadline();
    return first;
  }

  // The unfinished requests whose deadline passed at `now`, oldest first.
  std::vector<Ptr> expired(time_point now) const {
    std::vector<Ptr> late;
    for (const auto& r : queue_)
      if (!r->finished() && r->deadline() <= now) late.push_back(r);
    return late;
  }

  std::size_t size() const { return queue_.size(); }

 private:
  std::deque<Ptr> queue_;
};

}  // namespace statepact::detail
