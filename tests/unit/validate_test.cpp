#include <catch2/catch.hpp>

#include <statepact/detail/validate.hpp>
#include <statepact/errors.hpp>

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
