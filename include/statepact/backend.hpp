/// @file
/// The backend concept: what storage must offer for leases, fencing and sessions. Each operation is
/// at most one round trip to storage. docs/backend-concept.md states the contract of each in words.
#pragma once

#include <concepts>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <asio/awaitable.hpp>

#include <statepact/commit_request.hpp>
#include <statepact/types.hpp>

namespace statepact {

/// What storage must offer for leases, fencing and sessions (Manager, Session and LeaseManager are
/// templates on it): every operation returns an asio::awaitable, is atomic, and is at most one
/// round trip for a server backend; end_session is a plain noexcept call. docs/backend-concept.md
/// gives the contract of each; MemoryBackend, PostgresBackend and RedisBackend model it.
template <class B>
concept Backend = requires(B& b, const Lease& lease, std::string s, milliseconds ttl,
                           std::optional<milliseconds> maybe_ttl, Value v,
                           std::vector<std::string> names, CommitRequest req, SessionId id,
                           LockMode mode, ResourcePolicy policy) {
  // Leases and fencing.
  { b.acquire_lease(s, s, ttl) } -> std::same_as<asio::awaitable<Lease>>;
  { b.renew_lease(lease, maybe_ttl) } -> std::same_as<asio::awaitable<Lease>>;
  { b.release_lease(lease) } -> std::same_as<asio::awaitable<bool>>;
  { b.current_fence(s) } -> std::same_as<asio::awaitable<Token>>;
  // State.
  // Registration creates the resource with its policy in one step; an existing one is unchanged.
  { b.register_resource(s, v) } -> std::same_as<asio::awaitable<bool>>;
  { b.register_resource(s, v, policy) } -> std::same_as<asio::awaitable<bool>>;
  { b.set_resource_policy(s, policy) } -> std::same_as<asio::awaitable<void>>;
  { b.resource_policy(s) } -> std::same_as<asio::awaitable<ResourcePolicy>>;
  { b.read(s, s) } -> std::same_as<asio::awaitable<Entry>>;
  { b.snapshot(names) } -> std::same_as<asio::awaitable<std::vector<ResourceSnapshot>>>;
  // Sessions: begin checks the resources exist (a server backend may skip names it has seen
  // registered: resources are never removed, and commits check again); lock waits up to the timeout
  // and returns the key's latest entry under the lock; end releases whatever the session still
  // holds, without waiting.
  { b.begin_session(names, Isolation::none) } -> std::same_as<asio::awaitable<SessionId>>;
  { b.lock(id, s, s, mode, ttl) } -> std::same_as<asio::awaitable<Entry>>;
  { b.end_session(id) }
  noexcept;
  { b.commit(req) } -> std::same_as<asio::awaitable<CommitResult>>;
  // How long storage keeps an applied commit's idempotency record: a commit of unknown outcome is
  // resent only while the record surely still exists (detail/unknown_outcome.hpp).
  { std::as_const(b).idempotency_retention() } -> std::same_as<milliseconds>;
};

/// Optional: a backend whose state operations never wait on I/O (the memory backend) may also offer
/// them as plain calls. Sessions then call those directly and skip a coroutine frame per operation;
/// a pessimistic lock is tried with try_lock_now() and only waited for through lock().
template <class B>
concept InlineBackend = Backend<B> &&
    requires(B& b, const std::string& s, const std::vector<std::string>& names, CommitRequest req) {
  { b.begin_session_now(names, Isolation::none) } -> std::same_as<SessionId>;
  { b.read_now(s, s) } -> std::same_as<Entry>;
  { b.snapshot_now(names) } -> std::same_as<std::vector<ResourceSnapshot>>;
  { b.commit_now(std::move(req)) } -> std::same_as<CommitResult>;
  { b.try_lock_now(SessionId{}, s, s, LockMode::shared) } -> std::same_as<std::optional<Entry>>;
};

}  // namespace statepact
