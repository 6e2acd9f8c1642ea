#include "attach_frontend_command.h"

#include <filesystem>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <iostream>

#include "canopy/frontend.h"
#include "cli_checks.h"
#include "run_output.h"
#include "status_file.h"
#include "union_workload.h"

namespace canopy::tools {

CLI::App* add_attach_frontend_command(CLI::App& app, AttachFrontendOptions& opt) {
  auto* cmd = app.add_subcommand(
      "attach-frontend",
      "Re-attach a new front-end to a tree that outlived its own (canopy run --keep-tree-for ... --status FILE) and "
      "carry its run on (docs/fault-tolerance.md)");
  cmd->add_option("file", opt.status_file, "The status file of the run")->required();
  cmd->add_option("--format", opt.format, "Output: text or jsonl (one JSON object a line)")
      ->capture_default_str()
      ->check(CLI::IsMember({"text", "jsonl"}));
  cmd->add_option("--record", opt.record_dir,
                            "Union workload: the directory of the back-ends' records, where DIR/frontend.txt is "
                            "written and checked (default: the run's own --record)");
  cmd->add_option("--timeout", opt.timeout_s,
                            "Seconds to find the process in the root's place and receive the tree's state")
      ->capture_default_str()
      ->check(in_range(0.1, 3600.0));
  return cmd;
}

int run_attach_frontend(const AttachFrontendOptions& opt) {
  const bool jsonl = opt.format == "jsonl";
  auto fail = [&](const std::string& message, int code = 1) {
    if (jsonl) std::cout << "{\"error\":" << json_string(message) << "}" << std::endl;
    std::cerr << "canopy attach-frontend: " << message << "\n";
    return code;
  };
  auto run = read_run_record(opt.status_file);
  if (!run) return fail(run.error(), 2);
  if (run->finished) return fail("the run of " + opt.status_file + " is over: " + run->state_line, 2);
  if (!run->stale) {
    return fail("the front-end of " + opt.status_file + " is still running (" + run->state_line +
                "); re-attach once it is gone", 2);
  }
  if (run->reattach_file.empty()) {
    return fail("the run of " + opt.status_file + " was not started with --keep-tree-for: its tree did not outlive its "
                "front-end", 2);
  }
  if (!std::filesystem::exists(run->reattach_file)) {
    return fail("the re-attach file " + run->reattach_file + " is gone: the tree's grace period ended (its heir "
                "removes the file as it stops), so there is no tree left to re-attach to", 1);
  }
  const std::string record_dir = opt.record_dir.empty() ? run->record_dir : opt.record_dir;
  if (!record_dir.empty() && run->workload != "union") return fail("--record is for a run of the union workload", 2);
  const auto started = Clock::now();
  auto network = canopy::Network::reattach(
      {.reattach_file = run->reattach_file,
       .timeout = std::chrono::milliseconds(static_cast<std::int64_t>(opt.timeout_s * 1000))});
  if (!network) return fail(network.error(), network.error_kind() == canopy::ErrorKind::invalid_input ? 2 : 1);
  auto& net = **network;
  const double took = seconds_since(started);
  StatusWriter status(opt.status_file);
  if (!run->workload.empty()) {
    status.add_run_info("\"workload\":" + json_string(run->workload));
    if (run->union_until) {
      status.add_run_info("\"union_until_ms\":" +
                          std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                             run->union_until->time_since_epoch())
                                             .count()));
    }
    status.add_run_info("\"record\":" + json_string(record_dir));
  }
  status.add_run_info("\"reattach_file\":" + json_string(run->reattach_file));
  status.update(net);
  const auto backends = net.topology().backends();
  const auto view = net.view();
  if (jsonl) {
    std::printf("{\"reattached\":{\"seconds\":%.3f,\"processes\":%zu,\"members\":%zu}}\n", took,
                net.topology().size(), view.members.size());
  } else {
    std::printf("re-attached in %.3f s: %zu processes, %s of view %llu\n", took, net.topology().size(),
                count(view.members.size(), "member").c_str(), static_cast<unsigned long long>(view.id));
  }
  std::fflush(stdout);
  int code = 0;
  if (run->workload == "union") {
    UnionOutcome out;
    for (auto r : backends) {
      if (!view.contains(r)) out.gone_before.insert(r);
    }
    const auto left = run->union_until ? std::chrono::duration_cast<std::chrono::milliseconds>(
                                             *run->union_until - std::chrono::system_clock::now())
                                       : std::chrono::milliseconds(0);
    const auto limit = std::max(left, std::chrono::milliseconds(0)) + std::chrono::seconds(30);
    code = collect_union(net, jsonl, status, backends, limit, out, fail);
    if (code == 0) code = finish_union(net, jsonl, record_dir, backends, out, fail);
  } else {
    // Results and events, as they come, until interrupted or the tree stops.
    while (!g_signal) {
      (void)print_events(net, jsonl, status);
      wait_for_packet_or_event(net, std::chrono::milliseconds(100));
      auto in = net.receive(std::chrono::milliseconds(0));
      if (!in) {
        if (in.error_kind() == canopy::ErrorKind::stopped) break;
        std::fprintf(stderr, "canopy attach-frontend: %s\n", in.error().c_str());
        continue;
      }
      if (!*in) continue;
      std::string values;
      for (const auto& v : (*in)->packet.values()) {
        values += (values.empty() ? "" : jsonl ? "," : " ") + (jsonl ? canopy::to_json(v) : canopy::to_string(v));
      }
      // The wave it closes, if any, and whether it holds every back-end (docs/demo.md).
      const auto& wave = (*in)->wave;
      if (jsonl) {
        const std::string of_wave = wave ? ",\"wave\":" + std::to_string(*wave) + ",\"contributors\":" +
                                               std::to_string((*in)->holds) +
                                               ",\"complete\":" + ((*in)->complete ? "true" : "false")
                                         : "";
        std::printf("{\"stream\":%u,\"tag\":%d,\"values\":[%s]%s}\n", (*in)->stream, (*in)->packet.tag(),
                    values.c_str(), of_wave.c_str());
      } else {
        const std::string of_wave =
            wave ? ", wave " + std::to_string(*wave) + ((*in)->complete ? "" : " (incomplete)") : "";
        std::printf("stream %u, tag %d%s: %s\n", (*in)->stream, (*in)->packet.tag(), of_wave.c_str(), values.c_str());
      }
      std::fflush(stdout);
    }
    if (auto stopped = net.shutdown(); !stopped) code = fail(stopped.error(), 1);
  }
  (void)status.finish(code);  // no --report here: finish() has nothing that can fail
  return code;
}

}  // namespace canopy::tools
