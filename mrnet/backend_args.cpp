#include "mrnet/backend_args.h"

#include "mrnet/attach_place.h"

#include <unistd.h>

#include <cstdlib>
#include <limits>
#include <optional>

namespace MRN::layer {

namespace {

// A decimal rank with nothing else, or nothing.
std::optional<canopy::Rank> parse_rank(const char* text) {
  if (!text || !*text) return std::nullopt;
  std::uint64_t value = 0;
  for (const char* c = text; *c; ++c) {
    if (*c < '0' || *c > '9') return std::nullopt;
    value = value * 10 + static_cast<std::uint64_t>(*c - '0');
    if (value > std::numeric_limits<canopy::Rank>::max()) return std::nullopt;
  }
  return static_cast<canopy::Rank>(value);
}

canopy::Error usage(const std::string& what) {
  return canopy::Error{what + "; an MRNet back-end's command line ends with five arguments after the tool's own: "
                              "parent host, parent port, parent rank, own host, own rank (docs/mrnet.md)",
                       canopy::ErrorKind::invalid_input};
}

const char* nonempty_env(const char* name) {
  const char* value = std::getenv(name);
  return value && *value ? value : nullptr;
}

}  // namespace

canopy::Result<BackendArgs> parse_backend_args(int argc, const char* const* argv) {
  if (argc < kTrailingArgs + 1 || !argv) {
    return usage("expected at least 6 arguments (the program and the five), got " + std::to_string(argc));
  }
  const char* const* last = argv + argc - kTrailingArgs;
  auto rank = parse_rank(last[4]);
  if (!rank) return usage(std::string("the last argument, the back-end's own rank, is '") + last[4] + "', not a rank");
  return BackendArgs{last[0], last[1], last[2], last[3], *rank};
}

int tool_argc(int argc) { return argc > kTrailingArgs ? argc - kTrailingArgs : argc; }

canopy::Result<std::unique_ptr<canopy::Backend>> connect_backend(int argc, char** argv,
                                                                 canopy::Backend::Handler handler) {
  auto args = parse_backend_args(argc, argv);
  if (!args) return canopy::Error{args.error(), args.error_kind()};
  // The variables canopy::Backend::connect() reads (canopy/backend.h).
  if (nonempty_env("CANOPY_PARENT")) {
    const char* env_rank = nonempty_env("CANOPY_RANK");
    if (env_rank && parse_rank(env_rank) != args->rank) {
      return canopy::Error{"the back-end's rank is " + std::to_string(args->rank) + " in its arguments but " +
                               env_rank + " in CANOPY_RANK, set by the Canopy parent that started it",
                           canopy::ErrorKind::invalid_input};
    }
    return canopy::Backend::connect(std::move(handler));
  }
  // Attach mode: the attach file CANOPY_ATTACH names, else the one the front-end
  // linked under the parent's host and port (attach_place.h). In an open attach the
  // back-end joins under the parent its arguments name, as MRNet's do.
  std::string file;
  if (const char* named = nonempty_env("CANOPY_ATTACH")) {
    file = named;
  } else if (!attach_dir().empty()) {
    const std::string place = attach_place(args->parent_host, args->parent_port);
    if (::access(place.c_str(), F_OK) == 0) file = place;
  }
  if (file.empty()) {
    return canopy::Error{"this back-end was not started by Canopy (CANOPY_PARENT is not set), CANOPY_ATTACH does not "
                         "name an attach file, and there is none for its parent " + args->parent_host + ":" +
                             args->parent_port + " in " + (attach_dir().empty() ? "~/.canopy/attach" : attach_dir()) +
                             ": a back-end started by the tool (attach mode) needs the attach file the front-end "
                             "wrote (docs/mrnet.md, decision 6)",
                         canopy::ErrorKind::invalid_input};
  }
  return canopy::Backend::attach(file, args->rank, std::move(handler), parse_rank(args->parent_rank.c_str()));
}

}  // namespace MRN::layer
