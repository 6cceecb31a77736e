/// @file
/// The whole core: leases and fencing, sessions, retries, and the in-process memory backend.
/// Header-only; never pulls in libpqxx or hiredis (those are <statepact/postgres.hpp>,
/// <statepact/redis.hpp>).
#pragma once

#include <statepact/backend.hpp>
#include <statepact/backends/memory.hpp>
#include <statepact/commit_request.hpp>
#include <statepact/errors.hpp>
#include <statepact/lease_manager.hpp>
#include <statepact/manager.hpp>
#include <statepact/observer.hpp>
#include <statepact/retry.hpp>
#include <statepact/session.hpp>
#include <statepact/session_options.hpp>
#include <statepact/types.hpp>
