// Runtime: the node core with Canopy's own services. What the front-end, every
// commnode and every back-end run; a tool adds services of its own with
// node.add_service() before starting the node. The order in which a service must
// hear an event is declared by the service (Service::runs_after(): the streams run
// after detection and membership, so that a lost child is reported up before the
// streams close waves without it); the order of registration decides the rest.
#pragma once

#include <boost/asio.hpp>

#include <optional>

#include "canopy/event.h"
#include "canopy/view.h"
#include "core/node.h"
#include "filters/filter.h"
#include "membership/gossip.h"
#include "membership/membership.h"
#include "services/detection.h"
#include "services/launch.h"
#include "services/recovery.h"
#include "services/requests.h"
#include "services/streams.h"

namespace canopy::services {

// Who hears what; any may be null (a commnode listens only to the node).
struct Observers {
  core::Node::Observer* node = nullptr;
  LaunchService::Observer* launch = nullptr;
  DetectionService::Observer* detection = nullptr;
  StreamService::Observer* streams = nullptr;
  RequestService::Observer* requests = nullptr;
  RecoveryService::Observer* recovery = nullptr;
  membership::MembershipService::Observer* membership = nullptr;
  membership::GossipService::Observer* gossip = nullptr;
};

class Runtime {
 public:
  // `filters`, the observers, `launcher` and `fabric` are borrowed and must outlive
  // the runtime; without a launcher, children are started as processes; without a
  // fabric, links are sockets (transport/fabric.h).
  Runtime(boost::asio::io_context& io, core::NodeIdentity identity, filters::FilterRegistry& filters,
          const Observers& observers, Launcher* launcher = nullptr, transport::Fabric* fabric = nullptr);
  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  ProcessLauncher processes;
  core::Node node;
  LaunchService launch;
  DetectionService detection;
  StreamService streams;
  RequestService requests;
  RecoveryService recovery;
  membership::MembershipService membership;
  membership::GossipService gossip;

 private:
  // The view the streams judge waves against, the membership service's.
  class MembershipView final : public ViewSource {
   public:
    explicit MembershipView(const membership::MembershipService& membership) : membership_(membership) {}
    std::uint64_t view_id() const override { return membership_.view_id(); }
    bool holds(Rank rank) const override { return membership_.is_member(rank); }

   private:
    const membership::MembershipService& membership_;
  };
  MembershipView view_source_{membership};
};

// The live tree as `runtime`'s process knows it (Network::status(),
// Backend::status()): every process with its host from `topology`, the root first,
// then breadth-first, then those no longer reachable; back-ends with their
// membership. Empty until the node knows the tree. On the loop's thread.
std::vector<NodeStatus> tree_status(const Runtime& runtime, const Topology& topology);

}  // namespace canopy::services
