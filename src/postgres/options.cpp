#include <fmt/format.h>

#include <statepact/backends/postgres.hpp>
#include <statepact/detail/validate.hpp>
#include <statepact/errors.hpp>

namespace statepact {

PostgresOptions& PostgresOptions::pool_size(std::size_t n) {
  if (n == 0) throw InvalidArgumentError("pool size must be at least 1");
  pool_size_ = n;
  return *this;
}

PostgresOptions& PostgresOptions::schema(std::string name) {
  detail::validate_name("schema name", name);
  schema_ = std::move(name);
  return *this;
}

PostgresOptions& PostgresOptions::statement_timeout(milliseconds d) {
  detail::validate_duration("statement timeout", d, detail::max_timeout);
  statement_timeout_ = d;
  return *this;
}

PostgresOptions& PostgresOptions::lock_timeout(milliseconds d) {
  detail::validate_duration("lock timeout", d, detail::max_timeout);
  lock_timeout_ = d;
  return *this;
}

PostgresOptions& PostgresOptions::deadlock_timeout(milliseconds d) {
  detail::validate_duration("deadlock timeout", d, detail::max_timeout);
  deadlock_timeout_ = d;
  return *this;
}

PostgresOptions& PostgresOptions::connect_timeout(milliseconds d) {
  detail::validate_duration("connect timeout", d, detail::max_timeout);
  connect_timeout_ = d;
  return *this;
}

PostgresOptions& PostgresOptions::call_timeout(milliseconds d) {
  detail::validate_duration("call timeout", d, detail::max_timeout);
  call_timeout_ = d;
  return *this;
}

PostgresOptions& PostgresOptions::idempotency_retention(milliseconds d) {
  detail::validate_duration("idempotency retention", d, detail::max_idempotency_retention);
  retention_ = d;
  return *this;
}

PostgresOptions& PostgresOptions::application_name(std::string name) {
  detail::validate_name("application name", name);
  application_name_ = std::move(name);
  return *this;
}

PostgresOptions& PostgresOptions::known_resources(std::size_t n) {
  known_resources_ = n;
  return *this;
}

PostgresOptions& PostgresOptions::max_pessimistic_sessions(std::size_t n) {
  if (n == 0) throw InvalidArgumentError("max_pessimistic_sessions must be at least 1");
  max_pessimistic_sessions_ = n;
  return *this;
}

PostgresOptions& PostgresOptions::idle_in_transaction_timeout(milliseconds d) {
  detail::validate_duration("idle_in_transaction_timeout", d, detail::max_timeout);
  idle_in_transaction_timeout_ = d;
  return *this;
}

}  // namespace statepact
