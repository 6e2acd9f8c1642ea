#include "union_workload.h"

#include <sys/statvfs.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "demo_protocol.h"
#include "run_output.h"

namespace canopy::tools {

int collect_union(canopy::Network& net, bool jsonl, StatusWriter& status, const std::vector<canopy::Rank>& backends,
                  std::chrono::milliseconds limit, UnionOutcome& out,
                  const Fail& fail) {
  using canopy::demo::WallClock;
  auto run_start = Clock::now();
  // Waited for: every back-end that has not left the membership view. (Not the
  // members of Network::view(): in attach mode a back-end that has attached may not
  // have joined the view yet when the workload starts.)
  std::set<canopy::Rank> finished;  // back-ends whose end marker arrived
  std::map<canopy::Rank, WallClock::time_point> failure_time;  // back-ends' failure events
  auto& failed = out.failed;
  const std::set<canopy::Rank> is_backend(backends.begin(), backends.end());
  std::size_t waiting = backends.size() - out.gone_before.size();
  auto handle_events = [&] {
    for (const auto& e : print_events(net, jsonl, status)) {
      if (e.kind == canopy::Event::Kind::failure && is_backend.count(e.rank)) {
        // Known late (an orphan nobody adopted): since when nothing of it came through.
        failure_time.emplace(e.rank, e.time - e.silent);
      } else if (e.kind == canopy::Event::Kind::gossip && is_backend.count(e.rank)) {
        // A hung member: it stopped about when its heartbeat was last seen growing.
        failure_time.emplace(e.rank, e.time - e.silent);
      } else if (e.kind == canopy::Event::Kind::view) {
        if (out.sum) out.sum->on_view(e.view);
        // A back-end leaves the view after its failure event; a view event's own time
        // stands in if there was none (it is later: the check is then more lenient).
        for (auto r : e.left) {
          auto it = failure_time.find(r);
          if (!out.gone_before.count(r) && failed.emplace(r, it != failure_time.end() ? it->second : e.time).second &&
              is_backend.count(r) && !finished.count(r)) {
            --waiting;
          }
        }
      }
    }
  };
  auto unfinished = [&] {
    std::vector<canopy::Rank> ranks;
    for (auto r : backends) {
      if (!finished.count(r) && !failed.count(r) && !out.gone_before.count(r)) ranks.push_back(r);
    }
    return ranks;
  };
  double last_report = 0;
  std::size_t last_size = out.result.size();
  auto& result = out.result;
  // After the last end marker: the sum's last waves, while one comes at least every
  // kSumQuiet.
  constexpr auto kSumQuiet = std::chrono::seconds(2);
  std::optional<Clock::time_point> sum_heard;
  auto sum_done = [&] {
    if (!out.sum) return true;
    if (!sum_heard) sum_heard = Clock::now();
    return out.sum_missing().empty() ||
           Clock::now() - *sum_heard > kSumQuiet;
  };
  while (true) {
    handle_events();
    if (waiting == 0 && sum_done()) break;
    if (g_signal) return fail("interrupted by signal " + std::to_string(g_signal.load()), 130);
    if (Clock::now() - run_start > limit) {
      return fail("back-ends " + rank_list(unfinished()) + " did not finish within " +
                  std::to_string(limit.count() / 1000) + " s (and did not leave the membership view)", 1);
    }
    wait_for_packet_or_event(net, std::chrono::milliseconds(100));
    auto in = net.receive(std::chrono::milliseconds(0));
    if (!in) {
      handle_events();  // what went wrong, as the front-end heard it
      return fail(in.error(), 1);
    }
    if (*in && out.sum && (*in)->stream == out.sum_stream) {
      status.count((*in)->stream);
      out.sum->check(**in, net);
      if (sum_heard) sum_heard = Clock::now();
    } else if (*in) {
      ++out.packets;
      status.count((*in)->stream);
      for (const auto& v : (*in)->packet.values()) {
        auto* xs = std::get_if<std::vector<std::int32_t>>(&v);
        if (!xs) continue;
        for (auto x : *xs) {
          if (x < 0) {
            auto r = static_cast<canopy::Rank>(-1 - x);  // canopy::demo::union_end_marker
            if (r >= static_cast<canopy::Rank>(canopy::demo::kRecordFailed)) {
              r -= canopy::demo::kRecordFailed;  // union_record_failed_marker
              out.record_failed.insert(r);
            }
            if (is_backend.count(r) && finished.insert(r).second && !failed.count(r) && !out.gone_before.count(r)) {
              --waiting;
            }
          } else {
            result.insert(x);
          }
        }
      }
    }
    status.progress().union_size = result.size();
    status.progress().packets = out.packets;
    double t = seconds_since(run_start);
    if (t - last_report >= 1.0) {
      std::size_t size = result.size();
      if (jsonl) {
        std::printf("{\"time\":%.3f,\"union_size\":%zu,\"new_per_second\":%.1f,\"packets\":%zu}\n", t, size,
                    (size - last_size) / (t - last_report), out.packets);
      } else {
        std::printf("%.1f s: union has %zu integers (+%.0f/s)\n", t, size, (size - last_size) / (t - last_report));
      }
      std::fflush(stdout);
      last_report = t;
      last_size = size;
    }
  }
  out.seconds = seconds_since(run_start);
  return 0;
}

int finish_union(canopy::Network& net, bool jsonl, const std::string& record_dir,
                 const std::vector<canopy::Rank>& backends, UnionOutcome& out,
                 const Fail& fail) {
  const auto& result = out.result;
  auto& failed = out.failed;
  std::string check = "skipped";
  canopy::demo::UnionCheck counts;
  // What stopped the recording, said with the check (a full disk: its free space).
  std::string record_trouble;
  if (!record_dir.empty()) {
    errno = 0;
    std::ofstream file(std::filesystem::path(record_dir) / "frontend.txt", std::ios::trunc);
    for (auto x : result) file << x << '\n';
    if (!file.flush()) {
      // Only a copy for the user: the check below is made in memory.
      record_trouble = "cannot write " + record_dir + "/frontend.txt" + (errno ? std::string(": ") + std::strerror(errno) : "");
    }
    if (!out.record_failed.empty()) {
      std::vector<canopy::Rank> ranks(out.record_failed.begin(), out.record_failed.end());
      std::string free_space;
      struct statvfs fs {};
      if (statvfs(record_dir.c_str(), &fs) == 0) {
        free_space = " (its file system has " + std::to_string(static_cast<std::uint64_t>(fs.f_bavail) * fs.f_frsize) +
                     " bytes free)";
      }
      record_trouble = std::string(record_trouble.empty() ? "" : record_trouble + "; ") + "back-end(s) " +
                       rank_list(ranks) + " could not write their record in " + record_dir + free_space +
                       ": each stopped sending integers at the first it could not record, so the check covers what "
                       "was recorded (their own errors say why)";
    }
    std::map<canopy::Rank, std::vector<canopy::demo::RecordedValue>> records;
    for (auto r : backends) {
      auto path = std::filesystem::path(record_dir) / ("be-" + std::to_string(r) + ".txt");
      // A back-end that failed before the start packet reached it wrote nothing.
      if ((failed.count(r) || out.gone_before.count(r)) && !std::filesystem::exists(path)) continue;
      auto values = canopy::demo::read_record(path);
      if (!values) return fail(values.error(), 1);
      if (out.gone_before.count(r)) {
        // Gone before this front-end: it failed about when it recorded its last integer.
        canopy::demo::WallClock::time_point last{};
        for (const auto& v : *values) last = std::max(last, v.time.value_or(last));
        failed.emplace(r, last);
      }
      records.emplace(r, std::move(*values));
    }
    counts = canopy::demo::check_union(result, records, failed);
    check = counts.ok() ? "ok" : "failed";
  } else {
    for (auto r : out.gone_before) failed.emplace(r, canopy::demo::WallClock::time_point{});
  }
  // The sum beside the union: every complete wave exact, the incomplete ones listed.
  std::string sum_json;
  // Waves of the sum that never came: lost whole in a failure, or still on their way
  // when the run ended.
  const auto sum_missing = out.sum_missing();
  if (out.sum) {
    std::uint64_t late = 0;
    for (const auto& n : net.status()) late += n.late_packets;
    sum_json = ",\"sum\":{\"complete_waves\":" + std::to_string(out.sum->complete()) + ",\"incomplete_waves\":[" +
               out.sum->incomplete_list() + "],\"missing_waves\":[" + DemoCheck::wave_list(sum_missing) +
               "],\"wrong_waves\":" + std::to_string(out.sum->mismatches()) +
               ",\"late_packets\":" + std::to_string(late) + "}";
  }
  if (jsonl) {
    std::printf("{\"summary\":{\"workload\":\"union\",\"backends\":%zu,\"union_size\":%zu,\"expected\":%zu,"
                "\"missing\":%zu,\"extra\":%zu,\"failed_backends\":%zu,\"late_values\":%zu,\"late_arrived\":%zu,"
                "\"run_seconds\":%.3f,\"check\":\"%s\"%s%s}}\n",
                backends.size(), result.size(), counts.expected, counts.missing, counts.extra, failed.size(),
                counts.late_values, counts.late_arrived, out.seconds, check.c_str(), sum_json.c_str(),
                record_trouble.empty() ? "" : (",\"record_error\":" + json_string(record_trouble)).c_str());
  }
  char head[256];
  std::snprintf(head, sizeof head, "union of %s from %s in %.3f s; check: %s", count(result.size(), "integer").c_str(),
                count(backends.size(), "back-end").c_str(), out.seconds, check.c_str());
  std::string summary = head;
  if (check != "skipped") {
    summary += " (" + std::to_string(counts.expected) + " expected, " + std::to_string(counts.missing) + " missing, " +
               std::to_string(counts.extra) + " extra)";
  }
  if (!failed.empty()) {
    std::vector<canopy::Rank> ranks;
    for (const auto& [r, t] : failed) ranks.push_back(r);
    summary += "; " + std::to_string(failed.size()) + " failed back-end(s) " + rank_list(ranks);
    if (check != "skipped") {
      summary += ": " + std::to_string(counts.late_arrived) + " of " + std::to_string(counts.late_values) +
                 " late integers arrived";
    }
  }
  std::string sum_line;
  if (out.sum) {
    sum_line = "sum beside it: " + std::to_string(out.sum->complete()) + " complete waves, " +
               std::to_string(out.sum->incomplete().size()) + " incomplete (lost in failures), " +
               std::to_string(sum_missing.size()) + " never came, " + std::to_string(out.sum->mismatches()) + " wrong";
  }
  if (!jsonl) {
    std::printf("%s\n", summary.c_str());
    if (out.sum) std::printf("%s\n", sum_line.c_str());
  }
  out.check = out.sum && out.sum->mismatches() ? "failed" : check;
  out.summary = summary + (sum_line.empty() ? "" : "; " + sum_line);
  std::fflush(stdout);
  auto stopped = net.shutdown();
  if (!record_trouble.empty()) {
    return fail(record_trouble + (check == "failed" ? "; and the union differs from what the back-ends recorded" : ""),
                1);
  }
  if (check == "failed") return fail("the union differs from what the back-ends sent", 1);
  if (out.sum && out.sum->mismatches()) {
    return fail(std::to_string(out.sum->mismatches()) + " waves of the sum beside the union were wrong; first: " +
                    out.sum->first_mismatch(),
                1);
  }
  if (!stopped) return fail(stopped.error(), 1);
  return 0;
}

int run_union(Network& net, bool jsonl, int rate_hz, double duration_s, const std::string& record_dir,
              StatusWriter& status, const std::vector<Rank>& backends, const Fail& fail, bool sum_stream) {
  UnionOutcome out;
  if (sum_stream) {
    // First, so that every back-end knows it before the union starts.
    auto sum = net.create_stream({.upstream_filter = "sum"});
    if (!sum) return fail(sum.error(), 1);
    if (auto r = net.broadcast(*sum, canopy::Packet{canopy::demo::kUnionSumTag, {}}); !r) return fail(r.error(), 1);
    out.sum_stream = *sum;
    out.sum = std::make_unique<DemoCheck>("sum", backends, true);
  }
  auto stream = net.create_stream({.upstream_filter = "incremental_union"});
  if (!stream) return fail(stream.error(), 1);
  const auto duration_ms = static_cast<std::int32_t>(duration_s * 1000);
  if (out.sum) {
    // As a back-end counts its ticks (demo_backend.cpp): one every 1000000 / rate µs
    // from its start, while before its end.
    const auto duration_us = static_cast<std::uint64_t>(std::max(duration_ms, 0)) * 1000;
    const auto period_us = static_cast<std::uint64_t>(1000000 / std::max(rate_hz, 1));
    out.sum_waves = (duration_us + period_us - 1) / period_us;
  }
  std::string record = record_dir.empty() ? "" : std::filesystem::absolute(record_dir).string();
  if (auto r = net.broadcast(*stream, canopy::Packet{canopy::demo::kUnionStartTag, {rate_hz, duration_ms, record}});
      !r) {
    return fail(r.error(), 1);
  }
  // What a front-end re-attaching to this tree needs to carry the run on.
  const auto until = std::chrono::system_clock::now() + std::chrono::milliseconds(duration_ms);
  status.add_run_info("\"workload\":\"union\",\"union_until_ms\":" +
                      std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(until.time_since_epoch()).count()) +
                      ",\"record\":" + json_string(record));
  status.update(net);
  const auto limit = std::chrono::milliseconds(duration_ms) + std::chrono::seconds(30);
  status.progress().workload = "union";
  status.progress().send_seconds = duration_s;
  if (int code = collect_union(net, jsonl, status, backends, limit, out, fail); code != 0) return code;
  const int code = finish_union(net, jsonl, record_dir, backends, out, fail);
  status.progress().check = out.check;
  status.progress().summary = out.summary;
  return code;
}

}  // namespace canopy::tools
