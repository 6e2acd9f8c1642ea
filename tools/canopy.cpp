// canopy: the command-line tool.
//   canopy run      launch a tree, run a workload, print aggregated results (the union
//                   workload: union_workload.h)
//   canopy attach-frontend  carry on the run of a tree that outlived its front-end
//                   (attach_frontend_command.h)
//   canopy status   draw a run's status file (status_file.h)
//   canopy topgen   write a generated topology (topgen_command.h)
//   canopy stack    merged stack traces of an MPI job (stack_command.h)
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <cstring>
#include <functional>

#include <yaml-cpp/yaml.h>
#include <set>

#include "canopy/frontend.h"
#include "canopy/slurm.h"
#include "canopy/topology.h"
#include "canopy.capnp.h"
#include "demo_check.h"
#include "demo_protocol.h"
#include "programs.h"
#include "cli_checks.h"
#include "attach_frontend_command.h"
#include "run_output.h"
#include "stack_command.h"
#include "status_file.h"
#include "topgen_command.h"
#include "union_record.h"
#include "union_workload.h"

namespace {

using namespace canopy::tools;

struct RunOptions {
  std::string topology_file;
  std::string tree = "b:4^2";
  std::vector<std::string> backend;  // empty: the demo back-end
  std::string filter = "sum";
  int waves = 10;
  int interval_ms = 20;
  std::string format = "text";
  int startup_timeout_ms = 10000;
  std::string launcher = "ssh {host} {command}";
  std::string advertise;
  std::string hosts;             // --hosts LIST|FILE: place --tree on these hosts
  bool print_placement = false;  // say which processes each host got, before the launch
  std::string ports;             // --ports LO-HI: every listening port of the tree in this range
  canopy::LaunchMethod launch_method = canopy::LaunchMethod::spawn;
  std::string plugin;       // load --filter from this shared object
  std::string attach_file;  // attach mode: back-ends are started by someone else
  std::string workload = "demo";
  int rate_hz = 10;
  double duration_s = 10;
  // The options given on the command line (not left at their defaults) that belong
  // to one workload only: refused for the other, never silently ignored.
  std::vector<std::string> given;
  std::string record_dir;
  bool sum_stream = false;  // union workload: a sum stream beside it, every wave checked
  canopy::FaultToleranceOptions fault;
  // The --gossip options given, each over the topology's gossip: settings.
  struct {
    std::optional<canopy::GossipSchedule> schedule;
    std::optional<std::chrono::milliseconds> period, max_hangup, ping_timeout;
  } gossip;
  std::string status_file;  // kept up to date with the live tree (canopy status FILE)
  std::string report_file;  // the last view as a page of its own, written at the end
  std::size_t backends = 0;  // attach mode: this many back-ends below leaf commnodes
  std::string log_dir;       // every process's log file here ($CANOPY_LOG_DIR)
  std::string dashboard;     // [ADDR:]PORT of the live web page, "" = none
  bool dashboard_anywhere = false;
  // Override the topology's `links:` settings when given.
  std::optional<canopy::LinkKind> links;
  std::optional<canopy::LinkChecksum> checksum;
  std::optional<double> corrupt;
};

const std::vector<std::string> kBuiltinFilters{"sum", "min", "max", "avg", "concat", "union"};

// The topology of a run. In attach mode (docs/attach.md) the leaves of a topology in
// MRNet's format are commnodes, as MRNet means them there, and --backends N says how
// many back-ends will attach below them; --backends turns a --tree's leaves into
// commnodes the same way.
// This host's name as a host list names it: the whole name if the list has it, else
// the name up to its first dot (as Slurm names nodes).
std::string frontend_host(const std::vector<canopy::HostSlots>& hosts) {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0 || !name[0]) return "localhost";
  const std::string full = name;
  for (const auto& h : hosts) {
    if (h.name == full) return full;
  }
  return full.substr(0, full.find('.'));
}

canopy::Result<canopy::Topology> run_topology(const RunOptions& opt) {
  const bool attach = !opt.attach_file.empty();
  if (opt.backends && !attach) return canopy::Error{"--backends is for attach mode (--attach FILE)"};
  if (!opt.hosts.empty()) {
    // Placed by host for spawn and mpirun launches (docs/topology.md).
    if (opt.launch_method == canopy::LaunchMethod::slurm) {
      return canopy::Error{"--hosts is for --launch spawn and mpirun: under --launch slurm the tree goes on the "
                           "allocation's nodes"};
    }
    std::error_code ec;
    const bool file = std::filesystem::is_regular_file(opt.hosts, ec);
    auto hosts = canopy::tools::read_host_list(opt.hosts, file ? opt.hosts : "", "--hosts");
    if (!hosts) return canopy::Error{hosts.error()};
    const auto leaves = opt.backends ? canopy::Leaves::commnodes : canopy::Leaves::backends;
    auto tree = canopy::generate_topology_on_hosts(opt.tree, frontend_host(*hosts), *hosts, leaves);
    if (!tree || !opt.backends) return tree;
    return canopy::attach_backends(*tree, opt.backends);
  }
  if (opt.topology_file.empty()) {
    if (opt.launch_method == canopy::LaunchMethod::slurm && !attach) {
      // Spread over the allocation's nodes, each subtree on one (docs/launch.md).
      auto allocation = canopy::slurm_allocation();
      if (!allocation) return canopy::Error{"--launch slurm places --tree on the allocation's nodes: " + allocation.error()};
      return canopy::generate_spread_topology(opt.tree, allocation->this_host, allocation->nodes);
    }
    if (!opt.backends) return canopy::generate_topology(opt.tree);
    auto tree = canopy::generate_topology(opt.tree, {}, canopy::Leaves::commnodes);
    if (!tree) return tree;
    return canopy::attach_backends(*tree, opt.backends);
  }
  if (!attach) return canopy::load_topology(opt.topology_file);
  // Which format: read the file once to tell.
  std::ifstream in(opt.topology_file, std::ios::binary);
  std::string head(4096, '\0');
  in.read(head.data(), static_cast<std::streamsize>(head.size()));
  head.resize(static_cast<std::size_t>(in.gcount()));
  if (canopy::detect_topology_format(head) == canopy::TopologyFormat::mrnet) {
    if (!opt.backends) {
      return canopy::Error{opt.topology_file + ": in attach mode the leaves of an MRNet-format topology are the "
                           "commnodes back-ends attach to; say how many back-ends will attach with --backends N"};
    }
    auto tree = canopy::load_topology(opt.topology_file, canopy::Leaves::commnodes);
    if (!tree) return tree;
    return canopy::attach_backends(*tree, opt.backends);
  }
  auto tree = canopy::load_topology(opt.topology_file);
  if (!tree || !opt.backends) return tree;
  if (!tree->backends().empty()) {
    return canopy::Error{"--backends: " + opt.topology_file + " names its back-ends already (" +
                         count(tree->backends().size(), "back-end") + ")"};
  }
  return canopy::attach_backends(*tree, opt.backends);
}

int run_tree(const RunOptions& opt, StatusWriter& status) {
  bool jsonl = opt.format == "jsonl";
  canopy::Network* launched = nullptr;
  auto fail = [&](std::string message, int code = 1) {
    if (launched && launched->replaced()) {
      // Taken for lost while it was stopped: the tree goes on under an heir, and a
      // front-end may take the run over (the status file turns stale, as for a
      // front-end that died).
      status.keep_for_reattach();
      if (!opt.status_file.empty()) message += "; to carry the run on: canopy attach-frontend " + opt.status_file;
    }
    if (jsonl) std::cout << "{\"error\":" << json_string(message) << "}" << std::endl;
    std::cerr << "canopy run: " << message << "\n";
    status.progress().error = message;
    return code;
  };
  // Options of the other workload are refused, naming the ones that do apply.
  auto join = [](const std::vector<std::string>& names) {
    std::string out;
    for (std::size_t i = 0; i < names.size(); ++i) out += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
    return out;
  };
  std::vector<std::string> misplaced;
  for (const std::string& name : opt.given) {
    const bool demo_only = name == "--waves" || name == "--interval" || name == "--filter" || name == "--plugin";
    const bool union_only = name == "--rate" || name == "--duration";
    if ((opt.workload == "union" && demo_only) || (opt.workload == "demo" && union_only)) misplaced.push_back(name);
  }
  if (opt.workload == "union" && !opt.backend.empty()) misplaced.push_back("a back-end command");
  if (!misplaced.empty()) {
    return fail(join(misplaced) + (misplaced.size() == 1 ? " is" : " are") + " not for --workload " + opt.workload +
                    (opt.workload == "union"
                         ? ", which runs the demo back-end through incremental_union at --rate for --duration "
                           "(--record and --sum-stream apply too)"
                         : ", which runs --waves waves every --interval ms through --filter (or --plugin); "
                           "--rate and --duration are for --workload union"),
                2);
  }
  auto topology = run_topology(opt);
  if (!topology) return fail(topology.error(), 2);
  canopy::LinkSettings links = topology->links();
  if (opt.links) links.kind = *opt.links;
  if (opt.checksum) links.checksum = *opt.checksum;
  if (opt.corrupt) links.corrupt_fraction = *opt.corrupt;
  if (auto ok = topology->set_links(links); !ok) return fail(ok.error(), 2);
  if (!opt.ports.empty()) {
    auto ports = canopy::parse_port_range(opt.ports, "--ports");
    if (!ports) return fail(ports.error(), 2);
    topology->set_ports(*ports);
  }
  if (opt.print_placement) canopy::tools::print_placement(*topology, "canopy run: placement: ");
  auto backends = topology->backends();
  if (backends.empty()) return fail("the topology has no back-ends", 2);
  if (opt.plugin.empty() &&
      std::find(kBuiltinFilters.begin(), kBuiltinFilters.end(), opt.filter) == kBuiltinFilters.end()) {
    if (opt.filter == "incremental_union" || opt.filter == "prefix_tree" || opt.filter == "pass") {
      return fail("--filter " + opt.filter + " is built in, but not for the demo workload, which runs sum, min, max, "
                  "avg, concat or union" + (opt.filter == "incremental_union" ? std::string(
                      "; --workload union runs incremental_union")
                  : opt.filter == "pass" ? std::string("; pass aggregates nothing (MRNet's TFILTER_NULL)")
                                          : std::string("; canopy stack runs prefix_tree")), 2);
    }
    return fail("--filter " + opt.filter + " is not a built-in filter of the demo workload (sum, min, max, avg, "
                "concat, union); give --plugin FILE to load it", 2);
  }
  if (opt.fault.enabled && !(opt.fault.heartbeat < opt.fault.suspect && opt.fault.suspect < opt.fault.lost)) {
    return fail("--heartbeat, --suspect and --lost must increase (now " + std::to_string(opt.fault.heartbeat.count()) +
                ", " + std::to_string(opt.fault.suspect.count()) + ", " + std::to_string(opt.fault.lost.count()) +
                " ms)", 2);
  }
  // Logs: one file per process, nothing on the terminal (core/log.h).
  if (!opt.log_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(opt.log_dir, ec);
    if (ec) return fail("cannot create --log-dir " + opt.log_dir + ": " + ec.message(), 2);
    setenv("CANOPY_LOG_DIR", std::filesystem::absolute(opt.log_dir).c_str(), 1);
  }
  if (opt.sum_stream && opt.workload != "union") {
    return fail("--sum-stream is for --workload union (the demo workload's stream is checked wave by wave already)", 2);
  }
  // --record is checked before anything is launched.
  if (!opt.record_dir.empty()) {
    if (opt.workload != "union") return fail("--record is for --workload union", 2);
    std::error_code ec;
    std::filesystem::create_directories(opt.record_dir, ec);
    if (ec) return fail("cannot create --record directory " + opt.record_dir + ": " + ec.message(), 2);
    if (access(opt.record_dir.c_str(), W_OK) != 0) {
      return fail("cannot write in --record directory " + opt.record_dir + ": " + std::strerror(errno), 2);
    }
  }
  const bool attach = !opt.attach_file.empty();
  if (attach && !opt.backend.empty()) return fail("--attach and --backend exclude each other: attached back-ends are started by you", 2);
  // Attached back-ends are assumed to be the demo back-end; results of a plugin are not checked.
  bool demo = opt.backend.empty() && opt.plugin.empty();
  bool arrays = opt.filter == "concat" || opt.filter == "union";

  canopy::LaunchOptions launch;
  launch.topology = *topology;
  launch.attach_file = opt.attach_file;
  if (!attach) {
    launch.backend_argv = opt.backend.empty() ? std::vector<std::string>{sibling_program("canopy-demo-backend")}
                                              : opt.backend;
  }
  launch.launcher = opt.launcher;
  launch.advertise = opt.advertise;
  launch.method = opt.launch_method;
  launch.startup_timeout = std::chrono::milliseconds(opt.startup_timeout_ms);
  launch.fault_tolerance = opt.fault;
  if (opt.fault.keep_tree_for.count() > 0) {
    if (opt.status_file.empty()) {
      return fail("--keep-tree-for needs --status FILE: a new front-end re-attaches with canopy attach-frontend FILE",
                  2);
    }
    if (!opt.fault.enabled) return fail("--keep-tree-for needs healing: drop --no-healing", 2);
    launch.reattach_file = std::filesystem::absolute(opt.status_file).string() + ".reattach";
    status.add_run_info("\"reattach_file\":" + json_string(launch.reattach_file));
  }
  auto& gossip = launch.fault_tolerance.gossip;
  gossip = topology->gossip().value_or(canopy::GossipOptions{});
  if (opt.gossip.schedule) gossip.schedule = *opt.gossip.schedule;
  if (opt.gossip.period) gossip.period = *opt.gossip.period;
  if (opt.gossip.max_hangup) gossip.max_hangup = *opt.gossip.max_hangup;
  if (opt.gossip.ping_timeout) gossip.ping_timeout = *opt.gossip.ping_timeout;
  launch.topology.set_gossip(std::nullopt);  // merged above: an explicit --gossip off stands
  bool tty = isatty(STDERR_FILENO);
  if (!jsonl && tty) {
    launch.on_progress = [](std::size_t up, std::size_t total) {
      std::fprintf(stderr, "\rlaunched %zu/%zu processes", up, total);
    };
  }
  auto started = Clock::now();
  auto network = canopy::Network::launch(std::move(launch));
  if (!jsonl && tty) std::fprintf(stderr, "\n");
  // A program that cannot be found or run is bad input: exit status 2.
  if (!network) return fail(network.error(), network.error_kind() == canopy::ErrorKind::invalid_input ? 2 : 1);
  double launch_seconds = seconds_since(started);
  auto& net = **network;
  launched = &net;
  if (attach) {
    std::size_t commnodes = topology->size() - backends.size() - 1;
    if (jsonl) {
      std::printf("{\"attach_file\":%s,\"backends\":%zu}\n", json_string(opt.attach_file).c_str(), backends.size());
    } else {
      std::printf("launched %s in %.3f s; attach file %s is waiting for %s, e.g.\n"
                  "  mpirun -np %zu canopy-demo-backend --attach %s\n",
                  count(commnodes, "commnode").c_str(), launch_seconds, opt.attach_file.c_str(),
                  count(backends.size(), "back-end").c_str(), backends.size(), opt.attach_file.c_str());
    }
    std::fflush(stdout);
    auto attached = net.wait_for_backends(std::chrono::milliseconds(opt.startup_timeout_ms));
    if (!attached) return fail(attached.error());
  } else if (!jsonl) {
    std::printf("launched %zu/%zu processes in %.3f s (%s)\n", topology->size(), topology->size(), launch_seconds,
                count(backends.size(), "back-end").c_str());
    std::fflush(stdout);
  }
  status.update(net);
  if (!opt.plugin.empty()) {
    if (auto loaded = net.load_filter(opt.plugin, opt.filter); !loaded) return fail(loaded.error());
  }
  if (opt.workload == "union") {
    return run_union(net, jsonl, opt.rate_hz, opt.duration_s, opt.record_dir, status, backends, fail, opt.sum_stream);
  }

  auto stream = net.create_stream({.upstream_filter = opt.filter});
  if (!stream) return fail(stream.error());
  auto start = canopy::Packet::pack(canopy::demo::kStartTag, "%d %d %d", opt.waves, opt.interval_ms, arrays ? 1 : 0);
  if (auto r = net.broadcast(*stream, *start); !r) return fail(r.error());

  auto run_start = Clock::now();
  int received = 0;  // results, of any wave
  // Waves have identity (docs/fault-tolerance.md, "Waves after a failure"): each
  // result says which wave it is, how many back-ends it holds, and whether it holds
  // every back-end of the stream in the membership view it came in (demo_check.h).
  DemoCheck waves(opt.filter, backends, demo);
  if (!attach) waves.know_view(0, backends);
  status.progress().workload = "demo";
  status.progress().waves_total = static_cast<std::uint64_t>(opt.waves);
  std::optional<std::uint64_t> last_wave;
  // A wave is late when no result came for this long: the workload is stuck. Counted
  // from the last result, not from the schedule: a loaded machine may fall far behind
  // the back-ends' intervals and still be making progress.
  const auto quiet_limit = std::chrono::milliseconds(std::max(10000, opt.interval_ms * 4 + 5000));
  auto last_result = run_start;
  auto handle_events = [&] {
    for (const auto& e : print_events(net, jsonl, status)) {
      if (e.kind == canopy::Event::Kind::view) waves.on_view(e.view);
    }
  };
  const std::uint64_t final_wave = static_cast<std::uint64_t>(std::max(opt.waves, 1) - 1);
  // Interrupted (SIGINT, SIGTERM): the waves that came are checked and summed up
  // before the run exits with 130, so that a long run stopped by hand (or a soak)
  // still says whether what it got was right.
  bool interrupted = false;
  while (!last_wave || *last_wave < final_wave) {
    if (g_signal) {
      interrupted = true;
      break;
    }
    wait_for_packet_or_event(net, std::chrono::milliseconds(200));
    auto in = net.receive(std::chrono::milliseconds(0));
    // Events are printed whether or not a packet came, and those that came before
    // the packet are printed before it; a view event must also be known before the
    // packet of that view is checked.
    handle_events();
    if (!in) return fail(in.error());
    if (!*in) {
      if (Clock::now() - last_result > quiet_limit) {
        return fail("no result for wave " + std::to_string(last_wave ? *last_wave + 1 : 0) + " within " +
                    std::to_string(quiet_limit.count()) + " ms");
      }
      continue;
    }
    const auto& result = **in;
    const auto& packet = result.packet;
    status.count(result.stream);
    ++received;
    status.progress().waves = static_cast<std::uint64_t>(received);
    last_result = Clock::now();
    if (!result.wave) continue;  // of no wave: the demo's filters keep no state
    const std::uint64_t wave = *result.wave;
    last_wave = std::max(last_wave.value_or(0), wave);
    const std::size_t expected = waves.check(result, net);
    if (jsonl) {
      std::string values;
      for (const auto& v : packet.values()) values += (values.empty() ? "" : ",") + canopy::to_json(v);
      std::printf("{\"stream\":%u,\"wave\":%llu,\"values\":[%s],\"contributors\":%u,\"complete\":%s}\n",
                  result.stream, static_cast<unsigned long long>(wave), values.c_str(), result.holds,
                  result.complete ? "true" : "false");
    } else {
      std::string values;
      for (const auto& v : packet.values()) values += (values.empty() ? "" : " ") + canopy::to_string(v);
      std::printf("wave %llu: %s (%s)\n", static_cast<unsigned long long>(wave), values.c_str(),
                  result.complete ? count(result.holds, "back-end").c_str()
                                  : (std::to_string(result.holds) + " of " + std::to_string(expected) +
                                     " back-ends; incomplete")
                                        .c_str());
    }
    std::fflush(stdout);
  }
  double run_seconds = seconds_since(run_start);
  handle_events();  // heard after the last wave, before the tree stops
  std::uint64_t late = 0;
  for (const auto& n : net.status()) late += n.late_packets;
  auto stopped = net.shutdown();
  std::string check = !demo ? "skipped" : waves.mismatches() ? "failed" : "ok";
  const std::string listed = waves.incomplete_list();
  const auto missing = waves.missing(interrupted ? (last_wave ? *last_wave + 1 : 0) : final_wave + 1);
  const std::string missing_listed = DemoCheck::wave_list(missing);
  if (jsonl) {
    std::printf(
        "{\"summary\":{\"waves\":%d,\"backends\":%zu,\"processes\":%zu,\"filter\":%s,\"launch_seconds\":%.6f,"
        "\"run_seconds\":%.6f,\"check\":\"%s\",\"incomplete_waves\":[%s],\"missing_waves\":[%s],"
        "\"late_packets\":%llu%s}}\n",
        received, backends.size(), topology->size(), json_string(opt.filter).c_str(), launch_seconds, run_seconds,
        check.c_str(), listed.c_str(), missing_listed.c_str(), static_cast<unsigned long long>(late),
        interrupted ? ",\"interrupted\":true" : "");
  }
  // The summary line, for a person: printed in text, and the dashboard's and the
  // report's last word either way.
  char head[512];
  std::snprintf(head, sizeof head, "%s of %s over %s in %.3f s; check: %s",
                count(static_cast<std::size_t>(received), "wave").c_str(), opt.filter.c_str(),
                count(backends.size(), "back-end").c_str(), run_seconds, check.c_str());
  std::string summary = head;
  if (!waves.incomplete().empty()) {
    summary += "; " + std::to_string(waves.incomplete().size()) + " incomplete (lost in failures): " + listed;
  }
  if (!missing.empty()) summary += "; " + std::to_string(missing.size()) + " never came (lost whole): " + missing_listed;
  if (interrupted) summary += "; interrupted before wave " + std::to_string(final_wave);
  if (!jsonl) std::printf("%s\n", summary.c_str());
  status.progress().check = check;
  status.progress().summary = summary;
  std::fflush(stdout);
  if (waves.mismatches()) {
    return fail(std::to_string(waves.mismatches()) + " waves did not match the demo workload; first: " +
                waves.first_mismatch());
  }
  if (interrupted) return fail("interrupted by signal " + std::to_string(g_signal.load()), 130);
  if (!stopped) return fail(stopped.error());
  return 0;
}

// Why `canopy run --report PATH` cannot write PATH at the end, or "" if it can (as
// far as can be told before the run): refused before anything is launched, not
// found out after a long run.
std::string report_path_trouble(const std::string& path) {
  namespace fs = std::filesystem;
  const fs::path file(path);
  const fs::path dir = file.has_parent_path() ? file.parent_path() : fs::path(".");
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    return "--report " + path + ": directory " + dir.string() + " does not exist (create it, or give a path in an "
           "existing one)";
  }
  if (fs::is_directory(file, ec)) return "--report " + path + " is a directory; give the path of an HTML file";
  if (access(dir.c_str(), W_OK) != 0) {
    return "--report " + path + ": cannot write in " + dir.string() + ": " + std::strerror(errno);
  }
  return "";
}

// canopy run: the tree's run, --status FILE marked finished when it is over, and
// --report FILE written then.
int run(const RunOptions& opt) {
  if (!opt.report_file.empty()) {
    if (auto trouble = report_path_trouble(opt.report_file); !trouble.empty()) {
      if (opt.format == "jsonl") std::cout << "{\"error\":" << json_string(trouble) << "}" << std::endl;
      std::cerr << "canopy run: " << trouble << "\n";
      return 2;
    }
  }
  StatusWriter status(opt.status_file);
  status.set_report(opt.report_file);
  std::unique_ptr<canopy::tools::Dashboard> dashboard;
  if (!opt.dashboard.empty()) {
    auto started = canopy::tools::Dashboard::start(opt.dashboard, opt.dashboard_anywhere);
    if (!started) {
      if (opt.format == "jsonl") std::cout << "{\"error\":" << json_string(started.error()) << "}" << std::endl;
      std::cerr << "canopy run: " << started.error() << "\n";
      return 2;
    }
    dashboard = std::move(*started);
    status.set_dashboard(dashboard.get());
    if (opt.format == "jsonl") {
      std::printf("{\"dashboard\":%s}\n", json_string(dashboard->url()).c_str());
    } else {
      std::printf("dashboard: %s\n", dashboard->url().c_str());
    }
    std::fflush(stdout);
  }
  if (auto ok = status.start(); !ok) {
    if (opt.format == "jsonl") std::cout << "{\"error\":" << json_string(ok.error()) << "}" << std::endl;
    std::cerr << "canopy run: " << ok.error() << "\n";
    return 2;
  }
  int code = run_tree(opt, status);
  if (auto reported = status.finish(code); !reported) {
    if (opt.format == "jsonl") std::cout << "{\"error\":" << json_string(reported.error()) << "}" << std::endl;
    std::cerr << "canopy run: " << reported.error() << "\n";
    if (code == 0) code = 1;
  }
  // A page open on the dashboard gets the run's end before the server goes.
  if (dashboard) dashboard->let_watchers_see_the_end(std::chrono::seconds(3));
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  signal(SIGPIPE, SIG_IGN);
  // Everything after --backend is the back-end command line, options included.
  std::vector<std::string> backend_command;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::string_view(argv[i]) == "--backend") {
      for (int j = i + 1; j < argc; ++j) backend_command.emplace_back(argv[j]);
      if (backend_command.empty()) {
        std::cerr << "canopy: --backend needs a program (and, after it, its arguments)\n";
        return 2;
      }
      break;
    }
    args.push_back(argv[i]);
  }

  CLI::App app{"Canopy: a fault-tolerant tree-based overlay network for HPC tools", "canopy"};
  app.require_subcommand(0, 1);
  app.set_version_flag("--version", "canopy " CANOPY_VERSION " (wire protocol " + std::to_string(canopy::wire::PROTOCOL_VERSION) + ")");
  app.footer("'canopy help COMMAND' or 'canopy COMMAND --help' lists a command's options; 'man canopy' is the "
             "manual, and docs/ (installed in PREFIX/share/doc/canopy) has the details.");
  std::string help_topic;
  auto* help_cmd = app.add_subcommand("help", "Print this help, or a command's: canopy help run");
  help_cmd->add_option("command", help_topic, "run, status, stack or topgen");
  RunOptions opt;
  auto* run_cmd = app.add_subcommand("run", "Launch a tree, run a workload and print the aggregated results "
                                            "(the default when no subcommand is given)");
  auto* topo_opt = run_cmd->add_option("--topology", opt.topology_file, "Topology file (YAML, docs/topology.md)")
                       ->check(CLI::ExistingFile);
  run_cmd->add_option("--tree", opt.tree, "Generated tree when no --topology: b:F^D (fan-out F, depth D), b:FxFx... (fan-out per "
                      "level), k:K@N (k-nomial, N processes), g:N:N,N:... (child counts level by level); "
                      "docs/topology.md. With --launch slurm it is spread over the allocation's nodes")
      ->capture_default_str()
      ->excludes(topo_opt);
  run_cmd->add_option("--filter", opt.filter,
                      "Upstream filter: sum, min, max, avg, concat, union, or a filter of --plugin")
      ->capture_default_str();
  run_cmd->add_option("--plugin", opt.plugin, "Shared object to load the --filter from (docs/filters.md)")
      ->check(CLI::ExistingFile);
  run_cmd->add_option("--attach", opt.attach_file,
                      "Attach mode: start only the commnodes, write this attach file and wait (--startup-timeout) "
                      "for back-ends started by you, e.g. mpirun -np N canopy-demo-backend --attach FILE "
                      "(docs/attach.md)");
  run_cmd->add_option("--backends", opt.backends,
                      "Attach mode: N back-ends (ranks 0..N-1) will attach below the leaves, which are commnodes: the "
                      "--tree's leaves, or those of an MRNet-format --topology, as MRNet means them in attach mode "
                      "(required there)")
      ->check(canopy::tools::in_range(std::size_t{1}, std::size_t{canopy::kFirstInternalRank}));
  run_cmd->add_option("--waves", opt.waves, "Number of waves")->capture_default_str()->check(canopy::tools::in_range(1, 100000000));
  run_cmd->add_option("--interval", opt.interval_ms, "Milliseconds between a back-end's waves")
      ->capture_default_str()
      ->check(canopy::tools::in_range(0, 3600000));
  run_cmd->add_option("--format", opt.format, "Output: text (for people) or jsonl (one JSON object per line)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "jsonl"}));
  run_cmd->add_option("--startup-timeout", opt.startup_timeout_ms, "Milliseconds each parent waits for its children")
      ->capture_default_str()
      ->check(canopy::tools::in_range(100, 3600000));
  run_cmd->add_option_function<std::string>(
              "--launch",
              [&opt](const std::string& v) {
                opt.launch_method = v == "slurm"    ? canopy::LaunchMethod::slurm
                                    : v == "mpirun" ? canopy::LaunchMethod::mpirun
                                                    : canopy::LaunchMethod::spawn;
              },
              "spawn (default): each parent starts its children, through --launcher on another host; slurm: inside "
              "an allocation, one srun step per level of the tree starts every process; mpirun: the same with one "
              "Open MPI mpirun per level (docs/launch.md)")
      ->check(CLI::IsMember({"spawn", "slurm", "mpirun"}));
  run_cmd->add_option("--advertise", opt.advertise,
                      "The address of this host the front-end listens on and tells its children (numeric; "
                      "default: its host's, or, where that is a loopback address and processes run on other "
                      "hosts, the one this host reaches them from)");
  run_cmd->add_option("--launcher", opt.launcher, "How to start a process on another host ({host}, {command})")
      ->capture_default_str();
  run_cmd->add_option("--hosts", opt.hosts,
                      "Place the --tree on these hosts: host[:slots] entries separated by commas, or a file of them; "
                      "the front-end stays on this host. Without slot counts the tree is spread evenly, each commnode "
                      "with its back-ends on one host; with counts, each host takes at most its slots (this host's "
                      "count includes the front-end) (docs/topology.md)")
      ->excludes(topo_opt);
  run_cmd->add_flag("--print-placement", opt.print_placement,
                    "Before launching, say on standard error which processes each host got, and which commnodes have "
                    "back-ends on other hosts");
  run_cmd->add_option("--ports", opt.ports,
                      "Every process of the tree listens on a port in LO-HI (for firewalls; default: any port, or the "
                      "topology's 'ports:'); a process with no free port there fails to start, saying so");
  run_cmd->add_option("--workload", opt.workload,
                      "demo: the checked waves of docs/demo.md; union: random integers through the "
                      "stateful incremental_union filter, at --rate for --duration, until every back-end of the "
                      "membership view has finished")
      ->capture_default_str()
      ->check(CLI::IsMember({"demo", "union"}));
  run_cmd->add_option("--rate", opt.rate_hz, "union workload: integers per second from each back-end")
      ->capture_default_str()
      ->check(canopy::tools::in_range(1, 100000));
  run_cmd->add_option("--duration", opt.duration_s, "union workload: seconds each back-end sends")
      ->capture_default_str()
      ->check(canopy::tools::in_range(0.0, 86400.0));
  run_cmd->add_option("--record", opt.record_dir,
                      "union workload: each back-end writes what it sent to DIR/be-RANK.txt (VALUE TIME_US a "
                      "line), the front-end its final union to DIR/frontend.txt, and the run checks that the union "
                      "holds everything the surviving back-ends sent, and what failed ones sent more than a second "
                      "before their failure (docs/demo.md)");
  run_cmd->add_flag("--sum-stream", opt.sum_stream,
                    "union workload: beside the union, each back-end sends TICK*1000 + RANK on a sum stream at every "
                    "tick, and the run checks that every complete wave of it is exact and lists the incomplete ones "
                    "(waves through failures: docs/demo.md)");
  auto ms = [](std::chrono::milliseconds& target) {
    return [&target](int v) { target = std::chrono::milliseconds(v); };
  };
  run_cmd->add_option_function<int>("--heartbeat", ms(opt.fault.heartbeat),
                                    "Milliseconds of idleness after which a link carries a heartbeat (500)")
      ->check(canopy::tools::in_range(10, 600000));
  run_cmd->add_option_function<int>("--suspect", ms(opt.fault.suspect),
                                    "Milliseconds of silence after which a peer is suspect (2000)")
      ->check(canopy::tools::in_range(20, 600000));
  run_cmd->add_option_function<int>("--lost", ms(opt.fault.lost),
                                    "Milliseconds of silence after which a peer is lost (5000)")
      ->check(canopy::tools::in_range(30, 3600000));
  run_cmd->add_option_function<std::string>(
              "--gossip", [&opt](const std::string& v) { opt.gossip.schedule = canopy::gossip_schedule_from(v); },
              "Gossip failure detection among the back-ends (docs/gossip.md): off, random, rr, brr or dbrr; "
              "default: the topology's gossip: settings, else off")
      ->check(CLI::IsMember({"off", "random", "rr", "brr", "dbrr"}));
  auto gossip_ms = [](std::optional<std::chrono::milliseconds>& target) {
    return [&target](int v) { target = std::chrono::milliseconds(v); };
  };
  run_cmd->add_option_function<int>("--gossip-period", gossip_ms(opt.gossip.period),
                                    "Milliseconds per gossip round, T_gossip (500)")
      ->check(canopy::tools::in_range(10, 600000));
  run_cmd->add_option_function<int>("--gossip-max-hangup", gossip_ms(opt.gossip.max_hangup),
                                    "Milliseconds added to T_cleanup before a still heartbeat is suspect, "
                                    "T_max_hangup (500)")
      ->check(canopy::tools::in_range(0, 3600000));
  run_cmd->add_option_function<int>("--gossip-ping-timeout", gossip_ms(opt.gossip.ping_timeout),
                                    "Milliseconds a suspect's answer to a ping may take (default: --lost)")
      ->check(canopy::tools::in_range(1, 3600000));
  run_cmd->add_flag_function("--no-healing", [&opt](std::int64_t) { opt.fault.enabled = false; },
                             "Do not heal: losing its parent stops a process and its subtree");
  run_cmd->add_option_function<double>(
              "--keep-tree-for",
              [&opt](double v) { opt.fault.keep_tree_for = std::chrono::milliseconds(std::llround(v * 1000)); },
              "Seconds the tree outlives this front-end if it dies: the lowest commnode under it takes the root's "
              "place, and `canopy attach-frontend` may carry the run on (docs/fault-tolerance.md); 0, the default: "
              "every process exits with it")
      ->check(canopy::tools::in_range(0.0, 86400.0));
  run_cmd->add_flag_function("--standby-links", [&opt](std::int64_t) { opt.fault.standby_links = true; },
                             "Every process keeps an idle connection to its first potential adopter, so that "
                             "adoption is one message (docs/fault-tolerance.md); one connection per process");
  run_cmd->add_option_function<std::string>(
              "--links",
              [&opt](const std::string& v) { opt.links = canopy::link_kind_from(v); },
              "Links of every edge without its own choice: auto (striped where both hosts list several NICs), "
              "plain or striped; overrides the topology's links: (docs/striping.md)")
      ->check(CLI::IsMember({"auto", "plain", "striped"}));
  run_cmd->add_option_function<std::string>(
              "--checksum",
              [&opt](const std::string& v) { opt.checksum = canopy::link_checksum_from(v); },
              "Checksum of striped links: crc32c (default), additive or none")
      ->check(CLI::IsMember({"crc32c", "additive", "none"}));
  run_cmd->add_option_function<double>("--corrupt", [&opt](double v) { opt.corrupt = v; },
                                       "Fault injection: corrupt this fraction of the fragments striped links send, "
                                       "after checksumming (they are caught and sent again)")
      ->check(canopy::tools::in_range(0.0, 0.5));
  run_cmd->footer("--backend EXE [ARGS...]  Run your own back-end program instead of the demo; must come last.");

  run_cmd->add_option("--log-dir", opt.log_dir,
                      "Every process of the tree writes its log here, <role>-<rank>.log (as $CANOPY_LOG_DIR); "
                      "without it nothing is logged, and nothing but canopy's own messages reaches the terminal");
  auto* dashboard_opt = run_cmd->add_option(
      "--dashboard", opt.dashboard,
      "Serve a live web page of the run at [ADDR:]PORT (ADDR 127.0.0.1 by default; port 0 picks one; the URL is "
      "printed first): the tree drawn as it heals, the progress and check, stream rates over time, events in "
      "plain sentences (docs/fault-tolerance.md)");
  run_cmd->add_flag("--dashboard-anywhere", opt.dashboard_anywhere,
                    "Allow --dashboard on an address that is not a loopback one (the page is read-only, but shows "
                    "the tree's hosts to whoever connects)")
      ->needs(dashboard_opt);
  run_cmd->add_option("--report", opt.report_file,
                      "When the run ends, write its last state to FILE as a self-contained HTML page (the tree "
                      "drawn, the events, the progress, the check), readable offline after the run; with or without "
                      "--dashboard. FILE's directory must exist (docs/fault-tolerance.md)");
  run_cmd->add_option("--status", opt.status_file,
                      "Keep FILE up to date with the live tree (JSON), for canopy status FILE");

  std::string status_path, status_format = "text";
  bool status_watch = false;
  double status_interval = 1;
  auto* status_cmd = app.add_subcommand(
      "status",
      "Show the tree of a run started with canopy run --status FILE: running, finished, or stale (its front-end "
      "gone without finishing; exit status 1)");
  status_cmd->add_option("file", status_path, "The status file")->required();
  auto* status_format_opt = status_cmd->add_option("--format", status_format, "text (a tree) or json (the file as is)")
                                ->capture_default_str()
                                ->check(CLI::IsMember({"text", "json"}));
  status_cmd->add_flag("--watch", status_watch,
                       "Redraw the tree until the run is over (waits for FILE if the run has not started)")
      ->excludes(status_format_opt);
  status_cmd->add_option("--interval", status_interval, "Seconds between redraws with --watch")
      ->capture_default_str()
      ->check(canopy::tools::in_range(0.05, 3600.0));

  canopy::tools::AttachFrontendOptions attach_fe_opt;
  auto* attach_fe_cmd = canopy::tools::add_attach_frontend_command(app, attach_fe_opt);

  canopy::tools::StackOptions stack_opt;
  auto* stack_cmd = canopy::tools::add_stack_command(app, stack_opt);


  canopy::tools::TopgenOptions topgen_opt;
  auto* topgen_cmd = canopy::tools::add_topgen_command(app, topgen_opt);

  try {
    app.parse(static_cast<int>(args.size()), args.data());
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;  // bad usage: 2, as the README says (CLI11 has its own codes)
  }
  if (*help_cmd) {
    app.clear();  // else help() describes the command parsed: help itself
    if (help_topic.empty()) {
      std::cout << app.help();
      return 0;
    }
    for (auto* sub : app.get_subcommands({})) {
      if (sub->get_name() == help_topic && sub != help_cmd) {
        std::cout << sub->help("canopy");
        return 0;
      }
    }
    std::cerr << "canopy help: no command '" << help_topic << "' (run, status, attach-frontend, stack, topgen)\n";
    return 2;
  }
  if (*status_cmd) return canopy::tools::status_command(status_path, status_format, status_watch, status_interval);
  if (*stack_cmd) return canopy::tools::run_stack(stack_opt);
  if (*attach_fe_cmd) {
    canopy::tools::catch_interrupts();
    return canopy::tools::run_attach_frontend(attach_fe_opt);
  }
  if (*topgen_cmd) return canopy::tools::run_topgen(topgen_opt);
  opt.backend = backend_command;
  for (const char* name : {"--waves", "--interval", "--filter", "--plugin", "--rate", "--duration"}) {
    if (run_cmd->count(name) > 0) opt.given.emplace_back(name);
  }
  canopy::tools::catch_interrupts();
  return run(opt);
}
