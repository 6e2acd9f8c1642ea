// Reading a topology file of either format: the size guard and format detection.
#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <system_error>

#include "canopy/topology.h"
#include "tree_shape.h"

namespace canopy {
namespace {

bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; }

bool is_name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_';
}

}  // namespace

TopologyFormat detect_topology_format(std::string_view text) {
  // Both formats use '#' comments. Treating every '#' as the start of one (YAML
  // does not inside quotes) errs only for a quoted "=>" after a '#' in YAML.
  bool first_word = true;
  for (std::size_t at = 0; at < text.size();) {
    char c = text[at];
    if (c == '#') {
      while (at < text.size() && text[at] != '\n') ++at;
    } else if (is_blank(c)) {
      ++at;
    } else if (c == '=' && at + 1 < text.size() && text[at + 1] == '>') {
      return TopologyFormat::mrnet;
    } else if (first_word) {
      // "host:N" with no blank after ':' is a node; YAML keys are followed by a blank.
      first_word = false;
      std::size_t end = at;
      while (end < text.size() && is_name_char(text[end])) ++end;
      if (end > at && end + 1 < text.size() && text[end] == ':' && std::isdigit(static_cast<unsigned char>(text[end + 1]))) {
        return TopologyFormat::mrnet;
      }
      at = std::max(end, at + 1);
    } else {
      ++at;
    }
  }
  return TopologyFormat::yaml;
}

Result<Topology> parse_topology(std::string_view text, std::string_view source, Leaves leaves) {
  if (text.size() > kMaxTopologyBytes) return detail::too_large(source, text.size());
  if (detect_topology_format(text) == TopologyFormat::mrnet) return parse_topology_mrnet(text, source, leaves);
  return parse_topology_yaml(text, source);
}

Result<Topology> load_topology(const std::string& path, Leaves leaves) {
  auto unreadable = [&](int error) {
    return Error{"cannot read topology file " + path + ": " + std::generic_category().message(error)};
  };
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"), &std::fclose);
  if (!file) return unreadable(errno);
  // The size first, for regular files; the reading loop also stops at the limit,
  // for pipes and devices such as /dev/zero.
  struct stat info {};
  if (fstat(fileno(file.get()), &info) == 0 && S_ISREG(info.st_mode) &&
      static_cast<std::uint64_t>(info.st_size) > kMaxTopologyBytes) {
    return detail::too_large(path, static_cast<std::size_t>(info.st_size));
  }
  std::string text;
  char buffer[1 << 16];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, file.get())) {
    text.append(buffer, n);
    if (text.size() > kMaxTopologyBytes) return detail::too_large(path, text.size());
  }
  if (std::ferror(file.get())) return unreadable(errno);
  return parse_topology(text, path, leaves);
}

}  // namespace canopy
