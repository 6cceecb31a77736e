// Names of resources this client has seen registered. Resources are never removed, so once storage
// confirmed one, a later session naming it needs no round trip to check again; the commit, read
// and snapshot still check it on the server (a wiped server is reported there, with the same
// error).
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <unordered_set>
#include <vector>

namespace statepact::detail {

class KnownResources {
 public:
  // At most `capacity` names are kept (each costs its bytes plus a node): past it the set starts
  // over, so a client that touches millions of resources keeps a bounded memory and pays one check
  // per name again. 0 keeps none: every session begins with the check.
  explicit KnownResources(std::size_t capacity = default_capacity) : capacity_(capacity) {}

  static constexpr std::size_t default_capacity = 65536;

  // True if every name is known to be registered (true for none).
  bool all_known(const std::vector<std::string>& names) const {
    if (names.empty()) return true;
    std::lock_guard guard(mu_);
    for (const auto& n : names)
      if (!names_.count(n)) return false;
    return true;
  }

  void remember(const std::string& name) {
    std::lock_guard guard(mu_);
    insert(name);
  }

  void remember(const std::vector<std::string>& names) {
    std::lock_guard guard(mu_);
    for (const auto& n : names) insert(n);
  }

  std::size_t size() const {
    std::lock_guard guard(mu_);
    return names_.size();
  }

 private:
  void insert(const std::string& name) {
    if (capacity_ == 0) return;
    if (names_.size() >= capacity_ && !names_.count(name)) names_.clear();
    names_.insert(name);
  }

  const std::size_t capacity_;
  mutable std::mutex mu_;
  std::unordered_set<std::string> names_;
};

}  // namespace statepact::detail
