// A Redis reply copied out of hiredis, so it outlives the callback that delivered it.
#pragma once

#include <string>
#include <vector>

namespace statepact::detail {

struct RedisReply {
  enum class Type { nil, integer, string, status, error, array };
  Type type = Type::nil;
  long long integer = 0;
  std::string str;  // string, status and error replies
  std::vector<RedisReply> elements;

  bool is_nil() const { return type == Type::nil; }
  bool is_error() const { return type == Type::error; }
};

}  // namespace statepact::detail
