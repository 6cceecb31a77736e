// One Redis connection's own state, without I/O: whether hiredis still has it, whether its connect
// completed (from then on anything queued may have reached the server), and its setup (AUTH,
// SELECT, CLIENT SETNAME, the eviction check). Requests wait until every setup step answered well;
// a refused step fails them all with nothing sent. connection.cpp asks this; it only moves bytes.
#pragma once

#include <exception>

namespace statepact::detail {

class LinkState {
 public:
  bool alive() const { return alive_; }
  bool connected() const { return connected_; }
  // Every setup step answered, and well: requests may be sent.
  bool ready() const { return alive_ && setup_pending_ == 0 && !setup_error_; }
  const std::exception_ptr& setup_error() const { return setup_error_; }

  void setup_queued() { ++setup_pending_; }
  // A step that could not even be queued: the link fails when hiredis lets it go.
  void setup_not_queued(std::exception_ptr error) {
    ++setup_pending_;
    if (!setup_error_) setup_error_ = std::move(error);
  }
  // A step's answer (null when good; the first refusal is the one reported). True when it was the
  // last one: the link is then ready() or failed (setup_error()).
  bool setup_answered(std::exception_ptr error) {
    if (error && !setup_error_) setup_error_ = std::move(error);
    return setup_pending_ > 0 && --setup_pending_ == 0;
  }

  void connect_completed() { connected_ = true; }
  void closed() { alive_ = false; }

  // It closed with requests waiting for its setup (nothing of theirs was sent). True: each starts
  // over on a fresh connection; the setup was lost (not refused) after connecting, and the
  // backend is not shutting down. Otherwise they fail.
  bool restart_waiting(bool closing) const { return !setup_error_ && connected_ && !closing; }

 private:
  bool alive_ = true;
  bool connected_ = false;
  int setup_pending_ = 0;
  std::exception_ptr setup_error_;
};

}  // namespace statepact::detail
