// The median run of a benchmark: this machine's speed wanders between runs, and the median
// shrugs off the outliers. `key` says what a run is ranked by.
#pragma once

#include <algorithm>
#include <vector>

namespace statepact::bench {

template <class T, class Key>
T median_by(std::vector<T> runs, Key key) {
  if (runs.empty()) return T{};
  std::sort(runs.begin(), runs.end(), [&](const T& a, const T& b) { return key(a) < key(b); });
  return runs[runs.size() / 2];
}

}  // namespace statepact::bench
