// Connection strings in messages: which parts are secret, and text with them left out. Pure (no
// libpqxx), so unit tests compile it.
#pragma once

#include <string>
#include <vector>

namespace statepact::detail::pg {

// The passwords a connection string holds (as written and percent-decoded), so that messages can
// leave them out: libpq quotes parts of a malformed string in its own messages.
std::vector<std::string> conninfo_secrets(const std::string& conninfo);
// `text` with every secret replaced by "***".
std::string redact(std::string text, const std::vector<std::string>& secrets);

}  // namespace statepact::detail::pg
