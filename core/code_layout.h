// The code of an orphan's recovery, mapped before it is needed (docs/benchmarks.md,
// "Recovery at the floor (issue 51)").
//
// A lean back-end (cmake/CanopyLean.cmake) lays out the functions it runs every day
// first, then those only an orphan's recovery runs (scripts/hot_functions.sh writes
// both groups into cmake/backend_hot_functions.ld, the second between the symbols
// __canopy_recovery_code_start and __canopy_recovery_code_end). The daily code then
// lies as close together as it can; the recovery's would be faulted in, a window at
// a time, by every orphan of a storm while the others wait for a core. This maps it
// at start instead: its pages are already in the page cache (every back-end of the
// machine shares them), so it is one system call and some page-table entries.
#pragma once

namespace canopy::core {

// Maps the recovery's code of this program (or shared library), if it was linked
// with the layout; does nothing otherwise, or where the kernel cannot (before
// Linux 5.14). Never fails.
void map_recovery_code();

}  // namespace canopy::core
