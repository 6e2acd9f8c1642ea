// The merged call tree of `canopy stack` as people and scripts read it
// (docs/stack.md): an indented text tree with rank ranges, the equivalence classes,
// JSON, and Graphviz DOT (CallTree::to_dot). Pure functions over a CallTree.
#pragma once

#include <string>
#include <vector>

#include "canopy/call_tree.h"

namespace canopy::stack {

// Ranks that share where their paths end: the ranks that reach a frame and go no
// deeper (in no child of it), with the path to that frame, outermost first. A rank
// sampled in several places (threads, samples) is in several classes.
struct EquivalenceClass {
  std::vector<Rank> ranks;
  std::vector<std::string> path;
};

// Largest class first, then by path.
std::vector<EquivalenceClass> equivalence_classes(const CallTree& tree);

// "MPI_Barrier ← main": the path innermost first, from its last frame up to `main`
// (the frames of the C runtime above main say nothing), or to the outermost frame if
// there is no main.
std::string describe_path(const std::vector<std::string>& path);

// One line per frame, children indented by two spaces under their parent, each
// with its rank set as ranges: "main [0-7]", then a blank line and the classes:
// "7 ranks [0-2,4-7]: MPI_Barrier ← main".
std::string to_text(const CallTree& tree);

// {"ranks":"0-7","count":8,"tree":{"name":"","ranks":"0-7","count":8,"children":[...]},
//  "classes":[{"ranks":"0-2,4-7","count":7,"path":["_start",...,"MPI_Barrier"]},...]}
// `extra`, if not empty, is inserted as members after the opening brace (e.g.
// "\"samples\":3,"), so callers can add what they know.
std::string to_json(const CallTree& tree, const std::string& extra = "");

}  // namespace canopy::stack
