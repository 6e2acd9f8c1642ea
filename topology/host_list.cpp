// Host lists for generated trees: "node01:4,node02:4" or a host file.
#include <algorithm>
#include <cctype>
#include <charconv>
#include <unordered_map>

#include "canopy/topology.h"

namespace canopy {
namespace {

// Slots beyond this are a typo: no tree Canopy generates has that many processes.
constexpr std::uint32_t kMaxSlots = 1'100'000;

bool is_host_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

}  // namespace

Result<std::vector<HostSlots>> parse_host_list(std::string_view text, std::string_view source) {
  const bool several_lines = text.find('\n') != std::string_view::npos && text.find('\n') + 1 < text.size();
  std::vector<HostSlots> hosts;
  std::unordered_map<std::string, std::size_t> position;
  std::vector<std::pair<std::string, std::uint32_t>> entries;
  int line = 1;
  auto error = [&](const std::string& problem) {
    std::string where(source);
    if (several_lines) where += ":" + std::to_string(line);
    return Error{where + ": " + problem};
  };
  for (std::size_t at = 0; at < text.size();) {
    char c = text[at];
    if (c == '\n') {
      ++line;
      ++at;
      continue;
    }
    if (c == ' ' || c == '\t' || c == '\r' || c == ',') {
      ++at;
      continue;
    }
    if (c == '#') {
      while (at < text.size() && text[at] != '\n') ++at;
      continue;
    }
    std::size_t end = at;
    while (end < text.size() && !std::isspace(static_cast<unsigned char>(text[end])) && text[end] != ',' &&
           text[end] != '#') {
      ++end;
    }
    std::string_view entry = text.substr(at, end - at);
    at = end;
    std::string_view name = entry.substr(0, entry.find(':'));
    bool valid_name = !name.empty() && std::isalnum(static_cast<unsigned char>(name.front()));
    for (char n : name) valid_name = valid_name && is_host_char(n);
    if (!valid_name) {
      return error("bad host '" + std::string(entry) +
                   "': a host is a name of letters, digits, '.', '-' and '_', then optionally ':slots'");
    }
    std::uint32_t slots = 0;  // no count given
    if (name.size() < entry.size()) {
      std::string_view count = entry.substr(name.size() + 1);
      auto [stop, ec] = std::from_chars(count.data(), count.data() + count.size(), slots);
      if (ec != std::errc() || stop != count.data() + count.size() || slots == 0 || slots > kMaxSlots) {
        return error("bad slot count '" + std::string(count) + "' in '" + std::string(entry) +
                     "': a whole number from 1 to " + std::to_string(kMaxSlots));
      }
    }
    entries.emplace_back(std::string(name), slots);
  }
  if (entries.empty()) return Error{std::string(source) + ": the host list is empty; give host or host:slots entries"};
  // In a list with counts, an entry without one takes one slot.
  const bool counts = std::any_of(entries.begin(), entries.end(), [](const auto& e) { return e.second > 0; });
  for (auto& [name, slots] : entries) {
    if (counts && slots == 0) slots = 1;
    auto [it, fresh] = position.try_emplace(name, hosts.size());
    if (fresh) {
      hosts.push_back({name, slots});
    } else {
      HostSlots& host = hosts[it->second];
      host.slots = static_cast<std::uint32_t>(std::min<std::uint64_t>(std::uint64_t{host.slots} + slots, kMaxSlots));
    }
  }
  return hosts;
}

}  // namespace canopy
