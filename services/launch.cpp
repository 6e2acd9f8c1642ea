#include "services/launch.h"

#include <signal.h>
#include <sys/wait.h>

#include <cctype>
#include <cinttypes>
#include <cstdio>
#include <cstdlib>

#include "core/log.h"
#include "core/parent_link.h"

namespace canopy::services {

using core::ChildState;
using core::log;
using Kind = wire::launch::Kind;

Result<std::unique_ptr<core::ChildProcess>> ProcessLauncher::start(core::ServiceContext& parent, Rank rank) {
  const auto& plan = parent.plan();
  const Topology& topology = *parent.topology();
  const auto& child = topology.at(rank);
  const auto& me = topology.at(parent.identity().rank);
  const core::LaunchCommands& commands = plan.commands.get();
  std::vector<std::string> command =
      child.role == Role::commnode ? std::vector<std::string>{commands.commnode_exe} : commands.backend_argv;
  if (command.empty() || command[0].empty()) {
    return Error{"no program to run for " + parent.describe(rank)};
  }
  if (child.role == Role::backend && plan.mrnet_backend_args) {
    // MRNet's back-ends find these last on their command line, after their own
    // (docs/mrnet.md): parent host, parent port, parent rank, own host, own rank.
    command.insert(command.end(), {topology.address_of(me.host), std::to_string(parent.listen_port()),
                                   std::to_string(me.rank), child.host, std::to_string(rank)});
  }
  char network[17];
  std::snprintf(network, sizeof network, "%016" PRIx64, parent.identity().network_id);
  core::Environment env = {
      {core::kEnvParent, topology.address_of(me.host) + ":" + std::to_string(parent.listen_port())},
      {core::kEnvRank, std::to_string(rank)},
      {core::kEnvNetworkId, network},
  };
  // Empty for a plain link: a child inherits its parent's environment, and with it
  // the description of the parent's own link.
  env.emplace_back(core::kEnvParentLink, core::parent_link_for(topology, child, me, parent.listen_port()));
  std::vector<std::string> argv = command;
  // The secret never goes on a command line (ps shows those to every user): in the
  // environment of a local child, on the standard input of a launcher, which the
  // launcher (ssh, ip netns exec, ...) hands to the remote command (core/auth.h).
  const std::string secret = core::to_hex(parent.identity().secret);
  std::string input;
  if (child.host != me.host) {
    // Another host: its environment does not come with it, so pass ours on.
    for (const char* name : {"CANOPY_LOG_DIR", "CANOPY_LOG_LEVEL", "CANOPY_LOG_STDERR"}) {
      if (const char* v = std::getenv(name)) env.emplace_back(name, v);
    }
    env.emplace_back(core::kEnvSecretOnStdin, "1");
    argv = core::launcher_argv(commands.launcher, child.host, command, env);
    input = secret + "\n";
  } else {
    env.emplace_back(core::kEnvSecret, secret);
  }
  auto process = core::ChildProcess::spawn(parent.io(), argv, env, input);
  if (!process) return Error{"cannot start " + parent.describe(rank) + ": " + process.error()};
  return std::move(*process);
}

LaunchService::LaunchService(core::ServiceContext& node, Launcher& launcher, Observer* observer)
    : node_(node), launcher_(launcher), observer_(observer), startup_timer_(node.io()) {}

void LaunchService::on_event(const core::NodeEvent& event) {
  if (auto* started = std::get_if<core::events::Started>(&event)) {
    if (!started->error.empty()) {
      report_launch_failed(node_.identity().rank, node_.describe(node_.identity().rank) + ": " + started->error);
      return;
    }
    if (node_.plan().reattached) {
      // A front-end that re-attached: its tree is up already, its endpoints published.
      up_ = true;
      return node_.subtree_up();
    }
    if (node_.listen_port() != 0) endpoints()[node_.identity().rank] = node_.listen_port();
    if (node_.plan().bulk) {
      if (!node_.is_root() && node_.listen_port() != 0) report_listening(node_.identity().rank, node_.listen_port());
      if (node_.is_root()) {
        bulk_ = std::make_unique<Bulk>(node_, [this](std::size_t level, int status) { on_step_exit(level, status); });
        bulk_->listening[node_.identity().rank] = node_.listen_port();
        start_bulk_levels();
      }
    }
    launch_children();
  } else if (auto* connected = std::get_if<core::events::ChildConnected>(&event)) {
    if (!connected->rejoined) report_launched(connected->rank);  // a rejoin is the membership's news
  } else if (auto* lost = std::get_if<core::events::ChildLost>(&event)) {
    if (!lost->during_launch) return;  // the detection service reports it
    const auto& child = node_.children()[lost->child];
    const bool never = child.never_connected();
    // What it ran: a launcher that exits without starting the program (status 0
    // from a wrong template, say) is found from the command it was given.
    report_launch_failed(lost->rank, lost->reason + (never ? " before connecting" : " during start-up") +
                                         (never && child.process ? "; it ran: " + child.process->command() : ""));
  } else if (std::holds_alternative<core::events::Stopping>(event)) {
    startup_timer_.cancel();
    if (bulk_) bulk_->allocation_timer.cancel();
  }
}

namespace {
constexpr int kAllocationTries = 5;
constexpr auto kAllocationRetry = std::chrono::milliseconds(300);
}  // namespace

void LaunchService::check_allocation(int tries) {
  bulk_->steps.ask_allocation_state([this, tries](const std::string& state) {
    if (node_.stopping()) return;
    if (!state.empty() && state != "RUNNING" && state != "CONFIGURING" && state != "SUSPENDED") {
      const char* job = std::getenv("SLURM_JOB_ID");
      std::string lower = state == "GONE" ? "no longer in the queue" : state;
      for (auto& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      log().warn("the Slurm allocation {} is {}: stopping the tree", job ? job : "", lower);
      node_.shutdown("the Slurm allocation " + std::string(job ? job : "") + " ended (" + lower +
                     "), and Slurm ended the tree's processes in its steps with it");
      return;
    }
    if (state.empty()) log().warn("squeue could not tell the allocation's state ({} tries left)", tries - 1);
    if (tries <= 1) {
      bulk_->checking_allocation = false;  // alive: the step's processes failed, and the tree heals
      return;
    }
    bulk_->allocation_timer.expires_after(kAllocationRetry);
    bulk_->allocation_timer.async_wait([this, tries](const boost::system::error_code& ec) {
      if (!ec && !node_.stopping()) check_allocation(tries - 1);
    });
  });
}

void LaunchService::on_step_exit(std::size_t level, int status) {
  if (node_.stopping() || (WIFEXITED(status) && WEXITSTATUS(status) == 0)) return;
  const bool slurm = node_.plan().bulk_tool == core::LaunchPlan::BulkTool::srun;
  if (up_) {
    // A step ends early when all its processes failed (the tree heals), or when Slurm
    // ended them with the allocation (cancelled, out of time): then what runs
    // outside the steps (this front-end, its local children) must not run on as if
    // healed. squeue says which.
    if (!slurm || bulk_->checking_allocation) return;
    bulk_->checking_allocation = true;
    check_allocation(kAllocationTries);
    return;
  }
  // The step ended before the tree was up: its processes that did not connect will
  // not. One report names the step (its first process); the start-up time-out names
  // the rest.
  const Rank r = bulk_->steps.level(level).front();  // a step starts only for a level with processes
  const char* nodes = std::getenv("SLURM_JOB_NODELIST");
  report_launch_failed(r, node_.describe(r) + ": the " + bulk_->steps.step_name(level) + " " +
                              core::describe_wait_status(status) + " before the tree was up (" +
                              (slurm ? "srun" : "mpirun") + "'s error above says why; " +
                              (slurm ? "is every host of the topology a node of the allocation" +
                                           (nodes ? std::string(", ") + nodes : std::string()) + "?)"
                                     : std::string("can mpirun reach every host of the topology?)")));
}

void LaunchService::report_listening(Rank rank, std::uint16_t port) {
  if (!node_.is_root()) {
    core::Outgoing message(node_.identity(), id(), Kind::LISTENING);
    auto l = message.init<wire::launch::Listening>();
    l.setRank(rank);
    l.setPort(port);
    node_.send_up(message);
    return;
  }
  if (!bulk_) return;
  bulk_->listening[rank] = port;
  start_bulk_levels();
}

void LaunchService::start_bulk_levels() {
  Bulk& bulk = *bulk_;
  while (bulk.level < bulk.steps.levels() && !node_.stopping() && bulk.steps.ready(bulk.level + 1, bulk.listening)) {
    const std::size_t level = ++bulk.level;
    if (auto started = bulk.steps.start(level, bulk.listening); !started) {
      report_launch_failed(bulk.steps.level(level).front(), started.error());
      return;
    }
  }
}

void LaunchService::on_message(const core::Peer& from, std::uint16_t kind, capnp::AnyPointer::Reader body) {
  switch (static_cast<Kind>(kind)) {
    case Kind::LAUNCHED:
      return report_launched(body.getAs<wire::launch::Launched>().getRank());
    case Kind::LAUNCH_FAILED: {
      auto f = body.getAs<wire::launch::LaunchFailed>();
      return report_launch_failed(f.getRank(), f.getReason());
    }
    case Kind::LISTENING: {
      auto l = body.getAs<wire::launch::Listening>();
      return report_listening(l.getRank(), l.getPort());
    }
    case Kind::READY: {
      if (from.kind != core::Peer::Kind::child) return;
      if (!up_) {  // read only until the subtree is up (check_subtree_ready)
        for (auto ep : body.getAs<wire::launch::Ready>().getEndpoints()) endpoints()[ep.getRank()] = ep.getPort();
      }
      if (node_.children()[from.child].state == ChildState::connected) {
        node_.set_child_state(from.child, ChildState::ready, "its subtree is up");
      }
      return check_subtree_ready();
    }
  }
  log().warn("ignoring launch message of unknown kind {}", kind);
}

std::map<Rank, std::uint16_t>& LaunchService::endpoints() {
  if (!endpoints_) endpoints_ = std::make_unique<std::map<Rank, std::uint16_t>>();
  return *endpoints_;
}

void LaunchService::launch_children() {
  const auto& plan = node_.plan();
  bool waiting = false;
  auto& children = node_.children();
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (plan.attach && children[i].role == Role::backend) {
      log().info("back-end {} will attach by itself", children[i].rank);
      continue;
    }
    waiting = true;
    // Bulk launch: a child on another host is started by the front-end's step of its
    // level; one on this host, here.
    const Topology& topology = *node_.topology();
    if (plan.bulk && topology.at(children[i].rank).host != topology.at(node_.identity().rank).host) continue;
    auto process = launcher_.start(node_, children[i].rank);
    if (!process) {
      node_.give_up_child(i, "cannot be started");
      report_launch_failed(children[i].rank, process.error());
    } else if (*process) {
      log().info("started {} as pid {}", node_.describe(children[i].rank), (*process)->pid());
      node_.attach_process(i, std::move(*process));
    }
  }
  if (waiting) {
    startup_timer_.expires_after(plan.startup_timeout);
    startup_timer_.async_wait([this](const boost::system::error_code& ec) {
      if (!ec) on_startup_timeout();
    });
  }
  check_subtree_ready();
}

void LaunchService::on_startup_timeout() {
  const auto& plan = node_.plan();
  auto& children = node_.children();
  for (std::size_t i = 0; i < children.size(); ++i) {
    if (children[i].state != ChildState::starting) continue;
    if (plan.attach && children[i].role == Role::backend) continue;  // the front-end waits for those
    node_.give_up_child(i, "start-up time-out");
    report_launch_failed(children[i].rank, node_.describe(children[i].rank) + " did not connect within " +
                                               std::to_string(plan.startup_timeout.count()) + " ms");
  }
}

void LaunchService::check_subtree_ready() {
  if (up_ || node_.stopping()) return;
  for (const auto& child : node_.children()) {
    // In attach mode the tree is up once its commnodes are; back-ends come later.
    if (node_.plan().attach && child.role == Role::backend) continue;
    if (child.state != ChildState::ready) return;
  }
  up_ = true;
  startup_timer_.cancel();
  // Read for the last time: given back here.
  const std::map<Rank, std::uint16_t> endpoints = endpoints_ ? std::move(*endpoints_) : std::map<Rank, std::uint16_t>{};
  endpoints_.reset();
  const std::size_t count = endpoints.size();
  log().info("subtree ready ({} endpoints)", count);
  node_.subtree_up();
  if (!node_.is_root()) {
    core::Outgoing message(node_.identity(), id(), Kind::READY);
    auto eps = message.init<wire::launch::Ready>().initEndpoints(count);
    std::size_t i = 0;
    for (auto [rank, port] : endpoints) {
      eps[i].setRank(rank);
      eps[i].setPort(port);
      ++i;
    }
    node_.send_up(message);
    return;
  }
  // Root: every listening endpoint is now known; tell the whole tree.
  node_.publish_endpoints(endpoints);
  if (observer_) observer_->on_ready();
}

void LaunchService::report_launched(Rank rank) {
  if (node_.is_root()) {
    if (observer_) observer_->on_launched(rank);
    return;
  }
  core::Outgoing message(node_.identity(), id(), Kind::LAUNCHED);
  message.init<wire::launch::Launched>().setRank(rank);
  node_.send_up(message);
}

void LaunchService::report_launch_failed(Rank rank, const std::string& reason) {
  log().error("launch failed: {}", reason);
  if (node_.is_root()) {
    if (observer_) observer_->on_launch_failed(rank, reason);
    return;
  }
  core::Outgoing message(node_.identity(), id(), Kind::LAUNCH_FAILED);
  auto f = message.init<wire::launch::LaunchFailed>();
  f.setRank(rank);
  f.setReason(reason);
  node_.send_up(message);
}

}  // namespace canopy::services
