// canopy-stackd: the tool daemon of canopy stack (docs/stack.md), one per host of the
// job, started by the Canopy tree as a back-end. On each request (stack/protocol.h)
// it walks the ranks the request gives it, `samples` times, and answers with one
// CallTree of their paths, which the prefix_tree filter merges on the way up. A rank
// that cannot be walked (it exited, no permission) is a path of its own, the reason
// in brackets, so the result says so where the user looks.
#include <chrono>
#include <cstdio>
#include <thread>

#include "canopy/backend.h"
#include "canopy/call_tree.h"
#include "stack/paths.h"
#include "stack/protocol.h"
#include "stack/walker.h"

namespace {

using namespace canopy;

CallTree walk(const stack::Request& request, Rank me) {
  std::vector<pid_t> pids;
  std::vector<Rank> ranks;
  for (const auto& t : request.targets) {
    if (t.daemon != me) continue;
    pids.push_back(t.pid);
    ranks.push_back(t.mpi_rank);
  }
  CallTree tree;
  if (pids.empty()) return tree;
  const stack::PathOptions shape{.mpi_internals = request.mpi_internals};
  stack::Walker walker({.lines = request.lines, .all_threads = request.threads});
  for (std::uint32_t s = 0; s < request.samples; ++s) {
    if (s > 0) std::this_thread::sleep_for(std::chrono::milliseconds(request.interval_ms));
    const auto stacks = walker.sample(pids);
    for (std::size_t i = 0; i < pids.size(); ++i) {
      if (!stacks[i]) {
        tree.add_path({"[not walked: " + stacks[i].error() + "]"}, ranks[i]);
        continue;
      }
      for (const auto& thread : *stacks[i]) {
        tree.add_path(stack::shape_path(thread.frames, shape), ranks[i]);
      }
    }
  }
  return tree;
}

}  // namespace

int main() {
  auto backend = Backend::connect();
  if (!backend) {
    std::fprintf(stderr, "canopy-stackd: %s\n", backend.error().c_str());
    return 1;
  }
  auto& be = **backend;
  while (true) {
    auto in = be.receive(std::chrono::minutes(10));
    if (!in) return 0;  // the network has shut down
    if (!*in || (*in)->packet.tag() != stack::kRequestTag) continue;
    auto request = stack::decode_request((*in)->packet);
    CallTree tree;
    if (!request) {
      tree.add_path({"[bad request to the daemon: " + request.error() + "]"}, be.rank());
    } else {
      tree = walk(*request, be.rank());
    }
    if (!be.send((*in)->stream, tree.to_packet(stack::kTreeTag))) return 0;
  }
}
