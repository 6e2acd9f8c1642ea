// canopy-commnode: one internal node of a Canopy tree. Started by its parent, which
// passes its identity in the environment (CANOPY_PARENT, CANOPY_RANK,
// CANOPY_NETWORK_ID) with the network's secret (CANOPY_SECRET, or on standard input
// through a launcher: core/auth.h). All the logic lives in the node core and its
// services (services::Runtime). Exit status: 0 after an orderly shutdown, 1 when it
// stopped for a failure (parent lost without healing, no adopter, left the tree),
// 2 for bad input (its environment).
#include <signal.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/auth.h"
#include "core/log.h"
#include "services/runtime.h"

namespace {

struct Exit final : canopy::core::Node::Observer {
  explicit Exit(boost::asio::io_context& io) : io(io) {}
  void on_stopped(const std::string& reason) override {
    canopy::core::log().info("exiting: {}", reason);
    io.stop();
  }
  boost::asio::io_context& io;
};

const char* require_env(const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) {
    std::fprintf(stderr,
                 "canopy-commnode: %s is not set; this program is started by a Canopy parent, not by hand\n",
                 name);
    std::exit(2);
  }
  return v;
}

}  // namespace

int main() {
  signal(SIGPIPE, SIG_IGN);
  auto parent = canopy::core::parent_link_from(require_env(canopy::core::kEnvParent),
                                               std::getenv(canopy::core::kEnvParentLink));
  canopy::core::NodeIdentity identity;
  identity.role = canopy::Role::commnode;
  identity.rank = static_cast<canopy::Rank>(std::strtoul(require_env(canopy::core::kEnvRank), nullptr, 10));
  identity.network_id = std::strtoull(require_env(canopy::core::kEnvNetworkId), nullptr, 16);
  auto secret = canopy::core::secret_from_environment();
  if (!secret) {
    std::fprintf(stderr, "canopy-commnode: %s\n", secret.error().c_str());
    return 2;
  }
  identity.secret = *secret;
  // Its children get it from this process explicitly (services/launch.cpp): a filter
  // plugin's own child processes need not inherit it.
  canopy::core::erase_secret_from_environment();
  canopy::core::init_logging(identity.role, identity.rank);

  if (!parent) {
    std::fprintf(stderr, "canopy-commnode: %s\n", parent.error().c_str());
    return 2;
  }
  boost::asio::io_context io(1);
  auto filters = canopy::filters::FilterRegistry::with_builtins();
  Exit exit(io);
  canopy::services::Runtime runtime(io, identity, filters, {.node = &exit});
  auto started = runtime.node.start_as_child(*parent);
  if (!started) {
    canopy::core::log().error("{}", started.error());
    std::fprintf(stderr, "canopy-commnode %u: %s\n", identity.rank, started.error().c_str());
    return 1;
  }
  io.run();
  // 1 when it stopped for a failure rather than on its parent's order: a launcher
  // (srun, a script) sees that something went wrong.
  return runtime.node.stopped_in_order() ? 0 : 1;
}
