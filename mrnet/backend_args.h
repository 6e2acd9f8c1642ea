// MRNet's back-end command line (docs/mrnet.md, decision 6): MRNet appends five
// arguments after a back-end's own (its parent's host, port and rank, its own host
// and its own rank), and a back-end joins the tree from them. Shared by the C++
// layer's Network::CreateNetworkBE and the lightweight C back-end.
#pragma once

#include <memory>
#include <string>

#include "canopy/backend.h"
#include "canopy/result.h"

namespace MRN::layer {

inline constexpr int kTrailingArgs = 5;

// The five trailing arguments, as given. A launched back-end uses only `rank`: its
// parent comes from the environment Canopy starts it with. In attach mode, the
// parent's host and port find the attach file when CANOPY_ATTACH does not name one
// (attach_place.h), and in an open attach it joins under the parent's rank; it
// connects to where the attach file says that commnode listens, never to an address
// its arguments name.
struct BackendArgs {
  std::string parent_host;
  std::string parent_port;
  std::string parent_rank;
  std::string host;
  canopy::Rank rank = 0;
};

// The trailing arguments of `argv`, or an error saying what was expected: fewer
// than six entries (the program's name and the five), or a last argument that is
// not a decimal rank.
canopy::Result<BackendArgs> parse_backend_args(int argc, const char* const* argv);

// How many entries of argv are the tool's own, the program's name included:
// argc - 5 (argc itself if there are fewer than six).
int tool_argc(int argc);

// Joins the tree as the back-end `argv`'s trailing arguments name:
//   - started by Canopy (CANOPY_PARENT is set; LaunchOptions::mrnet_backend_args):
//     canopy::Backend::connect(), which must agree with the arguments' rank;
//   - otherwise attach mode: canopy::Backend::attach() with the attach file the
//     environment variable CANOPY_ATTACH names, else the one linked for the
//     arguments' parent host and port (attach_place.h), the arguments' rank, and
//     (open attach) their parent rank.
// An error says what was missing: the arguments, or CANOPY_PARENT, CANOPY_ATTACH and
// the linked file alike. `handler` is passed on (canopy::Backend::Handler).
canopy::Result<std::unique_ptr<canopy::Backend>> connect_backend(int argc, char** argv,
                                                                 canopy::Backend::Handler handler = {});

}  // namespace MRN::layer
