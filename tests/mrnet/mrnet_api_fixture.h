// The fixture of the MRNet API tests (mrnet_api_test.cpp, mrnet_topology_test.cpp):
// an MRNet tool's front-end on real trees over loopback, with MRNet-style back-ends
// (mrnet_be.cpp), and what every test checks at its end.
#pragma once

#include <gtest/gtest.h>

#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

#include <atomic>
#include <cstdarg>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <iterator>
#include <set>
#include <thread>
#include <typeinfo>

#include "mrnet/MRNet.h"
#include "mrnet_test_protocol.h"
#include "xplat/Mutex.h"
#include "xplat/NetUtils.h"
#include "xplat/Thread.h"
#include "process_test.h"

extern char** environ;

using namespace std::chrono_literals;
using canopy::testing::ProcessGuard;
using namespace MRN;

// Named, not anonymous: both test files must share one MrnetApi class (gtest
// requires one fixture per suite).
namespace mrnet_api {

const std::string kBackend = std::string(CANOPY_TEST_BIN_DIR) + "/mrnet_be";
constexpr Rank kFrontEnd = 1000000;

// 1x2x4 in MRNet's format: a front-end, two commnodes, four back-ends.
inline const char* const kTree =
    "localhost:0 => localhost:1 localhost:2 ;\n"
    "localhost:1 => localhost:3 localhost:4 ;\n"
    "localhost:2 => localhost:5 localhost:6 ;\n";

class MrnetApi : public canopy::testing::ProcessTest {
 protected:
  void SetUp() override {
    setenv("CANOPY_COMMNODE", (std::string(CANOPY_BIN_DIR) + "/canopy-commnode").c_str(), 1);
    ASSERT_TRUE(ProcessGuard::descendants().empty()) << "processes left over before the test";
    dir_ = std::filesystem::temp_directory_path() /
           ("canopy-mrnet-" + std::to_string(getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override {
    delete net_;
    net_ = nullptr;
    ProcessTest::TearDown();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string write(const std::string& name, const std::string& text) {
    auto path = (dir_ / name).string();
    std::ofstream(path) << text;
    return path;
  }

  Network* launch(const char* tree = kTree, const std::map<std::string, std::string>* attrs = nullptr) {
    const std::string topology = write("tree.top", tree);
    const std::string dir = dir_.string();
    const char* argv[] = {dir.c_str(), nullptr};
    net_ = Network::CreateNetworkFE(topology.c_str(), kBackend.c_str(), argv, attrs);
    if (net_->has_Error()) {
      ADD_FAILURE() << "CreateNetworkFE: " << net_->error_detail();
      return nullptr;
    }
    return net_;
  }

  // How each back-end ended (its note), once the tree is gone.
  std::map<Rank, std::string> outcomes() {
    std::map<Rank, std::string> out;
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      const auto name = entry.path().filename().string();
      if (name.rfind("be-", 0) != 0) continue;
      std::ifstream in(entry.path());
      out[std::stoul(name.substr(3))] = std::string(std::istreambuf_iterator<char>(in), {});
    }
    return out;
  }

  // Sends TAG_SUM {10} on `stream` and returns the sum that comes back (each
  // back-end adds its rank to it), or -1 after a failure, which it reports.
  int sum_once(Stream* stream, unsigned* holds = nullptr) {
    int tag = 0, total = 0;
    PacketPtr packet;
    if (stream->send(TAG_SUM, "%d", 10) != 0 || stream->recv(&tag, packet) != 1 ||
        packet->unpack("%d", &total) != 0) {
      ADD_FAILURE() << "no sum: " << net_->error_detail();
      return -1;
    }
    if (holds) *holds = packet->get_WaveBackends();
    return total;
  }
  // The first sum whose wave holds `backends` back-ends (Packet::get_WaveBackends),
  // waves 20 ms apart for at most 10 s: right after adoptions, waves close before
  // the last orphan's streams have joined its adopter's (an orphan descheduled for a
  // few milliseconds misses several), and hold fewer (they say so).
  // `partial(total, holds)` checks each of those.
  int sum_of(Stream* stream, unsigned backends, const std::function<void(int, unsigned)>& partial) {
    int total = -1;
    std::string seen;
    for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
         std::chrono::steady_clock::now() < deadline;) {
      unsigned holds = 0;
      total = sum_once(stream, &holds);
      if (holds == backends || total < 0) return total;
      partial(total, holds);
      seen += " " + std::to_string(total) + " of " + std::to_string(holds);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ADD_FAILURE() << "no wave of " << backends << " back-ends within 10 s:" << seen;
    return total;
  }

  // Sends TAG_EXIT on `stream` (summed to 0), deletes the network and checks that
  // every back-end ended well and no process is left.
  // Waits (at most 20 s) for `orphans` adoptions (TOPOL_CHANGE_PARENT), failing on any
  // error event on the way; returns how many came.
  int wait_for_adoptions(Network* net, int orphans) {
    int adopted = 0;
    for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
         adopted < orphans && std::chrono::steady_clock::now() < deadline;) {
      std::unique_ptr<Event> e(net->next_Event());
      if (!e) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
        continue;
      }
      EXPECT_NE(e->get_Class(), Event::ERROR_EVENT)
          << static_cast<ErrorEvent::ErrorEventData*>(e->get_Data())->get_Message();
      adopted += e->get_Type() == TopologyEvent::TOPOL_CHANGE_PARENT;
    }
    return adopted;
  }

  // Sends `tag` ("") on `stream`, takes the back-ends' answer, deletes the network
  // and checks that no process of it is left.
  void end_with(Stream* stream, int tag) {
    ASSERT_NE(stream, nullptr) << net_->error_detail();
    ASSERT_EQ(stream->send(tag, ""), 0);
    int answered = 0;
    PacketPtr p;
    ASSERT_EQ(stream->recv(&answered, p), 1);
    EXPECT_EQ(answered, tag);
    delete net_;
    net_ = nullptr;
    EXPECT_TRUE(ProcessGuard::wait_for_none(15s).empty()) << "processes of the tree outlived their front-end";
  }

  void finish(Stream* stream, unsigned int backends) {
    ASSERT_NO_FATAL_FAILURE(end_with(stream, TAG_EXIT));
    auto ended = outcomes();
    EXPECT_EQ(ended.size(), backends);
    for (const auto& [rank, outcome] : ended) {
      const auto newline = outcome.find('\n');
      EXPECT_EQ(outcome.substr(0, newline), "ok") << "back-end " << rank;
      // Told once why, however deep in the tree: "... shutdown: front-end shut down".
      const std::string why = newline == std::string::npos ? "" : outcome.substr(newline + 1);
      EXPECT_NE(why.find("shutdown: front-end shut down"), std::string::npos) << why;
      EXPECT_EQ(why.find("shutdown: shutdown"), std::string::npos) << why;
    }
  }

  Network* net_ = nullptr;
  std::filesystem::path dir_;
};

}  // namespace mrnet_api

using namespace mrnet_api;
