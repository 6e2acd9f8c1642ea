#include "stack/protocol.h"

namespace canopy::stack {
namespace {

constexpr std::uint32_t kLines = 1, kThreads = 2, kMpiInternals = 4, kStartupFrames = 8;
constexpr const char* kFormat = "%ud %ud %ud %aud %aud %ad";

}  // namespace

Packet encode(const Request& request) {
  std::vector<std::uint32_t> daemons, ranks;
  std::vector<std::int32_t> pids;
  for (const auto& t : request.targets) {
    daemons.push_back(t.daemon);
    ranks.push_back(t.mpi_rank);
    pids.push_back(t.pid);
  }
  const std::uint32_t flags = (request.lines ? kLines : 0) | (request.threads ? kThreads : 0) |
                              (request.mpi_internals ? kMpiInternals : 0) |
                              (request.startup_frames ? kStartupFrames : 0);
  return Packet(kRequestTag, {request.samples, request.interval_ms, flags, std::move(daemons), std::move(ranks),
                              std::move(pids)});
}

Result<Request> decode_request(const Packet& packet) {
  Request r;
  std::uint32_t flags = 0;
  std::vector<std::uint32_t> daemons, ranks;
  std::vector<std::int32_t> pids;
  if (auto ok = packet.unpack(kFormat, r.samples, r.interval_ms, flags, daemons, ranks, pids); !ok)
    return Error{"stack request: " + ok.error(), ErrorKind::invalid_input};
  if (r.samples < 1 || r.samples > 1000)
    return Error{"stack request: " + std::to_string(r.samples) + " samples (1 to 1000)", ErrorKind::invalid_input};
  if (r.interval_ms > 60000)
    return Error{"stack request: an interval of " + std::to_string(r.interval_ms) + " ms (at most 60000)",
                 ErrorKind::invalid_input};
  if (daemons.size() != ranks.size() || ranks.size() != pids.size())
    return Error{"stack request: " + std::to_string(daemons.size()) + " daemons, " + std::to_string(ranks.size()) +
                     " ranks and " + std::to_string(pids.size()) + " pids",
                 ErrorKind::invalid_input};
  r.lines = flags & kLines;
  r.threads = flags & kThreads;
  r.mpi_internals = flags & kMpiInternals;
  r.startup_frames = flags & kStartupFrames;
  for (std::size_t i = 0; i < pids.size(); ++i) {
    if (pids[i] <= 0)
      return Error{"stack request: rank " + std::to_string(ranks[i]) + " has pid " + std::to_string(pids[i]),
                   ErrorKind::invalid_input};
    r.targets.push_back({daemons[i], ranks[i], pids[i]});
  }
  return r;
}

}  // namespace canopy::stack
