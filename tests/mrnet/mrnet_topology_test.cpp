// MRNet's topology on Canopy as the tree's processes see it (docs/mrnet.md): what a
// filter function is told of its node (TopologyLocalInfo) and a back-end's
// get_NetworkTopology, before and after a commnode is killed.
#include "mrnet_api_fixture.h"

namespace {

// A back-end's get_NetworkTopology is the live tree as the back-end knows it: every
// node, and after a commnode is killed, the failure and each orphan's new parent
// (failure and adoption reports reach the back-ends too).
TEST_F(MrnetApi, ABackendsTopologyIsTheLiveTreeToo) {
  auto* net = launch();
  ASSERT_NE(net, nullptr);
  Stream* each = net->new_Stream(net->get_BroadcastCommunicator(), TFILTER_NULL, SFILTER_WAITFORALL);
  ASSERT_NE(each, nullptr) << net->error_detail();
  const Rank commnode = kFrontEnd + 1;
  // Each back-end's answer (TAG_TOPOLOGY): nodes, back-ends, parent, commnode failed.
  auto ask = [&] {
    std::map<Rank, std::vector<unsigned int>> told;
    EXPECT_EQ(each->send(TAG_TOPOLOGY, "%ud", commnode), 0);
    for (int i = 0; i < 4; ++i) {
      int tag = 0;
      PacketPtr p;
      if (each->recv(&tag, p) != 1) {
        ADD_FAILURE() << "no answer: " << net->error_detail();
        break;
      }
      unsigned int rank = 0, nodes = 0, backends = 0, parent = 0, failed = 0;
      EXPECT_EQ(p->unpack("%ud %ud %ud %ud %ud", &rank, &nodes, &backends, &parent, &failed), 0);
      told[rank] = {nodes, backends, parent, failed};
    }
    return told;
  };
  using Told = std::map<Rank, std::vector<unsigned int>>;
  EXPECT_EQ(ask(), (Told{{0, {7, 4, commnode, 0}},
                         {1, {7, 4, commnode, 0}},
                         {2, {7, 4, kFrontEnd + 2, 0}},
                         {3, {7, 4, kFrontEnd + 2, 0}}}));

  const pid_t pid = ProcessGuard::process_of_rank(commnode);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  // Once the front-end's tree has both orphans adopted, every back-end's must come
  // to agree with it (the reports may reach a back-end a moment later).
  NetworkTopology* topology = net->get_NetworkTopology();
  auto parent_of = [&](Rank r) { return topology->find_Node(r)->get_Parent(); };
  auto deadline = std::chrono::steady_clock::now() + 30s;
  while ((parent_of(0) == commnode || parent_of(1) == commnode) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(20ms);
    topology = net->get_NetworkTopology();
  }
  ASSERT_NE(parent_of(0), commnode);
  ASSERT_NE(parent_of(1), commnode);
  // Six nodes now: a failed one is marked, and no longer counted.
  const Told healed{{0, {6, 4, parent_of(0), 1}},
                    {1, {6, 4, parent_of(1), 1}},
                    {2, {6, 4, kFrontEnd + 2, 1}},
                    {3, {6, 4, kFrontEnd + 2, 1}}};
  Told told = ask();
  while (told != healed && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    told = ask();
  }
  EXPECT_EQ(told, healed);
  finish(net->new_Stream(net->get_BroadcastCommunicator(), TFILTER_SUM), 4);
}

// Every instance of a tool's filter function is told, by TopologyLocalInfo, where its
// node stands in the tree: on a tree of uneven depth, the front-end and each commnode
// report what the topology file gives them, and what the front-end's own topology
// (get_NetworkTopology) says of the same node.
TEST_F(MrnetApi, AFilterFunctionIsToldWhereItsNodeStands) {
  const char* uneven =
      "localhost:0 => localhost:1 localhost:2 ;\n"
      "localhost:1 => localhost:3 localhost:4 localhost:5 ;\n"
      "localhost:2 => localhost:6 ;\n"
      "localhost:6 => localhost:7 localhost:8 ;\n";
  auto* net = launch(uneven);
  ASSERT_NE(net, nullptr);
  const int id = net->load_FilterFunc(CANOPY_MRNET_TOOL_FILTER, "Places");
  ASSERT_GE(id, 100) << net->error_detail();
  Stream* s = net->new_Stream(net->get_BroadcastCommunicator(), id, SFILTER_WAITFORALL);
  ASSERT_NE(s, nullptr) << net->error_detail();
  // One wave: each node's place (children, siblings, descendants, leaf descendants,
  // root distance, max leaf distance), each checked against the front-end's topology.
  auto places = [&] {
    std::multiset<std::vector<unsigned int>> out;
    int tag = 0;
    PacketPtr p;
    EXPECT_EQ(s->send(TAG_SUM, "%d", 10), 0);
    if (s->recv(&tag, p) != 1) {
      ADD_FAILURE() << net->error_detail();
      return out;
    }
    unsigned int* values = nullptr;
    unsigned int count = 0;
    EXPECT_EQ(p->unpack("%aud", &values, &count), 0);
    const std::vector<unsigned int> all(values, values + count);
    std::free(values);
    NetworkTopology* topology = net->get_NetworkTopology();
    for (std::size_t i = 0; i + 7 <= all.size(); i += 7) {
      const std::vector<unsigned int> told(all.begin() + i, all.begin() + i + 7);
      NetworkTopology::Node* node = topology->find_Node(told[0]);
      if (!node) {
        ADD_FAILURE() << "rank " << told[0];
        continue;
      }
      const TopologyLocalInfo there(topology, node);
      EXPECT_EQ(told, (std::vector<unsigned int>{there.get_Rank(), there.get_NumChildren(), there.get_NumSiblings(),
                                                 there.get_NumDescendants(), there.get_NumLeafDescendants(),
                                                 there.get_RootDistance(), there.get_MaxLeafDistance()}))
          << "rank " << told[0];
      out.insert(std::vector<unsigned int>(told.begin() + 1, told.end()));
    }
    return out;
  };
  using Places = std::multiset<std::vector<unsigned int>>;
  EXPECT_EQ(places(), (Places{{2, 0, 8, 5, 0, 3},     // the front-end
                              {3, 1, 3, 3, 1, 1},     // localhost:1
                              {1, 1, 3, 2, 1, 2},     // localhost:2
                              {2, 0, 2, 2, 2, 1}}));  // localhost:6

  // localhost:6 is killed; localhost:2 adopts its two back-ends. The instances that
  // are left are told so (MRNet's TopologyLocalInfo reads the live topology).
  NetworkTopology* topology = net->get_NetworkTopology();
  Rank deepest = UnknownRank;
  for (Rank r = kFrontEnd + 1; topology->find_Node(r); ++r) {
    if (topology->find_Node(r)->get_Parent() != kFrontEnd) deepest = r;
  }
  ASSERT_NE(deepest, UnknownRank);
  const pid_t pid = ProcessGuard::process_of_rank(deepest);
  ASSERT_GT(pid, 0);
  ASSERT_EQ(kill(pid, SIGKILL), 0);
  auto adopted = [&] {
    topology = net->get_NetworkTopology();
    std::vector<NetworkTopology::Node*> leaves;
    topology->get_Leaves(leaves);
    for (auto* leaf : leaves) {
      if (leaf->get_Parent() == deepest) return false;
    }
    return true;
  };
  for (auto deadline = std::chrono::steady_clock::now() + 30s; !adopted() && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_TRUE(adopted());
  EXPECT_EQ(places(), (Places{{2, 0, 7, 5, 0, 2},     // the front-end
                              {3, 1, 3, 3, 1, 1},     // localhost:1
                              {2, 1, 2, 2, 1, 1}}));  // localhost:2, with localhost:6's back-ends
  finish(net->new_Stream(net->get_BroadcastCommunicator(), TFILTER_SUM), 5);
}

}  // namespace
