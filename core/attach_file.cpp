#include "core/attach_file.h"

#include <algorithm>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <unordered_map>

namespace canopy::attach {

namespace {

std::vector<std::string_view> words_of(std::string_view line) {
  std::vector<std::string_view> out;
  std::size_t i = 0;
  auto space = [](char c) { return c == ' ' || c == '\t' || c == '\r'; };
  while (i < line.size()) {
    while (i < line.size() && space(line[i])) ++i;
    std::size_t start = i;
    while (i < line.size() && !space(line[i])) ++i;
    if (i > start) out.push_back(line.substr(start, i - start));
  }
  return out;
}

// The whole word as a number in `base`, at most `max`.
std::optional<std::uint64_t> number(std::string_view word, int base, std::uint64_t max) {
  std::uint64_t value = 0;
  auto [end, ec] = std::from_chars(word.data(), word.data() + word.size(), value, base);
  if (word.empty() || ec != std::errc() || end != word.data() + word.size() || value > max) return std::nullopt;
  return value;
}

}  // namespace

const BackendEntry* AttachFile::find(Rank rank) const {
  for (const auto& b : backends) {
    if (b.rank == rank) return &b;
  }
  return nullptr;
}

Result<AttachFile> parse_attach_file(std::string_view text, std::string_view source) {
  AttachFile file;
  int line_number = 0;
  auto bad = [&](const std::string& why) {
    return Error{std::string(source) + ":" + std::to_string(line_number) + ": " + why, ErrorKind::invalid_input};
  };
  const std::string backend_form = "expected 'backend RANK PARENT-RANK ADDRESS PORT'";
  // What the next record must be: the header, the network id, the secret, then
  // back-ends.
  enum class Expect { header, network, secret, backends } expect = Expect::header;
  std::unordered_map<Rank, int> line_of_rank;
  constexpr std::uint64_t kMaxRank = std::numeric_limits<Rank>::max();
  while (!text.empty()) {
    auto newline = text.find('\n');
    std::string_view line = text.substr(0, newline);
    text = newline == std::string_view::npos ? std::string_view{} : text.substr(newline + 1);
    ++line_number;
    auto words = words_of(line);
    if (words.empty() || words[0][0] == '#') continue;
    const std::string key(words[0]);

    if (expect == Expect::header) {
      if (key != "canopy-attach") {
        return bad("expected the header 'canopy-attach " + std::to_string(kVersion) + "' first, found '" + key +
                   "' (is this an attach file written by canopy::Network::launch?)");
      }
      auto version = words.size() == 2 ? number(words[1], 10, 1000000) : std::nullopt;
      if (!version) return bad("expected 'canopy-attach VERSION'");
      if (*version != kVersion) {
        return bad("unsupported attach file version " + std::to_string(*version) + " (this library reads " +
                   std::to_string(kVersion) + (*version < kVersion ? ", which holds the network's secret: the "
                                                                     "front-end is of an older Canopy"
                                                                   : "") +
                   ")");
      }
      expect = Expect::network;
      continue;
    }
    if (key == "canopy-attach") return bad("a second header line");
    if (expect == Expect::network) {
      if (key != "network") return bad("expected 'network HEX' after the header, found '" + key + "'");
      if (words.size() != 2) return bad("expected 'network HEX'");
      auto id = words[1].size() <= 16 ? number(words[1], 16, std::numeric_limits<std::uint64_t>::max())
                                      : std::nullopt;
      if (!id) return bad("network id '" + std::string(words[1]) + "' is not a hexadecimal 64-bit number");
      file.network_id = *id;
      expect = Expect::secret;
      continue;
    }
    if (key == "network") return bad("a second 'network' line");
    if (expect == Expect::secret) {
      if (key != "secret") return bad("expected 'secret HEX' after the network id, found '" + key + "'");
      if (words.size() != 2) return bad("expected 'secret HEX'");
      auto secret = core::parse_secret(words[1]);
      if (!secret) return bad(secret.error());
      file.secret = *secret;
      expect = Expect::backends;
      continue;
    }
    if (key == "secret") return bad("a second 'secret' line");
    if (key == "frontend") {
      if (file.frontend) return bad("a second 'frontend' line");
      auto rank = words.size() == 2 ? number(words[1], 10, kMaxRank) : std::nullopt;
      if (!rank) return bad("expected 'frontend RANK'");
      file.frontend = static_cast<Rank>(*rank);
      continue;
    }
    if (key == "commnode") {
      if (words.size() != 4) return bad("expected 'commnode RANK ADDRESS PORT', found " + std::to_string(words.size()) +
                                        " fields");
      auto rank = number(words[1], 10, kMaxRank);
      if (!rank) return bad("commnode rank '" + std::string(words[1]) + "' is not a rank");
      auto port = number(words[3], 10, 65535);
      if (!port || *port == 0) return bad("port '" + std::string(words[3]) + "' is not a port (1 to 65535)");
      CommnodeEntry entry{static_cast<Rank>(*rank), std::string(words[2]), static_cast<std::uint16_t>(*port),
                          line_number};
      if (auto [it, fresh] = line_of_rank.emplace(entry.rank, line_number); !fresh) {
        return bad("duplicate rank " + std::to_string(entry.rank) + " (first at line " + std::to_string(it->second) +
                   ")");
      }
      file.commnodes.push_back(std::move(entry));
      continue;
    }
    if (key != "backend") return bad("unknown key '" + key + "'; " + backend_form);
    if (words.size() != 5) return bad(backend_form + ", found " + std::to_string(words.size()) + " fields");
    BackendEntry entry;
    entry.line = line_number;
    auto rank = number(words[1], 10, kMaxRank);
    if (!rank) return bad("back-end rank '" + std::string(words[1]) + "' is not a rank (0 to " +
                          std::to_string(kMaxRank) + ")");
    auto parent = number(words[2], 10, kMaxRank);
    if (!parent) return bad("parent rank '" + std::string(words[2]) + "' is not a rank");
    auto port = number(words[4], 10, 65535);
    if (!port || *port == 0) return bad("port '" + std::string(words[4]) + "' is not a port (1 to 65535)");
    entry.rank = static_cast<Rank>(*rank);
    entry.parent = static_cast<Rank>(*parent);
    entry.address = std::string(words[3]);
    entry.port = static_cast<std::uint16_t>(*port);
    if (auto [it, fresh] = line_of_rank.emplace(entry.rank, line_number); !fresh) {
      return bad("duplicate back-end rank " + std::to_string(entry.rank) + " (first at line " +
                 std::to_string(it->second) + ")");
    }
    file.backends.push_back(std::move(entry));
  }
  // Errors about the file as a whole name its last line (line 1 of an empty file).
  line_number = std::max(line_number, 1);
  if (expect == Expect::header) return bad("no header 'canopy-attach " + std::to_string(kVersion) + "': the file is empty");
  if (expect == Expect::network) return bad("no 'network HEX' line");
  if (expect == Expect::secret) return bad("no 'secret HEX' line");
  if (file.backends.empty() && file.commnodes.empty()) {
    return bad(file.frontend ? "no 'commnode' lines" : "no 'backend' lines");
  }
  return file;
}

Result<AttachFile> read_attach_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"cannot read attach file " + path + ": " + std::strerror(errno), ErrorKind::invalid_input};
  std::string text((std::istreambuf_iterator<char>(in)), {});
  if (in.bad()) return Error{"cannot read attach file " + path + ": " + std::strerror(errno), ErrorKind::invalid_input};
  return parse_attach_file(text, path);
}

namespace {

std::string header(std::uint64_t network_id, const core::Secret& secret) {
  char id[17];
  std::snprintf(id, sizeof id, "%016" PRIx64, network_id);
  return "canopy-attach " + std::to_string(kVersion) + "\nnetwork " + id + "\nsecret " + core::to_hex(secret) + "\n";
}

}  // namespace

std::string attach_file_text(const Topology& topology, std::uint64_t network_id, const core::Secret& secret,
                             bool open) {
  std::string text = header(network_id, secret);
  for (Rank b : topology.backends()) {
    const auto& parent = topology.at(*topology.at(b).parent);
    text += "backend " + std::to_string(b) + " " + std::to_string(parent.rank) + " " +
            topology.address_of(parent.host) + " " + std::to_string(parent.port) + "\n";
  }
  for (const auto& n : topology.nodes()) {
    if (!open || n.role != Role::commnode) continue;
    if (std::any_of(n.children.begin(), n.children.end(),
                    [&](Rank c) { return topology.at(c).role == Role::commnode; })) {
      continue;
    }
    text += "commnode " + std::to_string(n.rank) + " " + topology.address_of(n.host) + " " + std::to_string(n.port) +
            "\n";
  }
  return text;
}

std::string reattach_file_text(const Topology& topology, std::uint64_t network_id, const core::Secret& secret) {
  std::string text = header(network_id, secret);
  text += "frontend " + std::to_string(topology.root().rank) + "\n";
  for (const auto& n : topology.nodes()) {
    if (n.role != Role::commnode) continue;
    text += "commnode " + std::to_string(n.rank) + " " + topology.address_of(n.host) + " " + std::to_string(n.port) +
            "\n";
  }
  return text;
}

Result<void> write_secret_file(const std::string& path, const std::string& text, const std::string& what) {
  std::string temporary = path + ".tmp." + std::to_string(getpid());
  // O_EXCL: never write the secret into a file someone else made (and may read).
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return Error{"cannot write " + what + " " + temporary + ": " + std::strerror(errno)};
  std::string_view left = text;
  while (!left.empty()) {
    const ssize_t n = ::write(fd, left.data(), left.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      std::string why = std::strerror(errno);
      ::close(fd);
      std::remove(temporary.c_str());
      return Error{"cannot write " + what + " " + temporary + ": " + why};
    }
    left.remove_prefix(static_cast<std::size_t>(n));
  }
  ::close(fd);
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::string why = std::strerror(errno);
    std::remove(temporary.c_str());
    return Error{"cannot write " + what + " " + path + ": " + why};
  }
  return {};
}

}  // namespace canopy::attach
