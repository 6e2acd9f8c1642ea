// MRNet's per-node filter assignment strings (Network::new_Stream with strings),
// read into each node's filter id.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "mrnet/Types.h"

namespace MRN::layer {

// MRNet's per-node filter assignment (the grammar of MRNet's Stream.C): statements
// "ID => TARGET;", TARGET a node's rank or '*' for every node not named; the first
// statement naming a node gives its filter. Canopy also takes several ranks in one
// statement (separated by commas or spaces) and a last statement without ';'.
struct Assignment {
  std::optional<int> others;   // '*'
  std::map<Rank, int> nodes;
  // The one filter it gives every node, `fallback` if it gives none, nothing if it
  // gives different ones.
  std::optional<int> uniform(int fallback) const {
    std::optional<int> one = others;
    for (const auto& [rank, id] : nodes) {
      if (one && *one != id) return std::nullopt;
      one = id;
    }
    return one.value_or(fallback);
  }
};

std::optional<Assignment> parse_assignment(const std::string& text);

}  // namespace MRN::layer
