#include "stack/paths.h"

namespace canopy::stack {

std::string_view function_of(std::string_view frame) {
  const auto suffix = frame.find(" (");
  return suffix == std::string_view::npos ? frame : frame.substr(0, suffix);
}

bool is_startup_frame(std::string_view function) {
  for (std::string_view name : {"_start", "__libc_start_main", "__libc_start_main_impl", "__libc_start_main_alias_2",
                                "__libc_start_call_main", "_dl_start_user", "clone", "clone3", "__clone",
                                "__clone3", "__clone_internal", "start_thread"}) {
    if (function == name) return true;
  }
  return false;
}

namespace {

// A frame the walker could not name: "module+0xoffset".
bool is_unnamed(std::string_view function) { return function.find("+0x") != std::string_view::npos; }

// The start-up frames at the head of `frames` (outermost first), dropped. They are
// found in the leading run of start-up and unnamed frames: up to `main` when it
// follows that run (glibc's unnamed frames above it go too), else up to the run's
// last start-up frame (a stripped program's unnamed _start above __libc_start_main,
// its unnamed main below __libc_start_call_main).
void drop_startup_frames(std::vector<std::string>& frames) {
  std::size_t run = 0, cut = 0;
  for (; run < frames.size(); ++run) {
    const auto function = function_of(frames[run]);
    if (is_startup_frame(function)) {
      cut = run + 1;
    } else if (!is_unnamed(function)) {
      break;
    }
  }
  if (run < frames.size() && function_of(frames[run]) == "main") cut = run;
  frames.erase(frames.begin(), frames.begin() + static_cast<std::ptrdiff_t>(cut));
}

}  // namespace

std::vector<std::string> shape_path(std::vector<std::string> frames, const PathOptions& options) {
  if (!options.startup_frames) drop_startup_frames(frames);
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
