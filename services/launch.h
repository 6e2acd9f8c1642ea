// LaunchService: starts a node's children and reports the tree's start-up.
//
// On Started it launches every child of the topology (local spawn, or the
// launcher template for another host; not back-ends in attach mode) and arms the
// start-up time-out. Launched{rank} goes up each time a process of the subtree says
// hello; LaunchFailed when one does not come up; Ready, with the listening ports of
// the subtree's commnodes, once every child's subtree is up. At the root these
// become the observer's calls, and the endpoints are published to the whole tree.
// With a bulk launch (LaunchPlan::bulk, docs/launch.md) a parent starts only the
// children on its own host: the front-end starts the others, each level of the tree
// with one srun step or mpirun (BulkLaunch) once their parents listen.
#pragma once

#include <boost/asio.hpp>

#include <map>
#include <string>

#include "core/service_context.h"
#include "launch.capnp.h"
#include "services/bulk_launch.h"

namespace canopy::services {

namespace asio = boost::asio;

// How a parent starts one child. The default starts a process: local spawn, or the
// launcher template for another host. Tests start nodes in the same process.
class Launcher {
 public:
  virtual ~Launcher() = default;
  // Starts child `rank` of `node`, which listens on node.listen_port(). Returns the
  // child's process if there is one for the node to watch (null: none); the error
  // names the child and the reason.
  virtual Result<std::unique_ptr<core::ChildProcess>> start(core::ServiceContext& node, Rank rank) = 0;
};

class ProcessLauncher final : public Launcher {
 public:
  Result<std::unique_ptr<core::ChildProcess>> start(core::ServiceContext& node, Rank rank) override;
};

class LaunchService final : public core::Service {
 public:
  // Root only.
  class Observer {
   public:
    virtual ~Observer() = default;
    virtual void on_launched(Rank rank) {}
    virtual void on_launch_failed(Rank rank, const std::string& reason) {}
    virtual void on_ready() {}
  };

  // Everything is borrowed; `observer` may be null.
  LaunchService(core::ServiceContext& node, Launcher& launcher, Observer* observer);

  core::ServiceId id() const override { return wire::launch::SERVICE_ID; }
  std::string_view name() const override { return "launch"; }
  void on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) override;
  void on_event(const core::NodeEvent& event) override;

 private:
  void launch_children();
  void on_startup_timeout();
  void check_subtree_ready();
  void report_launched(Rank rank);
  void report_launch_failed(Rank rank, const std::string& reason);
  // Bulk launch (LaunchPlan::bulk): a commnode's port, up to the front-end, which
  // starts the next level once every commnode of a level listens.
  void report_listening(Rank rank, std::uint16_t port);
  // Starts every level whose parents all listen, in order, from the next one.
  void start_bulk_levels();
  // A level's srun (mpirun) exited: before the tree is up, a launch failure; after,
  // under Slurm, the tree stops if the allocation ended (squeue says).
  void on_step_exit(std::size_t level, int status);
  // Asks squeue whether the allocation ended, up to `tries` times while it cannot
  // tell (it fails on a busy controller) or the allocation still looks alive (a step
  // can end just before Slurm marks it ended); stops the tree if it ended.
  void check_allocation(int tries);

  core::ServiceContext& node_;
  Launcher& launcher_;
  Observer* observer_;
  Timer startup_timer_;
  bool up_ = false;                          // Ready sent (or, at the root, reported)
  // Listening ports of the subtree's commnodes, until the subtree is up (sent up, or
  // published by the root): made by the first, so never at a back-end.
  std::unique_ptr<std::map<Rank, std::uint16_t>> endpoints_;
  std::map<Rank, std::uint16_t>& endpoints();
  // Root, bulk launch: the steps, the ports reported so far, the last level started;
  // made then only (docs/scale.md, "A back-end's own state").
  struct Bulk {
    Bulk(core::ServiceContext& node, std::function<void(std::size_t level, int status)> on_step_exit)
        : steps(node, std::move(on_step_exit)), allocation_timer(node.io()) {}
    BulkLaunch steps;
    std::map<Rank, std::uint16_t> listening;
    std::size_t level = 0;
    Timer allocation_timer;            // between check_allocation's tries
    bool checking_allocation = false;  // a check_allocation is under way
  };
  std::unique_ptr<Bulk> bulk_;
};

}  // namespace canopy::services
