// Canned Redis replies for the codec tests.
#pragma once

#include <string>
#include <vector>

#include "reply.hpp"  // src/redis

namespace statepact::test {

using Reply = detail::RedisReply;

inline Reply nil() {
  return Reply{};
}

inline Reply str(std::string s) {
  Reply r;
  r.type = Reply::Type::string;
  r.str = std::move(s);
  return r;
}

inline Reply num(long long n) {
  Reply r;
  r.type = Reply::Type::integer;
  r.integer = n;
  return r;
}

inline Reply arr(std::vector<Reply> items) {
  Reply r;
  r.type = Reply::Type::array;
  r.elements = std::move(items);
  return r;
}

// An array of bulk strings.
inline Reply words(std::vector<std::string> items) {
  std::vector<Reply> out;
  for (auto& i : items) out.push_back(str(std::move(i)));
  return arr(std::move(out));
}

}  // namespace statepact::test
