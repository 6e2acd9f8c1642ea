// The merged call tree of `canopy stack` as people and scripts read it
// (docs/stack.md): an indented text tree with rank ranges, the equivalence classes,
// JSON, and Graphviz DOT to hand on (to_dot: a title, a legend of the classes, a
// colour per class). Pure functions over a CallTree.
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

// What the title of a drawing says about the job; tools/stack_command.cpp fills it.
struct Heading {
  std::string job;      // the root's label: "mpirun 27420", "Slurm job 12"
  std::string command;  // the launcher's command line ("mpirun -np 8 ./app"), or ""
  std::string when;     // when the stacks were taken: "2026-11-29 17:56:41 UTC"
  std::size_t hosts = 1;
  unsigned samples = 1;
  std::string found;    // how the ranks were found ("from mpirun's MPIR table"), or ""
  std::string missing;  // the ranks of the job the tree lacks, as ranges, or ""
};

// The colours of class `index` of equivalence_classes() (largest first) as Graphviz
// takes them: `line` for its nodes' borders, its edges and its legend swatch, `fill`
// (a light tint of it) inside its nodes. The largest class is blue, the next ones
// (the outliers) red, orange, green, purple, ..., each its own; past the nine
// named, hues spread by the golden angle.
struct ClassColour {
  std::string line, fill;
};
ClassColour class_colour(std::size_t index);

// Graphviz DOT of the tree to hand on:
//  - the title (Heading) and, under it, the legend: one row per class, its colour,
//    its ranks as ranges and where they stop ("7 ranks [0-2,4-7]  MPI_Barrier ← main");
//  - the root labelled by the job ("mpirun 27420\n8 ranks") rather than "/";
//  - one node per frame and an edge into it labelled with its ranks ("7:[0-2,4-7]");
//    a node (and the edge into it) that only one class's ranks reach or stop at is
//    drawn in that class's colour, a node shared by several classes in grey (as STAT
//    colours a node by its task set).
std::string to_dot(const CallTree& tree, const Heading& heading);

}  // namespace canopy::stack
