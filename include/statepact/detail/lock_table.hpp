// Shared/exclusive key locks for pessimistic sessions, as pure bookkeeping: who holds what, who
// waits in which order, and whether a new wait would close a cycle. It does no I/O and no waiting;
// the memory backend wakes the waiters it is told were granted.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <statepact/commit_request.hpp>
#include <statepact/types.hpp>

namespace statepact::detail {

class LockTable {
 private:
  struct Waiter {
    SessionId session;
    LockMode mode;
    std::uint64_t ticket;
  };
  // Vectors, not node containers: a key has a few holders and waiters, and an empty vector
  // allocates nothing (an empty std::deque does).
  struct KeyLock {
    std::vector<std::pair<SessionId, LockMode>> holders;
    std::vector<Waiter> queue;
  };

  template <class Lock>
  static auto holder(Lock& lock, SessionId s) {
    return std::find_if(lock.holders.begin(), lock.holders.end(),
                        [s](const auto& h) { return h.first == s; });
  }

  // Records s as a holder of key in mode (an upgrade changes the mode of the existing hold).
  void grant(KeyLock& lock, SessionId s, LockMode mode, const std::string& key) {
    if (auto h = holder(lock, s); h != lock.holders.end()) {
      h->second = mode;
      return;
    }
    lock.holders.emplace_back(s, mode);
    held_by_[s].push_back(key);
  }

 public:
  enum class Outcome { granted, must_wait, deadlock };

  struct Grant {
    SessionId session;
    std::uint64_t ticket;
  };

  // Either grants now, or queues the request (returning its ticket), or refuses it because waiting
  // would deadlock. A holder asking again for what it has (or less) is granted at once.
  Outcome acquire(SessionId s, const std::string& key, LockMode mode, std::uint64_t& ticket) {
    if (try_acquire(s, key, mode)) return Outcome::granted;
    auto& lock = locks_[key];
    const bool upgrade = holder(lock, s) != lock.holders.end();
    Waiter w{s, mode, ++next_ticket_};
    // An upgrade goes first: it already holds the lock, so nobody behind it can be granted anyway.
    if (upgrade)
      lock.queue.insert(lock.queue.begin(), w);
    else
      lock.queue.push_back(w);
    waiting_on_[s] = key;
    if (closes_cycle(s)) {
      remove_waiter(key, s);
      return Outcome::deadlock;
    }
    ticket = w.ticket;
    return Outcome::must_wait;
  }

  // Grants now if that needs no wait; otherwise changes nothing and returns false.
  bool try_acquire(SessionId s, const std::string& key, LockMode mode) {
    auto it = locks_.find(key);
    if (it == locks_.end()) {
      grant(locks_[key], s, mode, key);
      return true;
    }
    auto& lock = it->second;
    auto held = holder(lock, s);
    const bool upgrade = held != lock.holders.end();
    if (upgrade && (held->second == LockMode::exclusive || mode == LockMode::shared)) return true;
    if (!grantable(lock, s, mode) || !(upgrade || lock.queue.empty())) return false;
    grant(lock, s, mode, key);
    return true;
  }

  bool holds(SessionId s, const std::string& key, LockMode mode) const {
    auto it = locks_.find(key);
    if (it == locks_.end()) return false;
    auto h = holder(it->second, s);
    return h != it->second.holders.end() &&
           (h->second == LockMode::exclusive || mode == LockMode::shared);
  }

  // A waiter gave up (timeout, cancellation): leaving the queue may let others in.
  std::vector<Grant> cancel_wait(SessionId s, const std::string& key) {
    remove_waiter(key, s);
    std::vector<Grant> granted;
    promote(key, granted);
    return granted;
  }

  // Releases every lock and wait of a session; returns the waiters that are now granted.
  std::vector<Grant> release_all(SessionId s) {
    std::vector<Grant> granted;
    if (auto w = waiting_on_.find(s); w != waiting_on_.end()) {
      std::string key = w->second;
      remove_waiter(key, s);
      promote(key, granted);
    }
    auto it = held_by_.find(s);
    if (it == held_by_.end()) return granted;
    auto keys = std::move(it->second);
    held_by_.erase(it);
    for (const auto& key : keys) {
      auto l = locks_.find(key);
      if (l == locks_.end()) continue;
      auto& holders = l->second.holders;
      if (auto h = holder(l->second, s); h != holders.end()) holders.erase(h);
      promote(key, granted);
    }
    return granted;
  }

  std::size_t held_count(SessionId s) const {
    auto it = held_by_.find(s);
    return it == held_by_.end() ? 0 : it->second.size();
  }
  bool empty() const { return locks_.empty() && waiting_on_.empty() && held_by_.empty(); }

 private:
  static bool compatible(LockMode a, LockMode b) {
    return a == LockMode::shared && b == LockMode::shared;
  }

  static bool grantable(const KeyLock& lock, SessionId s, LockMode mode) {
    for (const auto& [holder, held] : lock.holders)
      if (holder != s && !compatible(held, mode)) return false;
    return true;
  }

  // Grants queued requests in order while they are compatible with the holders.
  void promote(const std::string& key, std::vector<Grant>& granted) {
    auto it = locks_.find(key);
    if (it == locks_.end()) return;
    auto& lock = it->second;
    while (!lock.queue.empty()) {
      const Waiter w = lock.queue.front();
      if (!grantable(lock, w.session, w.mode)) break;
      lock.queue.erase(lock.queue.begin());
      grant(lock, w.session, w.mode, key);
      waiting_on_.erase(w.session);
      granted.push_back({w.session, w.ticket});
    }
    if (lock.holders.empty() && lock.queue.empty()) locks_.erase(it);
  }

  void remove_waiter(const std::string& key, SessionId s) {
    waiting_on_.erase(s);
    auto it = locks_.find(key);
    if (it == locks_.end()) return;
    auto& q = it->second.queue;
    q.erase(std::remove_if(q.begin(), q.end(), [&](const Waiter& w) { return w.session == s; }),
            q.end());
    if (it->second.holders.empty() && q.empty()) locks_.erase(it);
  }

  // Sessions a waiting session waits for: incompatible holders, and queued requests ahead of it
  // that it cannot pass (FIFO order keeps exclusive requests from starving).
  std::vector<SessionId> blockers(SessionId s) const {
    std::vector<SessionId> out;
    auto w = waiting_on_.find(s);
    if (w == waiting_on_.end()) return out;
    const auto& lock = locks_.at(w->second);
    LockMode mode = LockMode::shared;
    for (const auto& q : lock.queue)
      if (q.session == s) mode = q.mode;
    for (const auto& [holder, held] : lock.holders)
      if (holder != s && !compatible(held, mode)) out.push_back(holder);
    for (const auto& q : lock.queue) {
      if (q.session == s) break;
      if (!compatible(q.mode, mode)) out.push_back(q.session);
    }
    return out;
  }

  // Every new cycle in the wait-for graph passes through the newest edge, so searching from the
  // new waiter finds any deadlock at the moment it forms.
  bool closes_cycle(SessionId start) const {
    std::vector<SessionId> stack = blockers(start);
    std::unordered_set<SessionId> seen;
    while (!stack.empty()) {
      SessionId s = stack.back();
      stack.pop_back();
      if (s == start) return true;
      if (!seen.insert(s).second) continue;
      for (SessionId b : blockers(s)) stack.push_back(b);
    }
    return false;
  }

  std::unordered_map<std::string, KeyLock> locks_;
  std::unordered_map<SessionId, std::string> waiting_on_;
  std::unordered_map<SessionId, std::vector<std::string>> held_by_;  // each key once
  std::uint64_t next_ticket_ = 0;
};

}  // namespace statepact::detail
