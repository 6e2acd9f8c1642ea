// canopy run --dashboard and --report (docs/fault-tolerance.md, "Watching a run"):
// the page is rendered by a real browser (headless Chromium) while a union run heals
// from a killed commnode, and the tree it draws is compared with the tree the run's
// status file holds at that moment: the commnode lost, its orphans alive under their
// adopters, their links marked adopted. At b:16^2 the browser's screenshot is read
// back (libpng) and must show the drawing. The report outlives the run with the same
// drawing and the check. Also: only GET and HEAD, loopback only unless asked.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <png.h>
#include <yaml-cpp/yaml.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "process_guard.h"
#include "process_test.h"
#include "run_canopy.h"

using namespace std::chrono_literals;
using canopy::testing::exit_code;
using canopy::testing::kCanopy;
using canopy::testing::ProcessGuard;
using canopy::testing::run_canopy;
using canopy::testing::shell;
using canopy::testing::slurp;
using canopy::testing::start_canopy;
using canopy::testing::wait_for;

namespace {

constexpr std::uint32_t C1 = 1000001;  // b:2^2: back-ends 0 and 1 under C1

std::string chromium() {
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    if (shell(std::string("command -v ") + name + " >/dev/null 2>&1").second == 0) return name;
  }
  return "";
}

// A node as the drawing shows it (run_page.h: <g class="node" data-...>).
struct Drawn {
  std::string role, state, parent;
  unsigned incarnation = 0;
};

// The nodes of the tree drawing in `html` (as served, or as the browser holds it).
std::map<std::uint32_t, Drawn> nodes_drawn(const std::string& html) {
  std::map<std::uint32_t, Drawn> out;
  static const std::regex node(
      R"re(<g class="node [a-z -]+" data-rank="(\d+)" data-role="([a-z]+)" data-state="([a-z]+)" data-parent="(\d*)" data-incarnation="(\d+)">)re");
  for (std::sregex_iterator it(html.begin(), html.end(), node), end; it != end; ++it) {
    out[static_cast<std::uint32_t>(std::stoul((*it)[1]))] =
        Drawn{(*it)[2], (*it)[3], (*it)[4], static_cast<unsigned>(std::stoul((*it)[5]))};
  }
  return out;
}

// A link drawn marked adopted, from the adopter (above) to the orphan.
struct AdoptedEdge {
  std::uint32_t parent = 0;
  double parent_y = 0, child_y = 0;
};

// child -> its adopted link, of the drawing in `html`.
std::map<std::uint32_t, AdoptedEdge> adopted_edges(const std::string& html) {
  std::map<std::uint32_t, AdoptedEdge> out;
  static const std::regex edge(
      R"re(<line class="edge adopted[a-z -]*" data-parent="(\d+)" data-child="(\d+)" x1="[-\d.]+" y1="([-\d.]+)" x2="[-\d.]+" y2="([-\d.]+)")re");
  for (std::sregex_iterator it(html.begin(), html.end(), edge), end; it != end; ++it) {
    out[static_cast<std::uint32_t>(std::stoul((*it)[2]))] =
        AdoptedEdge{static_cast<std::uint32_t>(std::stoul((*it)[1])), std::stod((*it)[3]), std::stod((*it)[4])};
  }
  return out;
}

// Every node of the status file `file` is drawn once, in its state (an alive node
// under a lost parent drawn orphaned), under its parent, with its incarnation; and
// nothing else is drawn.
void expect_drawn_as_in_file(const std::map<std::uint32_t, Drawn>& drawn, const std::string& file) {
  const YAML::Node tree = YAML::Load(file);
  EXPECT_EQ(drawn.size(), tree["nodes"].size()) << "nodes drawn, nodes in the status file";
  std::set<std::uint32_t> lost;
  for (const auto& n : tree["nodes"]) {
    if (n["state"].as<std::string>() == "lost") lost.insert(n["rank"].as<std::uint32_t>());
  }
  for (const auto& n : tree["nodes"]) {
    const auto rank = n["rank"].as<std::uint32_t>();
    const auto it = drawn.find(rank);
    ASSERT_NE(it, drawn.end()) << rank << " is not drawn";
    const Drawn& d = it->second;
    const std::string parent = n["parent"].IsNull() ? "" : std::to_string(n["parent"].as<std::uint32_t>());
    const bool orphaned = !parent.empty() && lost.count(static_cast<std::uint32_t>(std::stoul(parent)));
    const std::string state = n["state"].as<std::string>();
    EXPECT_EQ(d.state, state == "alive" && orphaned ? "orphaned" : state) << rank;
    EXPECT_EQ(d.role, n["role"].as<std::string>()) << rank;
    EXPECT_EQ(d.parent, parent) << rank;
    EXPECT_EQ(d.incarnation, n["incarnation"].as<unsigned>()) << rank;
  }
}

// The killed commnode is drawn lost; each of its orphans alive under another
// parent, adopted, and its link to that adopter drawn marked adopted, downwards.
void expect_healed_drawing(const std::string& html, std::uint32_t killed, const std::vector<std::uint32_t>& orphans) {
  const auto drawn = nodes_drawn(html);
  const auto edges = adopted_edges(html);
  ASSERT_TRUE(drawn.count(killed));
  EXPECT_EQ(drawn.at(killed).state, "lost");
  for (std::uint32_t orphan : orphans) {
    ASSERT_TRUE(drawn.count(orphan)) << orphan;
    const Drawn& d = drawn.at(orphan);
    EXPECT_EQ(d.state, "alive") << orphan;
    EXPECT_GE(d.incarnation, 1u) << orphan;
    EXPECT_NE(d.parent, std::to_string(killed)) << orphan;
    const auto e = edges.find(orphan);
    ASSERT_NE(e, edges.end()) << "no adopted link drawn to " << orphan;
    EXPECT_EQ(std::to_string(e->second.parent), d.parent) << orphan;
    EXPECT_LT(e->second.parent_y, e->second.child_y) << "the orphan is drawn under its adopter: " << orphan;
  }
  // No link is marked adopted but those of adopted nodes.
  for (const auto& [child, e] : edges) {
    ASSERT_TRUE(drawn.count(child));
    EXPECT_GE(drawn.at(child).incarnation, 1u) << child;
  }
}

// A PNG read back: its size and pixels (RGB), or nothing if it is not one.
struct Image {
  unsigned width = 0, height = 0;
  std::vector<unsigned char> rgb;
  std::size_t count(unsigned char r, unsigned char g, unsigned char b) const {
    std::size_t n = 0;
    for (std::size_t i = 0; i + 2 < rgb.size(); i += 3) n += rgb[i] == r && rgb[i + 1] == g && rgb[i + 2] == b;
    return n;
  }
  std::size_t colours() const {
    std::set<std::uint32_t> seen;
    for (std::size_t i = 0; i + 2 < rgb.size(); i += 3) seen.insert(rgb[i] << 16 | rgb[i + 1] << 8 | rgb[i + 2]);
    return seen.size();
  }
};
std::optional<Image> read_png(const std::string& path) {
  png_image image{};
  image.version = PNG_IMAGE_VERSION;
  if (!png_image_begin_read_from_file(&image, path.c_str())) return std::nullopt;
  image.format = PNG_FORMAT_RGB;
  Image out;
  out.width = image.width;
  out.height = image.height;
  out.rgb.resize(PNG_IMAGE_SIZE(image));
  if (!png_image_finish_read(&image, nullptr, out.rgb.data(), 0, nullptr)) return std::nullopt;
  return out;
}

// The URL `canopy run --dashboard` printed into `out`, once it has (bounded).
std::string dashboard_url(const std::string& out) {
  std::smatch url;
  const std::regex url_line("dashboard: (http://127\\.0\\.0\\.1:[0-9]+/)");
  std::string printed;
  wait_for([&] { printed = slurp(out); return std::regex_search(printed, url, url_line); }, std::chrono::seconds(30));
  return url.empty() ? "" : url[1].str();
}

class Dashboard : public canopy::testing::ProcessTest {
 protected:
  void SetUp() override {
    char dir[] = "/tmp/canopy-dashboard-test-XXXXXX";
    dir_ = mkdtemp(dir);
  }
  void TearDown() override {
    std::filesystem::remove_all(dir_);
    ProcessTest::TearDown();
  }
  std::string dir_;
};

TEST_F(Dashboard, ChromiumShowsTheTreeAsItHeals) {
  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "no chromium (scripts/setup.sh installs it)";
  const std::string out = dir_ + "/run.out", status = dir_ + "/status.json";
  // Long enough for two browser runs on a loaded machine after the healing: with 8 s
  // the run had ended (its page gone) before the screenshot under stress-ng.
  const pid_t run = start_canopy({"run", "--tree", "b:2^2", "--workload", "union", "--rate", "50", "--duration", "20",
                                  "--dashboard", "0", "--status", status, "--heartbeat", "100", "--suspect", "300",
                                  "--lost", "800"},
                                 out);
  ASSERT_GT(run, 0);

  // The URL comes first; the tree is up once the status file says running.
  std::smatch url;
  const std::regex url_line("dashboard: (http://127\\.0\\.0\\.1:[0-9]+/)");
  std::string printed;
  const bool announced = wait_for([&] { printed = slurp(out); return std::regex_search(printed, url, url_line); }, 20s);
  const bool up = announced && wait_for([&] { return slurp(status).find("\"run\":\"running\"") != std::string::npos; }, 20s);
  // Kill commnode 1000001 once the union flows (its stream made and started: the
  // file names the workload then; "running" alone comes before, and a kill while the
  // stream is being made ends the run, as in CI on 2026-11-27), and wait for the
  // healed tree.
  const bool flowing =
      up && wait_for([&] { return slurp(status).find("\"workload\":\"union\"") != std::string::npos; }, 20s);
  const pid_t c1 = flowing ? ProcessGuard::process_of_rank(C1) : -1;
  const bool killed = c1 > 0 && kill(c1, SIGKILL) == 0;
  std::string healed;
  const bool settled = killed && wait_for([&] {
    auto s = run_canopy({"status", status});
    healed = s.out;
    return s.out.find("commnode 1000001 on localhost: lost") != std::string::npos &&
           s.out.find("backend 0 on localhost: alive (adopted") != std::string::npos &&
           s.out.find("backend 1 on localhost: alive (adopted") != std::string::npos;
  }, 20s);

  // The rate plotted needs two samples, a second apart: the view is waited for.
  const bool plotted = settled && wait_for([&] {
    return shell("curl -s --max-time 5 " + url[1].str() + "view.html").first.find("<polyline class=\"rate\"") !=
           std::string::npos;
  }, 20s);
  // What the browser shows, and, right after, what the run's file holds.
  std::string dom, file;
  bool screenshot = false;
  if (settled) {
    const std::string flags = " --headless --no-sandbox --disable-gpu --user-data-dir=" + dir_ +
                              "/profile --virtual-time-budget=3000 --window-size=1100,900 ";
    dom = shell("timeout 60 " + browser + flags + "--dump-dom " + url[1].str() + " 2>/dev/null").first;
    file = slurp(status);
    shell("cd " + dir_ + " && timeout 60 " + browser + flags + "--screenshot=" + dir_ + "/dashboard.png " +
          url[1].str() + " >/dev/null 2>&1");
    const std::string png = slurp(dir_ + "/dashboard.png");
    screenshot = png.size() > 10000 && png.compare(0, 8, "\x89PNG\r\n\x1a\n") == 0;
    if (const char* keep = std::getenv("CANOPY_KEEP_SCREENSHOT")) {
      std::filesystem::copy_file(dir_ + "/dashboard.png", keep, std::filesystem::copy_options::overwrite_existing);
    }
  }
  int wait_status = 0;
  bool reaped = false;  // wait_for asks once more after the last try
  const bool ended = wait_for([&] { return reaped || (reaped = waitpid(run, &wait_status, WNOHANG) == run); }, 30s);
  if (!ended) {
    kill(run, SIGKILL);
    waitpid(run, &wait_status, 0);
  }
  ASSERT_TRUE(announced) << printed;
  ASSERT_TRUE(up);
  ASSERT_TRUE(flowing) << slurp(status);
  ASSERT_TRUE(killed);
  ASSERT_TRUE(settled) << healed;
  EXPECT_TRUE(ended && WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0)
      << "wait status " << wait_status << "\n" << slurp(out);

  // Every node of the tree is drawn, as the file says it is; the killed commnode
  // lost, its orphans under their adopters, their links marked adopted.
  const auto drawn = nodes_drawn(dom);
  ASSERT_EQ(drawn.size(), 7u) << dom.substr(0, 4000);
  expect_drawn_as_in_file(drawn, file);
  expect_healed_drawing(dom, C1, {0, 1});
  // The failure told in a sentence, with its time; the stream's rate plotted.
  EXPECT_TRUE(std::regex_search(
      dom, std::regex("<span class=\"when\">\\+[0-9]+\\.[0-9] s</span> <span class=\"what\">commnode 1000001 on "
                      "localhost was killed by signal 9[^<]*; back-ends 0, 1 moved to [^<]*</span>")))
      << dom.substr(dom.find("id=\"events\""), 3000);
  EXPECT_TRUE(plotted);
  EXPECT_NE(dom.find("<polyline class=\"rate\" data-stream=\"1\""), std::string::npos) << "the stream's rate is plotted";
  EXPECT_NE(dom.find("Union: <b>"), std::string::npos) << "the union's progress is shown";
  EXPECT_TRUE(screenshot) << "no screenshot";
}

// b:16^2 (273 processes): the page draws every process, the killed commnode lost and
// its 16 orphans under their adopters; Chromium's screenshot of it is a picture of
// that tree (the drawing's colours, in quantity), not a blank or a list. The report
// written when the run is stopped holds the same tree.
// Not under AddressSanitizer: 273 instrumented processes beside another test did not
// start within a minute on two shared cores (scripts/test.sh, 2026-11-29: a commnode
// killed at its start-up time-out). The drawing's code runs under the sanitizers in
// the other tests of this file, at b:2^2; this one is about the picture at scale.
TEST_F(Dashboard, DrawsTheHealedTreeAtB16x2AndTheScreenshotShowsIt) {
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
  GTEST_SKIP() << "273 processes under AddressSanitizer do not start in time on a small machine; the normal build "
                  "runs this test";
#endif
#endif
  const std::string browser = chromium();
  if (browser.empty()) GTEST_SKIP() << "no chromium (scripts/setup.sh installs it)";
  constexpr std::uint32_t C2 = 1000002;  // back-ends 16-31
  const std::string out = dir_ + "/run.out", status = dir_ + "/status.json", report = dir_ + "/report.html";
  const pid_t run = start_canopy({"run", "--tree", "b:16^2", "--workload", "union", "--rate", "5", "--duration", "60",
                                  "--dashboard", "0", "--status", status, "--report", report, "--heartbeat", "200",
                                  "--suspect", "1000", "--lost", "3000", "--startup-timeout", "60000"},
                                 out);
  ASSERT_GT(run, 0);
  const std::string url = dashboard_url(out);
  const bool flowing = !url.empty() && wait_for([&] {
    return slurp(status).find("\"workload\":\"union\"") != std::string::npos;
  }, std::chrono::seconds(90));
  const pid_t c2 = flowing ? ProcessGuard::process_of_rank(C2) : -1;
  const bool killed = c2 > 0 && kill(c2, SIGKILL) == 0;
  std::vector<std::uint32_t> orphans;
  for (std::uint32_t r = 16; r < 32; ++r) orphans.push_back(r);
  // Healed: the commnode lost in the file, and every orphan adopted.
  std::string file;
  const bool settled = killed && wait_for([&] {
    file = slurp(status);
    const auto drawn_from_file = YAML::Load(file)["nodes"];
    std::size_t adopted = 0;
    bool lost = false;
    for (const auto& n : drawn_from_file) {
      const auto rank = n["rank"].as<std::uint32_t>();
      if (rank == C2) lost = n["state"].as<std::string>() == "lost";
      if (rank >= 16 && rank < 32 && n["incarnation"].as<unsigned>() > 0 && n["parent"].as<std::uint32_t>() != C2) {
        ++adopted;
      }
    }
    return lost && adopted == orphans.size();
  }, std::chrono::seconds(60));
  std::string view;
  std::optional<Image> png;
  const std::string shot = dir_ + "/dashboard-b16x2.png";
  // The rate plotted too (two samples, a second apart), for a screenshot of it all.
  const bool plotted = settled && wait_for([&] {
    return shell("curl -s --max-time 5 " + url + "view.html").first.find("<polyline class=\"rate\"") !=
           std::string::npos;
  }, std::chrono::seconds(30));
  if (settled) {
    // The view served now, and the file as it is just after.
    view = shell("curl -s --max-time 20 " + url + "view.html").first;
    file = slurp(status);
    shell("cd " + dir_ + " && timeout 90 " + browser + " --headless --no-sandbox --disable-gpu --user-data-dir=" + dir_ +
          "/profile --virtual-time-budget=3000 --window-size=1280,1100 --screenshot=" + shot + " " + url +
          " >/dev/null 2>&1");
    png = read_png(shot);
    if (const char* keep = std::getenv("CANOPY_KEEP_SCREENSHOT_B16")) {
      std::error_code ignored;
      std::filesystem::copy_file(shot, keep, std::filesystem::copy_options::overwrite_existing, ignored);
    }
  }
  // Stopped by hand: the report is written all the same.
  kill(run, SIGTERM);
  int wait_status = 0;
  bool reaped = false;
  const bool ended = wait_for([&] { return reaped || (reaped = waitpid(run, &wait_status, WNOHANG) == run); },
                              std::chrono::seconds(40));
  if (!ended) {
    kill(run, SIGKILL);
    waitpid(run, &wait_status, 0);
  }
  ASSERT_FALSE(url.empty()) << slurp(out);
  ASSERT_TRUE(flowing) << slurp(status).substr(0, 2000);
  ASSERT_TRUE(killed);
  ASSERT_TRUE(settled) << file.substr(0, 2000);
  EXPECT_TRUE(ended);

  EXPECT_TRUE(plotted);
  const auto drawn = nodes_drawn(view);
  EXPECT_EQ(drawn.size(), 273u);
  expect_drawn_as_in_file(drawn, file);
  expect_healed_drawing(view, C2, orphans);
  std::size_t marks = 0;
  for (const auto& [rank, d] : drawn) marks += d.role == "backend";
  EXPECT_EQ(marks, 256u);
  EXPECT_NE(view.find("256 back-ends"), std::string::npos) << "the summary counts them";

  // The screenshot: the window's size, many colours, and the drawing's own colours
  // in quantity: 256 green back-ends (10x10 each), the orange of adopted links and
  // outlines, the grey of the lost commnode.
  ASSERT_TRUE(png.has_value()) << "no screenshot at " << shot;
  EXPECT_EQ(png->width, 1280u);
  EXPECT_GE(png->height, 1000u);
  EXPECT_GT(png->colours(), 50u) << "a blank page";
  EXPECT_GT(png->count(0x2f, 0x9e, 0x44), 15000u) << "green (alive) pixels: the back-ends drawn";
  EXPECT_GT(png->count(0xd9, 0x48, 0x0f), 300u) << "orange (adopted) pixels";
  EXPECT_GT(png->count(0xce, 0xd4, 0xda), 250u) << "grey (lost) pixels";

  // The report, from the end of the run: the same tree.
  const std::string page = slurp(report);
  const auto reported = nodes_drawn(page);
  EXPECT_EQ(reported.size(), 273u);
  expect_healed_drawing(page, C2, orphans);
}

// --report: after the run, a page of its own holds the final tree (the killed
// commnode lost, its orphans under their adopters), the failure told in a
// sentence, the progress and the check; it needs nothing else to be read (no
// script, nothing fetched).
TEST_F(Dashboard, ReportOutlivesTheRunWithTheFinalTreeAndTheCheck) {
  const std::string out = dir_ + "/run.out", status = dir_ + "/status.json", report = dir_ + "/report.html";
  const pid_t run = start_canopy({"run", "--tree", "b:2^2", "--workload", "union", "--rate", "20", "--duration", "8",
                                  "--record", dir_ + "/record", "--status", status, "--report", report, "--heartbeat",
                                  "100", "--suspect", "300", "--lost", "800"},
                                 out);
  ASSERT_GT(run, 0);
  const bool flowing = wait_for([&] {
    return slurp(status).find("\"workload\":\"union\"") != std::string::npos;
  }, std::chrono::seconds(30));
  const pid_t c1 = flowing ? ProcessGuard::process_of_rank(C1) : -1;
  const bool killed = c1 > 0 && kill(c1, SIGKILL) == 0;
  const bool no_report_yet = !std::filesystem::exists(report);
  int wait_status = 0;
  bool reaped = false;
  const bool ended = wait_for([&] { return reaped || (reaped = waitpid(run, &wait_status, WNOHANG) == run); },
                              std::chrono::seconds(60));
  if (!ended) {
    kill(run, SIGKILL);
    waitpid(run, &wait_status, 0);
  }
  ASSERT_TRUE(flowing) << slurp(out);
  ASSERT_TRUE(killed);
  EXPECT_TRUE(no_report_yet) << "written at the end, not before";
  ASSERT_TRUE(ended);
  EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0) << slurp(out);
  ASSERT_TRUE(std::filesystem::exists(report)) << slurp(out);

  const std::string page = slurp(report);
  const auto drawn = nodes_drawn(page);
  EXPECT_EQ(drawn.size(), 7u) << page.substr(0, 3000);
  expect_drawn_as_in_file(drawn, slurp(status));
  expect_healed_drawing(page, C1, {0, 1});
  EXPECT_NE(page.find("The run finished after"), std::string::npos);
  EXPECT_NE(page.find("<p id=\"check\" class=\"check ok\">Check: ok"), std::string::npos) << "the check's verdict";
  EXPECT_NE(page.find("union of "), std::string::npos) << "the summary line";
  EXPECT_NE(page.find("<span class=\"what\">commnode 1000001 on localhost"), std::string::npos)
      << "the failure told in a sentence";
  EXPECT_NE(page.find("<polyline class=\"rate\""), std::string::npos) << "the rates plotted";
  EXPECT_EQ(page.find("<script"), std::string::npos) << "a report runs no script";
  EXPECT_EQ(page.find(" src="), std::string::npos) << "nor fetches anything";
  EXPECT_EQ(page.find("href="), std::string::npos) << "nor links to anything";
  EXPECT_EQ(page.find("url("), std::string::npos) << "nor styles from elsewhere";
}

// A page that is watching gets the run's end before the server goes: the last view
// served before the front-end stops answering says the run finished, with its check.
TEST_F(Dashboard, AWatchingPageGetsTheRunsEnd) {
  const std::string out = dir_ + "/run.out";
  const pid_t run =
      start_canopy({"run", "--tree", "b:2", "--waves", "40", "--interval", "50", "--dashboard", "0"}, out);
  ASSERT_GT(run, 0);
  const std::string url = dashboard_url(out);
  // Poll as the page does, until the front-end no longer answers (curl: 7).
  std::string last;
  bool refused = false;
  if (!url.empty()) {
    wait_for([&] {
      auto [view, status] = shell("curl -s --max-time 5 " + url + "view.html");
      if (status == 0 && !view.empty()) last = view;
      refused = status == 7;
      if (!refused) std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return refused;
    }, std::chrono::seconds(60));
  }
  int wait_status = 0;
  waitpid(run, &wait_status, 0);
  ASSERT_FALSE(url.empty()) << slurp(out);
  EXPECT_TRUE(refused);
  EXPECT_NE(last.find("The run finished after"), std::string::npos) << last.substr(0, 600);
  EXPECT_NE(last.find("Check: ok"), std::string::npos);
  EXPECT_TRUE(WIFEXITED(wait_status) && WEXITSTATUS(wait_status) == 0);
}

// The demo workload's report: its waves received of how many, its check, the whole
// tree alive, and no event to tell.
TEST_F(Dashboard, ReportOfTheDemoWorkloadShowsItsWavesAndCheck) {
  const std::string report = dir_ + "/demo.html";
  auto run = run_canopy({"run", "--tree", "b:2^2", "--waves", "12", "--interval", "10", "--report", report});
  ASSERT_EQ(exit_code(run), 0) << run.err;
  const std::string page = slurp(report);
  EXPECT_NE(page.find("Waves received: <b>12</b> of 12"), std::string::npos) << page.substr(0, 3000);
  EXPECT_NE(page.find("<p id=\"check\" class=\"check ok\">Check: ok"), std::string::npos);
  EXPECT_NE(page.find("12 waves of sum over 4 back-ends"), std::string::npos) << "the summary line";
  EXPECT_NE(page.find("4 back-ends in the membership view (view 0)"), std::string::npos);
  EXPECT_NE(page.find("None: no process has failed."), std::string::npos);
  const auto drawn = nodes_drawn(page);
  EXPECT_EQ(drawn.size(), 7u);
  for (const auto& [rank, d] : drawn) EXPECT_EQ(d.state, "alive") << rank;
  EXPECT_TRUE(adopted_edges(page).empty());
}

// A --report path whose directory does not exist is refused before anything is
// launched, naming the directory.
TEST_F(Dashboard, ReportInAMissingDirectoryIsRefusedBeforeLaunch) {
  const std::string missing = dir_ + "/no-such-dir";
  auto refused = run_canopy({"run", "--tree", "b:2", "--report", missing + "/report.html"});
  EXPECT_EQ(exit_code(refused), 2);
  EXPECT_NE(refused.err.find("--report " + missing + "/report.html: directory " + missing + " does not exist"),
            std::string::npos)
      << refused.err;
  EXPECT_EQ(refused.out.find("launched"), std::string::npos) << refused.out;
  auto directory = run_canopy({"run", "--tree", "b:2", "--report", dir_});
  EXPECT_EQ(exit_code(directory), 2);
  EXPECT_NE(directory.err.find("is a directory"), std::string::npos) << directory.err;
}

TEST_F(Dashboard, IsReadOnlyAndOnLoopbackUnlessAsked) {
  auto refused = run_canopy({"run", "--tree", "b:1", "--dashboard", "0.0.0.0:0"});
  EXPECT_EQ(exit_code(refused), 2);
  EXPECT_NE(refused.err.find("0.0.0.0 is not a loopback address"), std::string::npos) << refused.err;
  auto bad = run_canopy({"run", "--tree", "b:1", "--dashboard", "localhost:x"});
  EXPECT_EQ(exit_code(bad), 2);
  EXPECT_NE(bad.err.find("give PORT or ADDRESS:PORT"), std::string::npos) << bad.err;
  // A run long enough to ask it, over striped links: POST is refused, an unknown page
  // is 404, and the state names each link's kind and NICs.
  const std::string out = dir_ + "/run.out";
  const pid_t run = start_canopy(
      {"run", "--tree", "b:1", "--waves", "100", "--interval", "50", "--links", "striped", "--dashboard", "0"}, out);
  ASSERT_GT(run, 0);
  std::smatch url;
  const std::regex url_line("dashboard: (http://127\\.0\\.0\\.1:[0-9]+/)");
  std::string printed;
  const bool announced = wait_for([&] { printed = slurp(out); return std::regex_search(printed, url, url_line); }, 20s);
  std::string post, post_form, missing, state;
  if (announced) {
    post = shell("curl -s -o /dev/null -w '%{http_code}' -X POST " + url[1].str()).first;
    // With a body (issue 45: the connection was closed without an answer).
    post_form = shell("curl -s -o /dev/null -w '%{http_code}' -d 'a=1' " + url[1].str() + "state.json").first;
    missing = shell("curl -s -o /dev/null -w '%{http_code}' " + url[1].str() + "secret").first;
    wait_for([&] {
      state = shell("curl -s " + url[1].str() + "state.json").first;
      return state.find("\"rank\":0,") != std::string::npos;
    }, 20s);
  }
  kill(run, SIGTERM);
  waitpid(run, nullptr, 0);
  ASSERT_TRUE(announced) << printed;
  EXPECT_EQ(post, "405");
  EXPECT_EQ(post_form, "405");
  EXPECT_EQ(missing, "404");
  EXPECT_NE(state.find("\"link\":\"striped\",\"nics\":\"127.0.0.1 to 127.0.0.1\""), std::string::npos) << state;
}

// Connections beyond the cap are answered 503 and closed at once (issue 45: 1,100
// held-open connections used up the front-end's descriptors and held adoptions back).
TEST_F(Dashboard, HoldsAtMost64ConnectionsAndTurnsAwayTheRest) {
  const std::string out = dir_ + "/run.out";
  const pid_t run = start_canopy({"run", "--tree", "b:1", "--waves", "1000", "--interval", "50", "--dashboard", "0"}, out);
  ASSERT_GT(run, 0);
  std::smatch url;
  const std::regex url_line("dashboard: (http://127\\.0\\.0\\.1:([0-9]+)/)");
  std::string printed;
  const bool announced = wait_for([&] { printed = slurp(out); return std::regex_search(printed, url, url_line); }, 20s);
  std::vector<pollfd> held;
  std::size_t turned_away = 0, served = 0;
  std::string page;
  if (announced) {
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(static_cast<std::uint16_t>(std::stoi(url[2].str())));
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    // 100 silent connections: the first 64 are served (each until 10 s of silence),
    // the rest answered 503 and closed.
    for (int i = 0; i < 100; ++i) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      if (fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) held.push_back({fd, POLLIN, 0});
    }
    // Those turned away are readable (the answer, then end of file) within 2 s.
    for (auto until = std::chrono::steady_clock::now() + 2s; std::chrono::steady_clock::now() < until;) {
      poll(held.data(), held.size(), 100);
    }
    for (const auto& p : held) {
      char buf[256];
      const ssize_t n = (p.revents & POLLIN) ? recv(p.fd, buf, sizeof buf, 0) : -1;
      if (n > 0 && std::string(buf, n).find(" 503 ") != std::string::npos) ++turned_away;
      else if (!(p.revents & POLLIN)) ++served;
    }
    // Closed, they make room again.
    for (const auto& p : held) close(p.fd);
    wait_for([&] {
      page = shell("curl -s -o /dev/null -w '%{http_code}' " + url[1].str()).first;
      return page == "200";
    }, 20s);
  }
  kill(run, SIGTERM);
  waitpid(run, nullptr, 0);
  ASSERT_TRUE(announced) << printed;
  EXPECT_EQ(held.size(), 100u);
  EXPECT_EQ(served, 64u) << "connections held open";
  EXPECT_EQ(turned_away, 36u) << "connections answered 503";
  EXPECT_EQ(page, "200") << "the page once the connections closed";
}

}  // namespace
