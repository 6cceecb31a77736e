// Reading a script's structured reply. Anything the scripts never answer (a different server, a
// script of another version under the same SHA) is a statepact::Error that is not retryable, never
// a parsing library's exception.
#pragma once

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include <statepact/detail/verdicts.hpp>
#include <statepact/errors.hpp>
#include <statepact/types.hpp>

#include "reply.hpp"

namespace statepact::detail::reply_reader {

[[noreturn]] inline void malformed(const char* what) {
  throw Error(ErrorCode::backend_unavailable, std::string("redis: unexpected reply to ") + what);
}

inline std::uint64_t parse_u64(std::string_view text, const char* what) {
  std::uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) malformed(what);
  return v;
}

inline Value parse_json(const std::string& text, const char* what) {
  try {
    return Value::parse(text);
  } catch (const std::exception&) {
    malformed(what);
  }
}

// The script's 1-based index into a list the request sent.
template <class T>
const T& nth(const std::vector<T>& items, std::uint64_t i, const char* what) {
  if (i == 0 || i > items.size()) malformed(what);
  return items[i - 1];
}

inline const RedisReply& at(const RedisReply& r, std::size_t i, const char* what) {
  if (r.type != RedisReply::Type::array || r.elements.size() <= i) malformed(what);
  return r.elements[i];
}

inline const std::string& str_at(const RedisReply& r, std::size_t i, const char* what) {
  const auto& e = at(r, i, what);
  if (e.type != RedisReply::Type::string && e.type != RedisReply::Type::status) malformed(what);
  return e.str;
}

inline std::uint64_t num_at(const RedisReply& r, std::size_t i, const char* what) {
  return parse_u64(str_at(r, i, what), what);
}

// The verdict word at `i`, which must be one of `allowed` (the words this script answers with).
inline Verdict verdict_at(const RedisReply& r, std::size_t i, const char* what,
                          std::initializer_list<Verdict> allowed) {
  const auto v = named<Verdict>(str_at(r, i, what));
  if (!v || std::find(allowed.begin(), allowed.end(), *v) == allowed.end()) malformed(what);
  return *v;
}

// An integer reply that must be one of 0 and 1.
inline bool flag_reply(const RedisReply& r, const char* what) {
  if (r.type != RedisReply::Type::integer || (r.integer != 0 && r.integer != 1)) malformed(what);
  return r.integer == 1;
}

// The scripts give times as server milliseconds since the epoch.
inline time_point from_ms(std::uint64_t ms) {
  return time_point(std::chrono::duration_cast<Clock::duration>(milliseconds(ms)));
}

}  // namespace statepact::detail::reply_reader
