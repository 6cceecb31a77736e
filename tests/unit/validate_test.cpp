#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include <statepact/backends/memory.hpp>
#include <statepact/detail/validate.hpp>
#include <statepact/errors.hpp>
#include <statepact/session_options.hpp>

namespace sp = statepact;
using sp::detail::validate_name;
using sp::detail::validate_ttl;

TEST_CASE("names: 1..256 bytes of UTF-8 without control characters", "[unit][validate]") {
  CHECK_NOTHROW(validate_name("key", "a"));
  CHECK_NOTHROW(validate_name("key", std::string(256, 'x')));
  CHECK_NOTHROW(validate_name("key", "job-42 / 'quoted' \\ {tag} \xe2\x9c\x93 \xf0\x9f\x98\x80"));
  CHECK_THROWS_AS(validate_name("key", ""), sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_name("key", std::string(257, 'x')), sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_name("key", "a\nb"), sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_name("key", std::string("a\0b", 3)), sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_name("key", "a\x7f"), sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_name("key", "\xc2\x9f"), sp::InvalidArgumentError);      // C1 control
  CHECK_THROWS_AS(validate_name("key", "\xff"), sp::InvalidArgumentError);          // not UTF-8
  CHECK_THROWS_AS(validate_name("key", "\xc0\x80"), sp::InvalidArgumentError);      // overlong
  CHECK_THROWS_AS(validate_name("key", "\xed\xa0\x80"), sp::InvalidArgumentError);  // surrogate
  CHECK_THROWS_AS(validate_name("key", "\xf4\x90\x80\x80"),
                  sp::InvalidArgumentError);                                    // > U+10FFFF
  CHECK_THROWS_AS(validate_name("key", "\xe2\x9c"), sp::InvalidArgumentError);  // truncated
}

TEST_CASE("validation messages say what was wrong and where", "[unit][validate]") {
  try {
    validate_name("resource name", "ok\tno");
    FAIL("no exception");
  } catch (const sp::InvalidArgumentError& e) {
    CHECK(std::string(e.what()) == "resource name contains a control character (0x09) at byte 2");
    CHECK(e.code() == sp::ErrorCode::invalid_argument);
    CHECK(!e.retryable());
  }
  try {
    validate_ttl(std::chrono::milliseconds(0));
    FAIL("no exception");
  } catch (const sp::InvalidArgumentError& e) {
    CHECK(std::string(e.what()) == "lease ttl must be positive, got 0 ms");
  }
}

TEST_CASE("ttl: positive and at most 7 days", "[unit][validate]") {
  using namespace std::chrono;
  CHECK_NOTHROW(validate_ttl(milliseconds(1)));
  CHECK_NOTHROW(validate_ttl(hours(24 * 7)));
  CHECK_THROWS_AS(validate_ttl(hours(24 * 7) + milliseconds(1)), sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_ttl(milliseconds(-1)), sp::InvalidArgumentError);
}

TEST_CASE("every error says whether it is retryable, as the spec's table", "[unit][errors]") {
  CHECK(sp::ConflictError("r", "k", 1, 2).retryable());
  CHECK(sp::DeadlockError("d").retryable());
  CHECK(sp::LockTimeoutError("t").retryable());
  CHECK(sp::BackendUnavailableError("b").retryable());
  CHECK(!sp::CommitUnknownError("c", false).retryable());
  CHECK(sp::CommitUnknownError("c", true).retryable());
  CHECK(!sp::LeaseLostError("r", "o", 1, 2, "x").retryable());
  CHECK(!sp::LeaseNotAvailableError("r", "a", "b", 1, {}).retryable());
  CHECK(!sp::InvalidArgumentError("i").retryable());
  CHECK(!sp::ResourceNotFoundError("r").retryable());
  CHECK(!sp::IdempotencyKeyReusedError("k").retryable());
  CHECK(
      std::string(sp::LeaseLostError("job-42", "worker-a", 1, 2, "superseded").what()) ==
      "lease lost on resource 'job-42' by owner 'worker-a' (token 1, current fence 2): superseded");
  CHECK(std::string(sp::ConflictError("sku-1", "stock", 3, 4).what()) ==
        "conflict on resource 'sku-1' key 'stock': expected version 3, found 4");
}

TEST_CASE("values: finite numbers, UTF-8 without U+0000, bounded depth and size",
          "[unit][validate]") {
  using sp::Value;
  using sp::detail::validate_value;
  CHECK(validate_value(Value::parse(R"({"a": [1, 2.5, "x", null, true], "b": {"c": "\u00e9"}})")) >
        0);
  CHECK_NOTHROW(validate_value(Value("C1 controls are text: \xc2\x85")));  // allowed in values
  CHECK_NOTHROW(validate_value(Value("tab\tand newline\n are escaped, not refused")));
  CHECK_THROWS_AS(validate_value(Value(std::nan(""))), sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_value(Value(-std::numeric_limits<double>::infinity())),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_value(Value(std::string("a\0", 2))), sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_value(Value("\xe2\x82")), sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_value(Value::object({{"\xff", 1}})), sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_value(Value::binary({1, 2})), sp::InvalidArgumentError);

  auto nested = [](std::size_t levels) {
    Value v = 1;
    for (std::size_t i = 0; i < levels; ++i) v = Value::array({v});
    return v;
  };
  CHECK_NOTHROW(validate_value(nested(sp::detail::max_value_depth)));
  CHECK_THROWS_AS(validate_value(nested(sp::detail::max_value_depth + 1)),
                  sp::InvalidArgumentError);

  // The size is the JSON text's, exactly at the limit: the walk's bound is loose, dump() decides.
  const std::size_t max = sp::detail::max_value_bytes;
  Value at_limit = std::string(max - 2, 'x');  // two quotes
  CHECK(at_limit.dump().size() == max);
  CHECK(validate_value(at_limit) == max);
  CHECK_THROWS_AS(validate_value(Value(std::string(max - 1, 'x'))), sp::InvalidArgumentError);
  Value escapes = std::string(max / 2 - 1, '"');  // each '"' is two bytes of JSON: at the limit
  CHECK(validate_value(escapes) == max);
  escapes = std::string(max / 2, '"');  // two bytes over
  CHECK_THROWS_AS(validate_value(escapes), sp::InvalidArgumentError);
}

TEST_CASE("durations: positive and at most their documented bound", "[unit][validate]") {
  using sp::detail::validate_duration;
  using std::chrono::milliseconds;
  CHECK_NOTHROW(validate_duration("lock_timeout", milliseconds(1), sp::detail::max_timeout));
  CHECK_NOTHROW(
      validate_duration("lock_timeout", sp::detail::max_timeout, sp::detail::max_timeout));
  CHECK_THROWS_AS(validate_duration("lock_timeout", milliseconds(0), sp::detail::max_timeout),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_duration("lock_timeout", sp::detail::max_timeout + milliseconds(1),
                                    sp::detail::max_timeout),
                  sp::InvalidArgumentError);
  // 300 years of retention once overflowed into "already expired".
  CHECK_THROWS_AS(sp::MemoryOptions().idempotency_retention(std::chrono::hours(24 * 365 * 300)),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(
      sp::SessionOptions("a").resource("r").lock_timeout(std::chrono::hours(2)).normalize(),
      sp::InvalidArgumentError);
}

TEST_CASE("a commit request is checked before any I/O", "[unit][validate]") {
  using sp::detail::validate_commit;
  sp::CommitRequest req;
  req.agent_id = "agent";
  req.resources = {"a", "b"};
  req.fences.push_back(sp::FenceCheck{"a", 3});
  req.checks.push_back(sp::ReadCheck{"b", "k", 1});
  req.writes.push_back(sp::WriteOp{"a", "k", sp::Value(1)});
  req.writes.push_back(sp::WriteOp{"b", "k", std::nullopt});  // an erase
  CHECK_NOTHROW(validate_commit(req));

  auto broken = [&](auto change) {
    sp::CommitRequest r = req;
    change(r);
    return r;
  };
  CHECK_THROWS_AS(validate_commit(broken([](auto& r) { r.agent_id = ""; })),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_commit(broken([](auto& r) { r.resources.clear(); })),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_commit(broken([](auto& r) { r.fences[0].token = 0; })),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_commit(broken([](auto& r) { r.fences[0].resource = "c"; })),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_commit(broken([](auto& r) { r.checks[0].resource = "c"; })),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_commit(broken([](auto& r) { r.writes[0].resource = "c"; })),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_commit(broken([](auto& r) { r.writes[0].key = "a\nb"; })),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_commit(broken([](auto& r) { r.writes[0].value = std::nan(""); })),
                  sp::InvalidArgumentError);
  CHECK_THROWS_AS(
      validate_commit(broken([](auto& r) { r.idempotency_key = std::string(300, 'k'); })),
      sp::InvalidArgumentError);
  CHECK_THROWS_AS(validate_commit(broken([](auto& r) {
                    for (int i = 0; i < 17; ++i)
                      r.writes.push_back(
                          sp::WriteOp{"a", "big" + std::to_string(i), std::string(1000000, 'x')});
                  })),
                  sp::InvalidArgumentError);
}

TEST_CASE("error fields name what they are", "[unit][errors]") {
  auto fenced = sp::LeaseLostError::fenced_commit("job-42", "agent-7", 3, 5);
  CHECK(fenced.agent_id() == "agent-7");
  CHECK(fenced.owner().empty());
  CHECK(fenced.token() == 3);
  CHECK(fenced.current_fence() == 5);
  CHECK(std::string(fenced.what()).find("agent 'agent-7'") != std::string::npos);
  sp::LeaseLostError renewal("job-42", "worker-a", 3, 5, "superseded");
  CHECK(renewal.owner() == "worker-a");
  CHECK(renewal.agent_id().empty());
  sp::FenceRequiredError required("job-42", "agent-7");
  CHECK(required.code() == sp::ErrorCode::fence_required);
  CHECK(!required.retryable());
  CHECK(std::string(sp::to_string(required.code())) == "fence_required");
  CHECK(std::string(required.what()).find(".fence(") != std::string::npos);
}
