// How `canopy stack` turns one thread's frames into a path of the merged call tree
// (docs/stack.md): the names users read, and where a path stops.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace canopy::stack {

struct PathOptions {
  // Keep the frames inside the MPI library (below the first MPI_ call). Off by
  // default: ranks waiting in the same MPI call differ there only in which progress
  // function the sample caught, which would split one class into several.
  bool mpi_internals = false;
};

// The function name of a frame: the frame without a " (file:line)" suffix.
std::string_view function_of(std::string_view frame);

// One thread's frames, outermost first, as a path of the merged tree: an MPI entry
// point reached through its profiling name (PMPI_Barrier, which Open MPI's
// MPI_Barrier is an alias of) is named by its MPI_ name, and unless
// `options.mpi_internals` the path ends at the first MPI_ frame.
std::vector<std::string> shape_path(std::vector<std::string> frames, const PathOptions& options);

}  // namespace canopy::stack
