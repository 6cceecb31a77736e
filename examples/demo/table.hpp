// Aligned text tables for the demo's output.
#pragma once

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

namespace demo {

class Table {
 public:
  explicit Table(std::vector<std::string> header) : rows_{std::move(header)} {}
  void add(std::vector<std::string> row) { rows_.push_back(std::move(row)); }

  void print() const {
    std::vector<std::size_t> width(rows_.front().size(), 0);
    for (const auto& r : rows_)
      for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], display_width(r[i]));
    for (std::size_t n = 0; n < rows_.size(); ++n) {
      std::string line = "  ";
      for (std::size_t i = 0; i < rows_[n].size(); ++i) {
        line += rows_[n][i];
        if (i + 1 < rows_[n].size())
          line += std::string(width[i] - display_width(rows_[n][i]) + 2, ' ');
      }
      std::puts(line.c_str());
      if (n == 0) {
        std::string rule = "  ";
        for (std::size_t i = 0; i < width.size(); ++i)
          rule += std::string(width[i], '-') + (i + 1 < width.size() ? "  " : "");
        std::puts(rule.c_str());
      }
    }
  }

 private:
  // Counts UTF-8 code points, so a column with a "✗" still lines up.
  static std::size_t display_width(const std::string& s) {
    return static_cast<std::size_t>(std::count_if(
        s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
  }
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace demo
