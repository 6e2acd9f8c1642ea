#include "core/parent_link.h"

#include "core/log.h"
#include "topology/decimal.h"
#include "transport/random.h"

#include <charconv>
#include <sstream>

namespace canopy::core {

transport::StripedOptions striped_options(const LinkSettings& links) {
  transport::StripedOptions options;
  switch (links.checksum) {
    case LinkChecksum::crc32c: options.checksum = transport::ChecksumKind::crc32c; break;
    case LinkChecksum::additive: options.checksum = transport::ChecksumKind::additive; break;
    case LinkChecksum::none: options.checksum = transport::ChecksumKind::none; break;
  }
  options.reliable = links.reliable;
  options.corrupt_fraction = links.corrupt_fraction;
  // Every process of a tree corrupts differently.
  options.fault_seed = transport::random_u64();
  options.log = logger();  // the process's log, also when taken before init_logging()
  return options;
}

std::string encode_parent_link(const LinkSettings& links, const std::vector<transport::PathEndpoints>& paths) {
  std::string text = "checksum=" + std::string(to_string(links.checksum)) + " reliable=" +
                     (links.reliable ? "1" : "0") + " corrupt=" + canopy::topology::format_double(links.corrupt_fraction) +
                     " paths=";
  for (std::size_t i = 0; i < paths.size(); ++i) {
    text += (i ? "," : "") + paths[i].local_address + ">" + paths[i].remote_address;
  }
  return text;
}

std::string parent_link_for(const Topology& topology, const TopologyNode& child, const TopologyNode& parent, std::uint16_t port) {
  if (topology.link_between(child, parent) != LinkKind::striped) return {};
  return encode_parent_link(topology.links(),
                            transport::paths_between(topology.nics_of(child.host), topology.nics_of(parent.host), port));
}

Result<ParentLink> parent_link_from(const char* parent, const char* parent_link) {
  ParentLink link;
  std::string endpoint = parent ? parent : "";
  auto colon = endpoint.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return Error{std::string(kEnvParent) + "='" + endpoint + "' is not address:port"};
  }
  unsigned port = 0;
  auto [end, ec] = std::from_chars(endpoint.data() + colon + 1, endpoint.data() + endpoint.size(), port);
  if (ec != std::errc() || end != endpoint.data() + endpoint.size() || port == 0 || port > 65535) {
    return Error{std::string(kEnvParent) + "='" + endpoint + "' has no valid port"};
  }
  link.address = endpoint.substr(0, colon);
  link.port = static_cast<std::uint16_t>(port);
  if (!parent_link || !*parent_link) return link;

  auto bad = [&](const std::string& why) {
    return Error{std::string(kEnvParentLink) + "='" + parent_link + "': " + why};
  };
  LinkSettings settings;
  std::istringstream words(parent_link);
  std::string word;
  while (words >> word) {
    auto eq = word.find('=');
    if (eq == std::string::npos) return bad("'" + word + "' is not key=value");
    std::string key = word.substr(0, eq), value = word.substr(eq + 1);
    if (key == "checksum") {
      auto checksum = link_checksum_from(value);
      if (!checksum) return bad("unknown checksum '" + value + "'");
      settings.checksum = *checksum;
    } else if (key == "reliable" && (value == "0" || value == "1")) {
      settings.reliable = value == "1";
    } else if (key == "corrupt") {
      const auto fraction = canopy::topology::parse_double(value);
      if (!fraction || !(*fraction >= 0) || *fraction >= 1) return bad("corrupt must be a fraction in [0, 1)");
      settings.corrupt_fraction = *fraction;
    } else if (key == "paths") {
      std::istringstream list(value);
      std::string pair;
      while (std::getline(list, pair, ',')) {
        auto arrow = pair.find('>');
        if (arrow == std::string::npos || arrow == 0 || arrow + 1 == pair.size()) {
          return bad("path '" + pair + "' is not LOCAL>REMOTE");
        }
        link.paths.push_back({pair.substr(0, arrow), pair.substr(arrow + 1), link.port});
      }
    } else {
      return bad("unknown key '" + key + "'");
    }
  }
  if (link.paths.empty()) return bad("no paths");
  link.striped = striped_options(settings);
  return link;
}

}  // namespace canopy::core
