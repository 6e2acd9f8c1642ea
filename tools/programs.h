// Finding the programs that come with canopy (canopy-commnode, canopy-stackd, ...).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>

namespace canopy::tools {

// `name` beside the running executable if it is there, else `name` (from PATH).
inline std::string sibling_program(const char* name) {
  char buf[4096];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return name;
  buf[n] = 0;
  const auto path = std::filesystem::path(buf).parent_path() / name;
  return access(path.c_str(), X_OK) == 0 ? path.string() : std::string(name);
}

}  // namespace canopy::tools
