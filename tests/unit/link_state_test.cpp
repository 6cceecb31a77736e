// A Redis connection's life and setup with no socket: when requests may be sent, which refusal
// is reported, and whether requests held for the setup start over when the connection closes.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include "link_state.hpp"  // src/redis

namespace d = statepact::detail;

namespace {

std::exception_ptr link_refusal(const char* what) {
  return std::make_exception_ptr(std::runtime_error(what));
}

std::string link_error_text(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  }
}

}  // namespace

TEST_CASE("link state: no setup steps means ready at once, before the connect completes",
          "[link_state][redis]") {
  d::LinkState link;
  CHECK(link.alive());
  CHECK(link.ready());
  CHECK_FALSE(link.connected());
  link.connect_completed();
  CHECK(link.connected());
  link.closed();
  CHECK_FALSE(link.alive());
  CHECK_FALSE(link.ready());
  CHECK(link.connected());  // a loss after the connect: what was queued may have been sent
}

TEST_CASE("link state: requests wait until every setup step answered well", "[link_state][redis]") {
  d::LinkState link;
  link.setup_queued();  // AUTH
  link.setup_queued();  // SELECT
  link.setup_queued();  // the eviction check
  CHECK_FALSE(link.ready());
  link.connect_completed();
  CHECK_FALSE(link.setup_answered(nullptr));
  CHECK_FALSE(link.setup_answered(nullptr));
  CHECK_FALSE(link.ready());
  CHECK(link.setup_answered(nullptr));
  CHECK(link.ready());
  CHECK_FALSE(link.setup_error());
  // An answer nobody waits for (the count is at zero) changes nothing.
  CHECK_FALSE(link.setup_answered(nullptr));
  CHECK(link.ready());
}

TEST_CASE("link state: the first refused step is reported, and the link never becomes ready",
          "[link_state][redis]") {
  d::LinkState link;
  link.setup_queued();
  link.setup_queued();
  link.connect_completed();
  CHECK_FALSE(link.setup_answered(link_refusal("NOAUTH")));
  CHECK(link.setup_answered(link_refusal("ERR DB index is out of range")));
  CHECK_FALSE(link.ready());
  REQUIRE(link.setup_error());
  CHECK(link_error_text(link.setup_error()) == "NOAUTH");
  // Refused: the held requests fail, whatever else holds.
  link.closed();
  CHECK_FALSE(link.restart_waiting(false));
}

TEST_CASE("link state: a step that could not be queued fails the link", "[link_state][redis]") {
  d::LinkState link;
  link.setup_not_queued(link_refusal("the connection is closing"));
  CHECK_FALSE(link.ready());
  REQUIRE(link.setup_error());
  CHECK(link_error_text(link.setup_error()) == "the connection is closing");
}

TEST_CASE("link state: held requests start over only after a lost (not refused) setup",
          "[link_state][redis]") {
  SECTION("lost after connecting: start over") {
    d::LinkState link;
    link.setup_queued();
    link.connect_completed();
    link.closed();
    CHECK(link.restart_waiting(false));
    CHECK_FALSE(link.restart_waiting(true));  // the backend is shutting down
  }
  SECTION("never connected: the server is not there, so they fail") {
    d::LinkState link;
    link.setup_queued();
    link.closed();
    CHECK_FALSE(link.restart_waiting(false));
  }
}
