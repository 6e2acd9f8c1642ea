// MRNet's attach mode as MRNet's own example (Examples/NoBackEndInstantiation) runs
// it, unchanged: the front-end starts only the commnodes and is told nothing of the
// back-ends; the tool hands each back-end a leaf's host, port and rank and a rank of
// its own choosing (1000 + i), and starts it from another shell, whose environment
// has no CANOPY_ATTACH; each one that attaches is a TOPOL_ADD_BE event
// (docs/mrnet.md, "Attach mode").
#include "child_process.h"
#include "mrnet_api_fixture.h"

namespace {

class MrnetAttach : public MrnetApi {
 protected:
  void SetUp() override {
    MrnetApi::SetUp();
    places_ = dir_ / "attach-dir";
    setenv("CANOPY_ATTACH_DIR", places_.c_str(), 1);
    unsetenv("CANOPY_BACKENDS");
  }
  void TearDown() override {
    MrnetApi::TearDown();
    unsetenv("CANOPY_ATTACH_DIR");
  }

  // mrnet_be NOTES HOST PORT PARENT localhost RANK, as start_BE.sh starts it: with
  // this process's environment less CANOPY_ATTACH (set for the processes the
  // front-end starts itself). Its stderr goes to NOTES/stderr-RANK.
  pid_t start(const std::string& notes, NetworkTopology::Node* parent, Rank rank) {
    const pid_t pid = canopy::testing::spawn(
        {kBackend, notes, parent->get_HostName(), std::to_string(parent->get_Port()),
         std::to_string(parent->get_Rank()), "localhost", std::to_string(rank)},
        {}, {"CANOPY_ATTACH"}, notes + "/stderr-" + std::to_string(rank));
    EXPECT_GT(pid, 0) << "cannot start " << kBackend;
    return pid;
  }

  // Symbolic links left in the attach directory.
  std::vector<std::string> links() {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(places_, ec)) {
      if (entry.is_symlink()) out.push_back(entry.path().filename().string());
    }
    return out;
  }

  std::filesystem::path places_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

TEST_F(MrnetAttach, MrnetsOwnAttachExampleRunsUnchanged) {
  const std::string topology = write("tree.top", "localhost:0 => localhost:1 localhost:2 ;\n");
  net_ = Network::CreateNetworkFE(topology.c_str(), nullptr, nullptr);  // FE.C's call
  ASSERT_FALSE(net_->has_Error()) << net_->error_detail();
  std::atomic<int> added{0};
  ASSERT_TRUE(net_->register_EventCallback(
      Event::TOPOLOGY_EVENT, TopologyEvent::TOPOL_ADD_BE,
      [](Event*, void* data) { ++*static_cast<std::atomic<int>*>(data); }, &added));
  std::vector<NetworkTopology::Node*> leaves;
  net_->get_NetworkTopology()->get_Leaves(leaves);
  ASSERT_EQ(leaves.size(), 2u) << net_->get_NetworkTopology()->get_TopologyString();
  for (auto* leaf : leaves) EXPECT_GT(leaf->get_Port(), 0) << "leaf " << leaf->get_Rank() << " has no port";
  EXPECT_EQ(links().size(), 2u) << "one link per commnode back-ends join under";

  // write_be_connections: four back-ends, two per leaf, ranks 1000 + i.
  const std::string notes = dir_.string();
  std::map<Rank, Rank> chosen;
  for (Rank i = 0; i < 4; ++i) {
    chosen[1000 + i] = leaves[i / 2]->get_Rank();
    ASSERT_GT(start(notes, leaves[i / 2], 1000 + i), 0);
  }
  for (auto deadline = std::chrono::steady_clock::now() + 30s; added < 4 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(added.load(), 4) << slurp(notes + "/stderr-1000");
  std::vector<NetworkTopology::Node*> backends;
  net_->get_NetworkTopology()->get_Leaves(backends);
  std::map<Rank, Rank> parents;
  for (auto* be : backends) parents[be->get_Rank()] = be->get_Parent();
  EXPECT_EQ(parents, chosen) << "each back-end is where the tool put it";
  Communicator* some = net_->new_Communicator();
  ASSERT_NE(some, nullptr);
  EXPECT_TRUE(some->add_EndPoint(1003)) << "a back-end that attached is an endpoint";
  EXPECT_FALSE(some->add_EndPoint(1004)) << "one that did not is not";
  EXPECT_EQ(some->size(), 1u);

  // A second process under a rank the tree has is refused; the tree is unchanged.
  const std::string twin_notes = (dir_ / "twin").string();
  std::filesystem::create_directories(twin_notes);
  const pid_t twin = start(twin_notes, leaves[1], 1001);
  EXPECT_NE(canopy::testing::wait_exit(twin, 20s), -1) << "the second 1001 was still running";
  const std::string told = slurp(twin_notes + "/be-1001") + slurp(twin_notes + "/stderr-1001");
  EXPECT_NE(told.find("1001 is in the tree already"), std::string::npos) << told;
  std::filesystem::remove_all(twin_notes);

  Stream* sum = net_->new_Stream(net_->get_BroadcastCommunicator(), TFILTER_SUM, SFILTER_WAITFORALL);
  ASSERT_NE(sum, nullptr) << net_->error_detail();
  EXPECT_EQ(sum->size(), 4u);
  EXPECT_EQ(sum_once(sum), 4 * 10 + 1000 + 1001 + 1002 + 1003);
  // Point to point, on the back-end's own stream (id = its rank), as to a launched one.
  ASSERT_EQ(net_->send(1002, TAG_SUM, "%d", 5), 0) << net_->error_detail();
  int tag = 0, value = 0;
  PacketPtr reply;
  Stream* from = nullptr;
  ASSERT_EQ(net_->recv(&tag, reply, &from), 1) << net_->error_detail();
  EXPECT_EQ(from->get_Id(), 1002u);
  ASSERT_EQ(reply->unpack("%d", &value), 0);
  EXPECT_EQ(value, 1007);
  // A back-end that joins after the per-back-end streams were made has its own, as
  // in MRNet: a send to it is answered. The stream made before it joined has not
  // taken it in (MRNet's do not either).
  ASSERT_GT(start(notes, leaves[0], 1004), 0);
  for (auto deadline = std::chrono::steady_clock::now() + 30s; added < 5 && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(added.load(), 5);
  Stream* own = net_->get_Stream(1004);
  ASSERT_NE(own, nullptr) << "no per-back-end stream for the back-end that joined last";
  EXPECT_EQ(own->size(), 1u);
  ASSERT_EQ(net_->send(1004, TAG_SUM, "%d", 5), 0) << net_->error_detail();
  ASSERT_EQ(net_->recv(&tag, reply, &from), 1) << net_->error_detail();
  EXPECT_EQ(from->get_Id(), 1004u);
  ASSERT_EQ(reply->unpack("%d", &value), 0);
  EXPECT_EQ(value, 1009);
  EXPECT_EQ(sum->size(), 4u);
  EXPECT_EQ(sum_once(sum), 4 * 10 + 1000 + 1001 + 1002 + 1003);
  // A stream made now has it.
  Stream* all = net_->new_Stream(net_->get_BroadcastCommunicator(), TFILTER_SUM, SFILTER_WAITFORALL);
  ASSERT_NE(all, nullptr) << net_->error_detail();
  EXPECT_EQ(all->size(), 5u);
  EXPECT_EQ(sum_once(all), 5 * 10 + 1000 + 1001 + 1002 + 1003 + 1004);
  finish(all, 5);
  EXPECT_TRUE(links().empty()) << "the links to the attach file are gone with the tree";
}

// A back-end whose parent has no link in the attach directory (and no CANOPY_ATTACH)
// says where it looked.
TEST_F(MrnetAttach, ABackendWithoutItsAttachFileSaysWhereItLooked) {
  const std::string topology = write("tree.top", "localhost:0 => localhost:1 ;\n");
  net_ = Network::CreateNetworkFE(topology.c_str(), nullptr, nullptr);
  ASSERT_FALSE(net_->has_Error()) << net_->error_detail();
  std::vector<NetworkTopology::Node*> leaves;
  net_->get_NetworkTopology()->get_Leaves(leaves);
  ASSERT_EQ(leaves.size(), 1u);
  std::filesystem::remove_all(places_);  // as if the tool ran on a host without the user's directory
  const std::string notes = dir_.string();
  const int status = canopy::testing::wait_exit(start(notes, leaves[0], 5), 20s);
  EXPECT_TRUE(status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 2) << status;
  const std::string err = slurp(notes + "/stderr-5");
  EXPECT_NE(err.find("CANOPY_ATTACH does not name an attach file"), std::string::npos) << err;
  EXPECT_NE(err.find(places_.string()), std::string::npos) << err;
}

}  // namespace

namespace {

// The tool names the attach file (attribute CANOPY_ATTACH_FILE) outside the attach
// directory: the links there lead to it by its path, and go with the tree.
TEST_F(MrnetAttach, AnAttachFileNamedElsewhereIsLinkedByItsPath) {
  const std::string topology = write("tree.top", "localhost:0 => localhost:1 ;\n");
  const std::map<std::string, std::string> attrs{{"CANOPY_ATTACH_FILE", (dir_ / "tool.attach").string()}};
  net_ = Network::CreateNetworkFE(topology.c_str(), nullptr, nullptr, &attrs);
  ASSERT_FALSE(net_->has_Error()) << net_->error_detail();
  std::vector<NetworkTopology::Node*> leaves;
  net_->get_NetworkTopology()->get_Leaves(leaves);
  ASSERT_EQ(leaves.size(), 1u);
  ASSERT_EQ(links().size(), 1u);
  EXPECT_EQ(std::filesystem::read_symlink(places_ / links()[0]), dir_ / "tool.attach");
  ASSERT_GT(start(dir_.string(), leaves[0], 42), 0);
  Communicator* all = nullptr;
  for (auto deadline = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < deadline;) {
    all = net_->get_BroadcastCommunicator();
    if (all->size() == 1) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(all->size(), 1u) << slurp(dir_.string() + "/stderr-42");
  Stream* sum = net_->new_Stream(all, TFILTER_SUM, SFILTER_WAITFORALL);
  ASSERT_NE(sum, nullptr) << net_->error_detail();
  EXPECT_EQ(sum_once(sum), 10 + 42);
  finish(sum, 1);
  EXPECT_TRUE(links().empty());
}

}  // namespace

namespace {

// The attach directory cannot be made (here: a file is in the way): the front-end
// still starts, its attach file in the temporary directory, and back-ends it leaves
// CANOPY_ATTACH to still join.
TEST_F(MrnetAttach, WithoutAnAttachDirectoryTheFrontEndStillStarts) {
  std::ofstream(dir_ / "in-the-way") << "a file\n";
  setenv("CANOPY_ATTACH_DIR", (dir_ / "in-the-way" / "attach").c_str(), 1);
  const std::string topology = write("tree.top", "localhost:0 => localhost:1 ;\n");
  net_ = Network::CreateNetworkFE(topology.c_str(), nullptr, nullptr);
  ASSERT_FALSE(net_->has_Error()) << net_->error_detail();
  const char* file = std::getenv("CANOPY_ATTACH");
  ASSERT_NE(file, nullptr);
  EXPECT_EQ(std::filesystem::path(file).parent_path(), std::filesystem::temp_directory_path());
  std::vector<NetworkTopology::Node*> leaves;
  net_->get_NetworkTopology()->get_Leaves(leaves);
  ASSERT_EQ(leaves.size(), 1u);
  const Rank prank = leaves[0]->get_Rank();
  const pid_t pid = canopy::testing::spawn({kBackend, dir_.string(), leaves[0]->get_HostName(),
                                            std::to_string(leaves[0]->get_Port()), std::to_string(prank), "localhost",
                                            "3"},
                                           {}, {}, (dir_ / "stderr-3").string());
  ASSERT_GT(pid, 0);
  Communicator* all = nullptr;
  for (auto deadline = std::chrono::steady_clock::now() + 20s; std::chrono::steady_clock::now() < deadline;) {
    all = net_->get_BroadcastCommunicator();
    if (all->size() == 1) break;
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(all->size(), 1u) << slurp((dir_ / "stderr-3").string());
  Stream* sum = net_->new_Stream(all, TFILTER_SUM, SFILTER_WAITFORALL);
  ASSERT_NE(sum, nullptr) << net_->error_detail();
  EXPECT_EQ(sum_once(sum), 10 + 3);
  finish(sum, 1);
}

}  // namespace
