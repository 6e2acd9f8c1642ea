#include "programs.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <system_error>

namespace canopy::frontend {

std::string self_directory() {
  char buf[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return {};
  buf[n] = 0;
  return std::filesystem::path(buf).parent_path().string();
}

std::string find_commnode(const std::string& given) {
  if (!given.empty()) return given;
  if (const char* env = std::getenv("CANOPY_COMMNODE"); env && *env) return env;
  auto sibling = std::filesystem::path(self_directory()) / "canopy-commnode";
  if (access(sibling.c_str(), X_OK) == 0) return sibling.string();
  return "canopy-commnode";
}

bool on_path(const std::string& name) {
  const char* path = std::getenv("PATH");
  std::string_view dirs = path ? path : "";
  while (true) {
    const auto colon = dirs.find(':');
    std::string dir(dirs.substr(0, colon));
    if (access(((dir.empty() ? std::string(".") : dir) + "/" + name).c_str(), X_OK) == 0) return true;
    if (colon == std::string_view::npos) return false;
    dirs.remove_prefix(colon + 1);
  }
}

std::string absolute_program(const std::string& program) {
  if (program.find('/') == std::string::npos) return program;
  std::error_code ec;
  auto abs = std::filesystem::absolute(program, ec);
  return ec ? program : abs.lexically_normal().string();
}

}  // namespace canopy::frontend
