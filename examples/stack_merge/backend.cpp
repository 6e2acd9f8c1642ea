// stack_merge's back-end: answers every sample request with its call paths
// (call_paths.h) as a canopy::CallTree. A real tool would walk the stacks of the
// processes it watches here.
#include <chrono>
#include <cstdio>

#include <canopy/backend.h>
#include <canopy/call_tree.h>

#include "call_paths.h"

int main() {
  auto backend = canopy::Backend::connect();
  if (!backend) {
    std::fprintf(stderr, "stack_merge_backend: %s\n", backend.error().c_str());
    return 1;
  }
  auto& be = **backend;
  while (true) {
    auto in = be.receive(std::chrono::minutes(10));
    if (!in) return 0;  // the network has shut down
    if (!*in || (*in)->packet.tag() != stack_merge::kSampleTag) continue;
    canopy::CallTree tree;
    for (const auto& path : stack_merge::call_paths(be.rank())) tree.add_path(path, be.rank());
    if (!be.send((*in)->stream, tree.to_packet(stack_merge::kSampleTag))) return 0;
  }
}
