/// @file
/// The Redis backend (target statepact::redis). Needs hiredis at build time of the library only.
#pragma once

#include <statepact/backends/redis.hpp>
