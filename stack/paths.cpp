#include "stack/paths.h"

namespace canopy::stack {

std::string_view function_of(std::string_view frame) {
  const auto suffix = frame.find(" (");
  return suffix == std::string_view::npos ? frame : frame.substr(0, suffix);
}

std::vector<std::string> shape_path(std::vector<std::string> frames, const PathOptions& options) {
  for (std::size_t i = 0; i < frames.size(); ++i) {
    if (function_of(frames[i]).starts_with("PMPI_")) frames[i].erase(0, 1);
    if (!options.mpi_internals && function_of(frames[i]).starts_with("MPI_")) {
      frames.resize(i + 1);
      break;
    }
  }
  return frames;
}

}  // namespace canopy::stack
