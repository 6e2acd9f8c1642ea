#include "status_file.h"

#include <signal.h>
#include <unistd.h>

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <iterator>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <thread>
#include <vector>

namespace canopy::tools {

namespace {

std::string json_string(const std::string& s) { return to_json(Value{s}); }

std::string this_host() {
  char name[256] = {};
  if (gethostname(name, sizeof name - 1) != 0) return "";
  return name;
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The start time of process `pid` (clock ticks since boot, /proc/PID/stat field 22),
// which tells a process from a later one given the same pid; nullopt if none runs
// (a zombie, dead but not yet reaped, runs no more).
std::optional<std::uint64_t> process_start(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string text((std::istreambuf_iterator<char>(in)), {});
  const auto close = text.rfind(')');  // the command name may hold spaces and parentheses
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(text.substr(close + 2));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 3 && (field == "Z" || field == "X")) return std::nullopt;
    if (i == 22) return std::stoull(field);
  }
  return std::nullopt;
}

}  // namespace

StatusWriter::StatusWriter(std::string path)
    : path_(std::move(path)),
      process_(",\"host\":" + json_string(this_host()) + ",\"pid\":" + std::to_string(getpid()) +
               ",\"pid_start\":" + std::to_string(process_start(getpid()).value_or(0))) {}

Result<void> StatusWriter::start() {
  publish("\"run\":\"starting\"", "starting", std::nullopt);
  if (path_.empty() || write("\"run\":\"starting\"")) return {};
  return Error{"cannot write --status " + path_ + ": " + std::strerror(errno)};
}

void StatusWriter::update(Network& net) {
  if (path_.empty() && !watching()) return;
  const Topology& topology = net.topology();
  std::string json = "\"nodes\":[";
  bool first = true;
  const auto tree = net.status();
  nodes_.clear();
  for (const auto& n : tree) {
    nodes_.push_back({n, ""});
    json += first ? "\n" : ",\n";
    first = false;
    json += "{\"rank\":" + std::to_string(n.rank) + ",\"role\":\"" + std::string(to_string(n.role)) +
            "\",\"host\":" + json_string(n.host) + ",\"parent\":" +
            (n.parent ? std::to_string(*n.parent) : std::string("null")) + ",\"state\":\"" +
            (n.alive ? "alive" : "lost") + "\",\"incarnation\":" + std::to_string(n.incarnation) + ",\"children\":[";
    for (std::size_t i = 0; i < n.children.size(); ++i) json += (i ? "," : "") + std::to_string(n.children[i]);
    json += "]";
    // The link to its current parent, as configured (docs/striping.md): its kind, and
    // for a striped link the NICs at each end.
    const canopy::TopologyNode* self = topology.find(n.rank);
    const canopy::TopologyNode* parent = n.parent ? topology.find(*n.parent) : nullptr;
    if (self && parent) {
      const LinkKind kind = topology.link_between(*self, *parent);
      json += ",\"link\":\"" + std::string(to_string(kind)) + "\"";
      nodes_.back().link = std::string(to_string(kind));
      if (kind == LinkKind::striped) {
        std::string nics;
        for (const auto& nic : topology.nics_of(self->host)) nics += (nics.empty() ? "" : ",") + nic;
        nics += " to ";
        bool first_nic = true;
        for (const auto& nic : topology.nics_of(parent->host)) {
          nics += (first_nic ? "" : ",") + nic;
          first_nic = false;
        }
        json += ",\"nics\":" + json_string(nics);
        nodes_.back().link += " (NICs " + nics + ")";
      }
    }
    if (n.role == Role::backend) {
      json += std::string(",\"member\":") + (n.member ? "true" : "false") + ",\"epoch\":" + std::to_string(n.epoch) +
              ",\"stale_dropped\":" + std::to_string(n.stale_dropped);
    }
    if (n.late_packets) json += ",\"late_packets\":" + std::to_string(n.late_packets);
    json += "}";
  }
  const auto view = net.view();
  json += "\n],\"view\":{\"id\":" + std::to_string(view.id) + ",\"members\":" + std::to_string(view.members.size()) + "}";
  tree_ = std::move(json);
  view_ = view;
  story_.observe(tree);
  sample_rates();
  if (!path_.empty()) write("\"run\":\"running\"");
  publish("\"run\":\"running\"", "running", std::nullopt);
}

void StatusWriter::refresh(Network& net) {
  const auto now = std::chrono::steady_clock::now();
  if ((!path_.empty() && now - last_ >= std::chrono::seconds(1)) ||
      (dashboard_ && now - last_publish_ >= std::chrono::milliseconds(250)) ||
      (watching() && now - last_sample_ >= std::chrono::seconds(1))) {
    update(net);
  }
}

void StatusWriter::note(const Event& event, std::string text) {
  if (!watching()) return;
  story_.add(event, std::move(text));
}

void StatusWriter::sample_rates() {
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - last_sample_).count();
  if (!watching() || seconds < 1.0) return;
  last_sample_ = now;
  const double at = std::chrono::duration<double>(now - started_).count();
  // At most kKept samples a stream: beyond, each two neighbours become one, so that
  // a long run's whole history stays, at half the resolution.
  constexpr std::size_t kKept = 600;
  for (auto& [id, s] : streams_) {
    s.samples.emplace_back(at, static_cast<double>(s.packets - s.at_last_sample) / seconds);
    s.at_last_sample = s.packets;
    if (s.samples.size() > kKept) {
      std::vector<std::pair<double, double>> halved;
      for (std::size_t i = 0; i + 1 < s.samples.size(); i += 2) {
        halved.emplace_back(s.samples[i + 1].first, (s.samples[i].second + s.samples[i + 1].second) / 2);
      }
      if (s.samples.size() % 2) halved.push_back(s.samples.back());
      s.samples = std::move(halved);
    }
  }
}

RunPage StatusWriter::page(const std::string& run, std::optional<int> exit_status) const {
  RunPage page;
  page.run = run;
  page.exit_status = exit_status;
  page.host = this_host();
  page.pid = getpid();
  page.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
  page.nodes = nodes_;
  page.view = view_;
  page.progress = progress_;
  // The rate "now" over the last second sampled: over the last 250 ms, a stream of a
  // few packets a second reads 0 one time and 8 the next.
  for (const auto& [id, s] : streams_) {
    page.rates.push_back({id, s.packets, s.samples.empty() ? s.per_second : s.samples.back().second, s.samples});
  }
  page.events.assign(story_.entries().begin(), story_.entries().end());
  return page;
}

void StatusWriter::publish(const std::string& run_fields, const std::string& run, std::optional<int> exit_status) {
  if (!dashboard_) return;
  const auto now = std::chrono::steady_clock::now();
  const double seconds = std::chrono::duration<double>(now - last_publish_).count();
  std::string streams;
  for (auto& [id, s] : streams_) {
    if (last_publish_ != std::chrono::steady_clock::time_point{} && seconds > 0) {
      s.per_second = static_cast<double>(s.packets - s.at_last_publish) / seconds;
    }
    s.at_last_publish = s.packets;
    char entry[128];
    std::snprintf(entry, sizeof entry, "%s{\"id\":%u,\"packets\":%llu,\"per_second\":%.3f}",
                  streams.empty() ? "" : ",", id, static_cast<unsigned long long>(s.packets), s.per_second);
    streams += entry;
  }
  std::string events;
  for (const auto& e : story_.entries()) {
    std::string detail;
    for (const auto& line : e.detail) detail += (detail.empty() ? "" : ",") + json_string(line);
    char at[32];
    std::snprintf(at, sizeof at, "%.3f", e.at_s);
    events += std::string(events.empty() ? "" : ",") + "{\"time_s\":" + at + ",\"kind\":" + json_string(e.kind) +
              ",\"text\":" + json_string(e.headline) + ",\"detail\":[" + detail + "]}";
  }
  last_publish_ = now;
  dashboard_->publish("{" + tree_ + ",\n" + run_fields + info_ + process_ + ",\"time_ms\":" + std::to_string(now_ms()) +
                          ",\"streams\":[" + streams + "],\"events\":[" + events + "]}\n",
                      render_run_view(page(run, exit_status)));
}

Result<void> StatusWriter::finish(int exit_status) {
  const std::string run = keep_for_reattach_ ? "handed over" : "finished";
  if (!keep_for_reattach_) {
    publish("\"run\":\"finished\",\"exit_status\":" + std::to_string(exit_status), run, exit_status);
    if (!path_.empty()) write("\"run\":\"finished\",\"exit_status\":" + std::to_string(exit_status));
  }
  if (report_path_.empty()) return {};
  const std::string temporary = report_path_ + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << render_report(page(run, exit_status));
    if (!out.flush()) {
      const std::string why = std::strerror(errno);
      std::remove(temporary.c_str());
      return Error{"cannot write --report " + report_path_ + ": " + why};
    }
  }
  if (std::rename(temporary.c_str(), report_path_.c_str()) != 0) {
    const std::string why = std::strerror(errno);
    std::remove(temporary.c_str());
    return Error{"cannot write --report " + report_path_ + ": " + why};
  }
  return {};
}

bool StatusWriter::write(const std::string& run_fields) {
  last_ = std::chrono::steady_clock::now();
  const std::string json = "{" + tree_ + ",\n" + run_fields + info_ + process_ + ",\"time_ms\":" + std::to_string(now_ms()) + "}\n";
  const std::string temporary = path_ + ".tmp";
  {
    std::ofstream out(temporary, std::ios::trunc);
    out << json;
    if (!out.flush()) return false;  // a full disk leaves the last good file in place
  }
  return std::rename(temporary.c_str(), path_.c_str()) == 0;
}

namespace {

enum class RunState { running, finished, stale };

struct Frame {
  std::string text;
  RunState state = RunState::running;
};

double seconds(std::int64_t ms) { return static_cast<double>(ms) / 1000.0; }

// The run's state line, and its state: a file that says "running" is stale when its
// process is gone (checked on its own host) or, seen from another host, when it has
// not been updated for 10 s.
std::pair<std::string, RunState> run_line(const YAML::Node& doc) {
  char buffer[512];
  const auto pid = doc["pid"] ? doc["pid"].as<long long>() : 0;
  const auto host = doc["host"] ? doc["host"].as<std::string>() : std::string();
  const double age = doc["time_ms"] ? seconds(now_ms() - doc["time_ms"].as<std::int64_t>()) : 0.0;
  const std::string who = "pid " + std::to_string(pid) + (host.empty() ? "" : " on " + host);
  const std::string state = doc["run"] ? doc["run"].as<std::string>() : "running";
  const bool tree = doc["nodes"] && doc["nodes"].size() > 0;
  if (state == "finished") {
    std::snprintf(buffer, sizeof buffer, "run: finished %.0f s ago with exit status %d (%s); %s", age,
                  doc["exit_status"] ? doc["exit_status"].as<int>() : -1, who.c_str(),
                  tree ? "the tree as it ended:" : "it ended before its tree was up");
    return {buffer, RunState::finished};
  }
  if (pid > 0 && (host.empty() || host == this_host())) {
    const auto start = process_start(static_cast<pid_t>(pid));
    const auto recorded = doc["pid_start"] ? doc["pid_start"].as<std::uint64_t>() : 0;
    if (!start || (recorded && *start != recorded)) {
      std::snprintf(buffer, sizeof buffer,
                    "run: STALE: %s is gone without finishing (killed?); last updated %.0f s ago; the tree as it was "
                    "then:",
                    who.c_str(), age);
      return {buffer, RunState::stale};
    }
  } else if (age > 10) {
    std::snprintf(buffer, sizeof buffer,
                  "run: STALE: not updated for %.0f s (%s, which cannot be checked from here); the tree as it was "
                  "then:",
                  age, who.c_str());
    return {buffer, RunState::stale};
  }
  std::snprintf(buffer, sizeof buffer, "run: %s (%s, updated %.1f s ago)",
                state == "starting" ? "starting, the tree is not up yet" : "running", who.c_str(), age);
  return {buffer, RunState::running};
}

Result<Frame> render(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    return Error{"cannot read " + path + ": " + std::strerror(errno) + " (start the run with canopy run --status " +
                 path + ")"};
  }
  std::string text((std::istreambuf_iterator<char>(in)), {});
  struct Entry {
    std::string role, host, state;
    std::uint32_t incarnation = 0;
    std::vector<Rank> children;
    bool member = true;  // back-ends; status files of older versions say nothing
    std::uint32_t epoch = 0;
    std::uint64_t stale_dropped = 0;
    std::uint64_t late_packets = 0;
  };
  std::map<Rank, Entry> nodes;
  std::vector<Rank> order;
  YAML::Node doc;
  Frame frame;
  std::string run;
  try {
    doc = YAML::Load(text);  // JSON is YAML
    for (const auto& n : doc["nodes"]) {
      Entry e;
      e.role = n["role"].as<std::string>();
      e.host = n["host"].as<std::string>();
      e.state = n["state"].as<std::string>();
      e.incarnation = n["incarnation"].as<std::uint32_t>();
      for (const auto& c : n["children"]) e.children.push_back(c.as<Rank>());
      if (n["member"]) e.member = n["member"].as<bool>();
      if (n["epoch"]) e.epoch = n["epoch"].as<std::uint32_t>();
      if (n["stale_dropped"]) e.stale_dropped = n["stale_dropped"].as<std::uint64_t>();
      if (n["late_packets"]) e.late_packets = n["late_packets"].as<std::uint64_t>();
      auto rank = n["rank"].as<Rank>();
      order.push_back(rank);
      nodes.emplace(rank, std::move(e));
    }
    std::tie(run, frame.state) = run_line(doc);
  } catch (const YAML::Exception& e) {
    return Error{path + " is not a status file: " + e.what()};
  }
  std::ostringstream out;
  out << run << "\n";
  if (order.empty()) {
    if (!doc["run"]) return Error{path + " lists no processes"};
    frame.text = out.str();
    return frame;
  }
  std::size_t alive = 0, lost = 0;
  for (const auto& [rank, e] : nodes) (e.state == "alive" ? alive : lost)++;
  std::set<Rank> shown;
  std::function<void(Rank, const std::string&, bool, bool)> print = [&](Rank rank, const std::string& prefix,
                                                                         bool last, bool root) {
    if (!shown.insert(rank).second) return;
    auto it = nodes.find(rank);
    if (it == nodes.end()) return;
    const auto& e = it->second;
    out << prefix << (root ? "" : last ? "`- " : "|- ") << e.role << " " << rank << " on " << e.host << ": " << e.state;
    if (e.incarnation) out << " (adopted, incarnation " << e.incarnation << ")";
    if (e.role == "backend" && !e.member) out << ", not a member of the view (epoch " << e.epoch << ")";
    if (e.stale_dropped) out << ", " << e.stale_dropped << " stale message(s) kept out";
    if (e.late_packets) out << ", " << e.late_packets << " late packet(s) dropped (their wave had closed)";
    out << "\n";
    std::string below = prefix + (root ? "" : last ? "   " : "|  ");
    for (std::size_t i = 0; i < e.children.size(); ++i) print(e.children[i], below, i + 1 == e.children.size(), false);
  };
  print(order.front(), "", true, true);
  for (auto rank : order) {
    if (!shown.count(rank) && nodes[rank].state == "lost") print(rank, "", true, true);
  }
  out << alive << " alive, " << lost << " lost";
  try {
    if (doc["view"]) {
      out << "; membership view " << doc["view"]["id"].as<std::uint64_t>() << ": "
          << doc["view"]["members"].as<std::size_t>() << " members";
    }
  } catch (const YAML::Exception& e) {
    return Error{path + " is not a status file: " + e.what()};
  }
  out << "\n";
  frame.text = out.str();
  return frame;
}

int exit_status_of(RunState state) { return state == RunState::stale ? 1 : 0; }

int watch(const std::string& path, double interval_s) {
  const bool tty = isatty(STDOUT_FILENO);
  const auto interval = std::chrono::duration<double>(interval_s);
  std::string last_error;
  while (true) {
    auto frame = render(path);
    std::string text;
    if (frame) {
      text = frame->text;
    } else if (access(path.c_str(), F_OK) != 0) {  // not there yet: the run has not started
      text = "waiting for " + path + " (start the run with canopy run --status " + path + ")\n";
    } else {
      std::cerr << "canopy status: " << frame.error() << "\n";
      return 2;
    }
    const bool over = frame && frame->state != RunState::running;
    // A terminal is redrawn in place; a pipe or a file gets one frame after another.
    if (tty) std::cout << "\033[H\033[2J";
    std::cout << text;
    if (!over) std::cout << "(watching " << path << " every " << interval_s << " s; Ctrl-C to stop)\n";
    if (!tty) std::cout << "\n";
    std::cout << std::flush;
    if (over) return exit_status_of(frame->state);
    std::this_thread::sleep_for(interval);
  }
}

}  // namespace

int status_command(const std::string& path, const std::string& format, bool watching, double interval_s) {
  if (watching) return watch(path, interval_s);
  if (format == "json") {
    std::ifstream in(path);
    if (!in) {
      std::cerr << "canopy status: cannot read " << path << ": " << std::strerror(errno)
                << " (start the run with canopy run --status " << path << ")\n";
      return 2;
    }
    std::cout << std::string((std::istreambuf_iterator<char>(in)), {});
    return 0;
  }
  auto frame = render(path);
  if (!frame) {
    std::cerr << "canopy status: " << frame.error() << "\n";
    return 2;
  }
  std::cout << frame->text;
  return exit_status_of(frame->state);
}

Result<RunRecord> read_run_record(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Error{"cannot read " + path + ": " + std::strerror(errno), ErrorKind::invalid_input};
  std::string text((std::istreambuf_iterator<char>(in)), {});
  RunRecord record;
  try {
    const YAML::Node doc = YAML::Load(text);  // JSON is YAML
    if (!doc.IsMap() || !doc["run"]) return Error{path + " is not a status file (no \"run\")", ErrorKind::invalid_input};
    RunState state;
    std::tie(record.state_line, state) = run_line(doc);
    record.stale = state == RunState::stale;
    record.finished = state == RunState::finished;
    if (doc["workload"]) record.workload = doc["workload"].as<std::string>();
    if (doc["union_until_ms"]) {
      record.union_until = std::chrono::system_clock::time_point(
          std::chrono::milliseconds(doc["union_until_ms"].as<std::int64_t>()));
    }
    if (doc["record"]) record.record_dir = doc["record"].as<std::string>();
    if (doc["reattach_file"]) record.reattach_file = doc["reattach_file"].as<std::string>();
  } catch (const YAML::Exception& e) {
    return Error{path + " is not a status file: " + e.what(), ErrorKind::invalid_input};
  }
  return record;
}

}  // namespace canopy::tools
