#include "mrnet/assignment.h"

#include <algorithm>
#include <cstdlib>
#include <sstream>

namespace MRN::layer {

std::optional<Assignment> parse_assignment(const std::string& text) {
  Assignment out;
  std::istringstream in(text);
  std::string statement;
  while (std::getline(in, statement, ';')) {
    if (statement.find_first_not_of(" \t\n") == std::string::npos) continue;
    const auto arrow = statement.find("=>");
    if (arrow == std::string::npos) return std::nullopt;
    char* end = nullptr;
    const long id = std::strtol(statement.c_str(), &end, 10);
    if (end == statement.c_str() || statement.find_first_not_of(" \t\n", end - statement.c_str()) != arrow) {
      return std::nullopt;
    }
    std::string targets = statement.substr(arrow + 2);
    std::replace(targets.begin(), targets.end(), ',', ' ');
    std::istringstream each(targets);
    std::string target;
    bool any = false;
    while (each >> target) {
      any = true;
      if (target == "*") {
        if (!out.others) out.others = static_cast<int>(id);
        continue;
      }
      const unsigned long rank = std::strtoul(target.c_str(), &end, 10);
      if (*end || target.find('-') != std::string::npos) return std::nullopt;
      out.nodes.emplace(static_cast<Rank>(rank), static_cast<int>(id));  // the first naming it stands
    }
    if (!any) return std::nullopt;
  }
  return out;
}

}  // namespace MRN::layer
