// A plain libpqxx connection for integration tests: what an operator would do to the server
// (terminate connections, hold a row lock) while the backend runs.
#pragma once

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <pqxx/pqxx>

#include "../conformance/postgres_fixture.hpp"

namespace statepact::test {

inline std::string unique_application_name(const std::string& base) {
  return base + "-" + run_suffix();
}

class PostgresAdmin {
 public:
  PostgresAdmin() : conn_(postgres_test_url()) {}

  // Ends every connection of the backends named `app`; returns how many were ended.
  int terminate(const std::string& app) {
    pqxx::nontransaction n(conn_);
    auto r = n.exec_params(
        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
        "WHERE application_name = $1 AND pid <> pg_backend_pid()",
        app);
    return r.at(0)[0].as<int>();
  }

  // The statements last run on the connections of `app`, one per connection.
  std::vector<std::string> last_queries(const std::string& app) {
    pqxx::nontransaction n(conn_);
    std::vector<std::string> out;
    for (const auto& row :
         n.exec_params("SELECT query FROM pg_stat_activity WHERE application_name = $1", app))
      out.push_back(row[0].as<std::string>());
    return out;
  }

  int connections(const std::string& app) {
    pqxx::nontransaction n(conn_);
    return n.exec_params("SELECT count(*) FROM pg_stat_activity WHERE application_name = $1", app)
        .at(0)[0]
        .as<int>();
  }

  // Waits until a connection of `app` waits for a lock (a commit blocked behind ours).
  bool wait_for_lock_waiter(const std::string& app, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
      pqxx::nontransaction n(conn_);
      auto r = n.exec_params(
          "SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 "
          "AND wait_event_type = 'Lock'",
          app);
      if (r.at(0)[0].as<int>() > 0) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  pqxx::connection& connection() { return conn_; }

 private:
  pqxx::connection conn_;
};

}  // namespace statepact::test
