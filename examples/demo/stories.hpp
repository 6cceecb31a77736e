// The demo's three stories, each printing what happens and why.
#pragma once

#include <asio/awaitable.hpp>

namespace demo {

// The classic fencing interleaving: a paused owner wakes after a takeover. With and without a
// fence.
asio::awaitable<void> fencing_story();
// Five agents race for the last item in stock, under each isolation mode.
asio::awaitable<void> stock_race();
// Two doctors go off call at once: write skew under snapshot, prevented by serializable.
asio::awaitable<void> write_skew();

}  // namespace demo
