// One script call's KEYS and ARGV, as a codec lays them out.
#pragma once

#include <string>
#include <vector>

namespace statepact::detail {

struct ScriptCall {
  std::vector<std::string> keys;
  std::vector<std::string> args;
};

}  // namespace statepact::detail
