// A sorted-vector map for a session's read set, write buffer and held locks. Sessions touch a few
// keys, so one contiguous buffer beats a node per key (std::map) in allocations and cache misses,
// and iteration stays in key order, which commit requests and fingerprints rely on.
#pragma once

#include <algorithm>
#include <tuple>
#include <utility>
#include <vector>

namespace statepact::detail {

template <class K, class V>
class FlatMap {
 public:
  using value_type = std::pair<K, V>;
  using iterator = typename std::vector<value_type>::iterator;
  using const_iterator = typename std::vector<value_type>::const_iterator;

  iterator begin() { return items_.begin(); }
  iterator end() { return items_.end(); }
  const_iterator begin() const { return items_.begin(); }
  const_iterator end() const { return items_.end(); }
  std::size_t size() const { return items_.size(); }
  bool empty() const { return items_.empty(); }

  iterator find(const K& key) {
    auto it = lower_bound(key);
    return it != items_.end() && it->first == key ? it : items_.end();
  }
  const_iterator find(const K& key) const {
    auto it = std::lower_bound(items_.begin(), items_.end(), key, less_key);
    return it != items_.end() && it->first == key ? it : items_.end();
  }
  bool contains(const K& key) const { return find(key) != end(); }

  // Inserts only if the key is absent; returns where the key is and whether it was inserted.
  template <class... Args>
  std::pair<iterator, bool> try_emplace(K key, Args&&... args) {
    auto it = lower_bound(key);
    if (it != items_.end() && it->first == key) return {it, false};
    return {items_.emplace(it, std::piecewise_construct, std::forward_as_tuple(std::move(key)),
                           std::forward_as_tuple(std::forward<Args>(args)...)),
            true};
  }

  // Inserts or overwrites.
  template <class T>
  void assign(K key, T&& value) {
    auto it = lower_bound(key);
    if (it != items_.end() && it->first == key)
      it->second = std::forward<T>(value);
    else
      items_.emplace(it, std::move(key), std::forward<T>(value));
  }

 private:
  static bool less_key(const value_type& item, const K& key) { return item.first < key; }
  iterator lower_bound(const K& key) {
    return std::lower_bound(items_.begin(), items_.end(), key, less_key);
  }

  std::vector<value_type> items_;
};

}  // namespace statepact::detail
