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
  // Keep the C runtime's start-up frames above main (_start, __libc_start_main,
  // __libc_start_call_main, ...) and above a thread's function (clone3,
  // start_thread). Off by default: every rank has the same ones, and they push
  // the frames that tell ranks apart down the page.
  bool startup_frames = false;
};

// Whether `function` is one of the C runtime's start-up frames: those glibc (and the
// dynamic loader) run before main or before a thread's function.
bool is_startup_frame(std::string_view function);

// The function name of a frame: the frame without a " (file:line)" suffix.
std::string_view function_of(std::string_view frame);

// One thread's frames, outermost first, as a path of the merged tree: an MPI entry
// point reached through its profiling name (PMPI_Barrier, which Open MPI's
// MPI_Barrier is an alias of) is named by its MPI_ name, and unless
// `options.mpi_internals` the path ends at the first MPI_ frame. Unless
// `options.startup_frames`, the start-up frames are dropped: in the leading run of
// frames that is_startup_frame() names or that are unnamed ("libc.so.6+0x271ca",
// "app+0x2620": no symbols), those above `main` when main follows the run, else
// those down to the run's last named start-up frame. A program's own frame above
// main stays; so does exit() after main returned.
std::vector<std::string> shape_path(std::vector<std::string> frames, const PathOptions& options);

}  // namespace canopy::stack
