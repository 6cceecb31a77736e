// An answer row as the server sends it in text format (NULL: empty), so the codecs read answers
// without libpqxx and their tests need no server. Anything a function never answers (a schema of
// another version, a broken function) is a non-retryable statepact::Error, never a parsing
// library's exception.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include <statepact/errors.hpp>
#include <statepact/types.hpp>

namespace statepact::detail::pg {

using Field = std::optional<std::string>;
using Row = std::vector<Field>;
using Rows = std::vector<Row>;

[[noreturn]] inline void unexpected(const char* what) {
  throw Error(ErrorCode::backend_unavailable,
              fmt::format("PostgreSQL: unexpected answer from {}", what));
}

inline const Row& only_row(const Rows& rows, const char* what) {
  if (rows.size() != 1) unexpected(what);
  return rows.front();
}

inline bool is_null(const Row& row, std::size_t i, const char* what) {
  if (row.size() <= i) unexpected(what);
  return !row[i].has_value();
}

inline const std::string& text_at(const Row& row, std::size_t i, const char* what) {
  if (is_null(row, i, what)) unexpected(what);
  return *row[i];
}

inline long long int_at(const Row& row, std::size_t i, const char* what) {
  const std::string& s = text_at(row, i, what);
  long long v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) unexpected(what);
  return v;
}

// A count or token: never negative.
inline std::uint64_t count_at(const Row& row, std::size_t i, const char* what) {
  const long long v = int_at(row, i, what);
  if (v < 0) unexpected(what);
  return static_cast<std::uint64_t>(v);
}

inline bool bool_at(const Row& row, std::size_t i, const char* what) {
  const std::string& s = text_at(row, i, what);
  if (s != "t" && s != "f") unexpected(what);
  return s == "t";
}

// A jsonb field; NULL is no value.
inline std::optional<Value> json_at(const Row& row, std::size_t i, const char* what) {
  if (is_null(row, i, what)) return std::nullopt;
  try {
    return Value::parse(*row[i]);
  } catch (const std::exception&) {
    unexpected(what);
  }
}

// The functions give times as microseconds since the epoch.
inline time_point from_us(long long us) {
  return time_point(std::chrono::duration_cast<Clock::duration>(std::chrono::microseconds(us)));
}

}  // namespace statepact::detail::pg
