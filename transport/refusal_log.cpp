#include "transport/refusal_log.h"

namespace canopy::transport {

std::optional<std::size_t> RefusalLog::admit(std::string_view peer, std::string_view kind, Clock::time_point now) {
  // The port varies with every connection; the address is who retries.
  const auto colon = peer.rfind(':');
  std::string key(colon == std::string_view::npos ? peer : peer.substr(0, colon));
  key += '\n';
  key += kind;
  if (entries_.size() >= kKeys && !entries_.count(key)) entries_.clear();
  auto& entry = entries_[key];
  if (entry.logged != Clock::time_point{} && now - entry.logged < kInterval) {
    ++entry.unlogged;
    return std::nullopt;
  }
  const std::size_t unlogged = entry.unlogged;
  entry.logged = now;
  entry.unlogged = 0;
  return unlogged;
}

std::string RefusalLog::unlogged_note(std::size_t n) {
  if (n == 0) return {};
  return " (" + std::to_string(n) + " more refused from this address, not logged)";
}

}  // namespace canopy::transport
