// The synthetic call paths of stack_merge's back-ends, and the request that asks for
// them: the front-end broadcasts tag kSampleTag; each back-end answers with a
// canopy::CallTree of its paths, in the packet encoding of the prefix_tree filter.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace stack_merge {

inline constexpr std::int32_t kSampleTag = 1;

// What back-end `rank` is "doing", outermost frame first: even ranks wait in a
// reduction, odd ranks write, and every fourth rank's progress thread polls as well.
inline std::vector<std::vector<std::string>> call_paths(std::uint32_t rank) {
  std::vector<std::vector<std::string>> paths;
  if (rank % 2 == 0) {
    paths.push_back({"_start", "main", "solve", "MPI_Allreduce"});
  } else {
    paths.push_back({"_start", "main", "io", "write"});
  }
  if (rank % 4 == 3) paths.push_back({"clone", "progress_thread", "poll"});
  return paths;
}

}  // namespace stack_merge
