#include "mrnet/attach_place.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace MRN::layer {

std::string attach_dir() {
  if (const char* dir = std::getenv("CANOPY_ATTACH_DIR"); dir && *dir) return dir;
  if (const char* home = std::getenv("HOME"); home && *home) return std::string(home) + "/.canopy/attach";
  return {};
}

canopy::Result<std::string> make_attach_dir() {
  const std::string dir = attach_dir();
  if (dir.empty()) return canopy::Error{"neither CANOPY_ATTACH_DIR nor HOME is set: no directory for the attach file"};
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return canopy::Error{"cannot make " + dir + ": " + ec.message()};
  ::chmod(dir.c_str(), 0700);  // only the user's processes find the secret
  return dir;
}

std::string attach_place(const std::string& host, const std::string& port) {
  return attach_dir() + "/" + host + ":" + port;
}

canopy::Result<std::vector<std::string>> make_attach_places(const canopy::Topology& topology,
                                                           const std::string& attach_file) {
  namespace fs = std::filesystem;
  auto made = make_attach_dir();
  if (!made) return canopy::Error{made.error()};
  const std::string dir = *made;
  std::vector<std::string> places;
  // Relative when the file is in the directory: the same on every host sharing it.
  const fs::path file(attach_file);
  const std::string target = fs::absolute(file).parent_path() == fs::absolute(dir) ? file.filename().string()
                                                                                   : fs::absolute(file).string();
  for (const auto& n : topology.nodes()) {
    if (n.role != canopy::Role::commnode ||
        std::any_of(n.children.begin(), n.children.end(),
                    [&](canopy::Rank c) { return topology.at(c).role == canopy::Role::commnode; })) {
      continue;
    }
    const std::string place = attach_place(n.host, std::to_string(n.port));
    ::unlink(place.c_str());  // a name left by a front-end killed earlier
    if (::symlink(target.c_str(), place.c_str()) != 0) {
      const std::string why = std::strerror(errno);
      remove_attach_places(places, attach_file);
      return canopy::Error{"cannot link " + place + " to the attach file: " + why};
    }
    places.push_back(place);
  }
  return places;
}

void remove_attach_places(const std::vector<std::string>& places, const std::string& attach_file) {
  namespace fs = std::filesystem;
  for (const auto& place : places) {
    std::error_code ec;
    const fs::path target = fs::read_symlink(place, ec);
    if (ec) continue;
    const fs::path resolved = target.is_absolute() ? target : fs::path(place).parent_path() / target;
    if (fs::absolute(resolved) == fs::absolute(attach_file)) ::unlink(place.c_str());
  }
}

}  // namespace MRN::layer
