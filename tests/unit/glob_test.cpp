// The glob matching of the inspection calls (statepact/inspect.hpp): bytewise, fnmatch-like.
#include <catch2/catch.hpp>

#include <statepact/inspect.hpp>

namespace d = statepact::detail;

TEST_CASE("globs match names byte by byte", "[unit][inspect]") {
  struct Case {
    const char* glob;
    const char* name;
    bool match;
  };
  const Case cases[] = {
      {"job-*", "job-42", true},  {"job-*", "job-", true},
      {"job-*", "jobs-1", false}, {"*", "", true},
      {"?", "", false},           {"j?b", "job", true},
      {"*-42", "a-b-42", true},   {"*-42", "a-42x", false},
      {"[a-c]x", "bx", true},     {"[a-c]x", "dx", false},
      {"[!a-c]x", "dx", true},    {"[^a]", "a", false},
      {"[]]", "]", true},         {"\\*", "*", true},
      {"\\*", "a", false},        {"a\\[b", "a[b", true},
      {"*{}*", "x{}y", true},     {"\xc3\xa9*", "\xc3\xa9t\xc3\xa9", true},
      {"a*b*c", "aXbYbZc", true}, {"a*b*c", "aXbYbZ", false},
  };
  for (const auto& c : cases) {
    INFO(c.glob << " ~ " << c.name);
    CHECK(d::glob_match(c.glob, c.name) == c.match);
  }
  CHECK(d::glob_literal_prefix("job-\\*x*y") == "job-*x");
  CHECK(d::glob_literal_prefix("*") == "");
  CHECK_THROWS_AS(d::validate_glob("[ab"), statepact::InvalidArgumentError);
  CHECK_THROWS_AS(d::validate_glob("ab\\"), statepact::InvalidArgumentError);
  CHECK_NOTHROW(d::validate_glob("[]ab]*\\?"));
}
