// Redis Cluster's hash slots: which of the 16384 slots a key lives in, computed as the server
// computes it (CRC16 XMODEM of the key, or of its hash tag), so routing needs no round trip and is
// tested without a server.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace statepact::detail {

inline constexpr int cluster_slot_count = 16384;

namespace crc16_impl {
constexpr std::array<std::uint16_t, 256> make_table() {
  std::array<std::uint16_t, 256> table{};
  for (unsigned i = 0; i < 256; ++i) {
    auto crc = static_cast<std::uint16_t>(i << 8);
    for (int bit = 0; bit < 8; ++bit)
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<std::uint16_t>(crc << 1);
    table[i] = crc;
  }
  return table;
}
inline constexpr auto table = make_table();
}  // namespace crc16_impl

// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0), the checksum cluster slots use.
constexpr std::uint16_t crc16(std::string_view data) {
  std::uint16_t crc = 0;
  for (unsigned char c : data)
    crc = static_cast<std::uint16_t>((crc << 8) ^ crc16_impl::table[((crc >> 8) ^ c) & 0xFF]);
  return crc;
}

// The part of a key that decides its slot: what lies between the first '{' and the first '}'
// after it, when that is not empty; otherwise the whole key.
constexpr std::string_view hash_tag(std::string_view key) {
  const auto open = key.find('{');
  if (open == std::string_view::npos) return key;
  const auto close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

constexpr int key_slot(std::string_view key) {
  return crc16(hash_tag(key)) & (cluster_slot_count - 1);
}

}  // namespace statepact::detail
