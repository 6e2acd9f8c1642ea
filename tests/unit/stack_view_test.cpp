// What canopy stack's front-end and daemons share (stack/paths.h, render.h, protocol.h).
#include <gtest/gtest.h>

#include "stack/paths.h"
#include "stack/protocol.h"
#include "stack/render.h"

namespace canopy::stack {
namespace {

using Frames = std::vector<std::string>;

TEST(StackPaths, APathEndsAtTheFirstMpiCallUnlessInternalsAreAsked) {
  const Frames frames{"_start", "main", "PMPI_Barrier", "ompi_coll_base_barrier", "opal_progress"};
  EXPECT_EQ(shape_path(frames, {}), (Frames{"_start", "main", "MPI_Barrier"}));
  EXPECT_EQ(shape_path(frames, {.mpi_internals = true}),
            (Frames{"_start", "main", "MPI_Barrier", "ompi_coll_base_barrier", "opal_progress"}));
  EXPECT_EQ(shape_path({"main", "solve"}, {}), (Frames{"main", "solve"}));
}

TEST(StackPaths, FileAndLineSuffixesDoNotHideTheFunction) {
  EXPECT_EQ(function_of("main (hang.c:12)"), "main");
  EXPECT_EQ(shape_path({"main (hang.c:12)", "PMPI_Recv (recv.c:40)", "x"}, {}),
            (Frames{"main (hang.c:12)", "MPI_Recv (recv.c:40)"}));
}

CallTree hang_tree() {
  CallTree tree;
  for (Rank r = 0; r < 8; ++r) {
    if (r == 3) {
      tree.add_path({"_start", "main", "compute", "pause"}, r);
    } else {
      tree.add_path({"_start", "main", "MPI_Barrier"}, r);
    }
  }
  return tree;
}

TEST(StackRender, EveryLeafIsAClassWithItsRanksLargestFirst) {
  const auto classes = equivalence_classes(hang_tree());
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0].ranks, (std::vector<Rank>{0, 1, 2, 4, 5, 6, 7}));
  EXPECT_EQ(classes[0].path, (Frames{"_start", "main", "MPI_Barrier"}));
  EXPECT_EQ(classes[1].ranks, (std::vector<Rank>{3}));
  EXPECT_EQ(describe_path(classes[1].path), "pause \u2190 compute \u2190 main");
}

TEST(StackRender, RanksThatStopAboveALeafFormTheirOwnClass) {
  CallTree tree;
  tree.add_path({"main", "solve"}, 0);
  tree.add_path({"main"}, 1);
  const auto classes = equivalence_classes(tree);
  ASSERT_EQ(classes.size(), 2u);
  EXPECT_EQ(classes[0].path, (Frames{"main"}));
  EXPECT_EQ(classes[0].ranks, (std::vector<Rank>{1}));
}

TEST(StackRender, TextIsAnIndentedTreeWithRangesThenTheClasses) {
  EXPECT_EQ(to_text(hang_tree()),
            "_start [0-7]\n"
            "  main [0-7]\n"
            "    MPI_Barrier [0-2,4-7]\n"
            "    compute [3]\n"
            "      pause [3]\n"
            "\n"
            "2 classes of 8 ranks:\n"
            "  7 ranks [0-2,4-7]: MPI_Barrier \u2190 main\n"
            "  1 rank [3]: pause \u2190 compute \u2190 main\n");
}

TEST(StackRender, JsonHasTheTreeAndTheClasses) {
  CallTree tree;
  tree.add_path({"main", "say \"hi\""}, 2);
  EXPECT_EQ(to_json(tree, "\"samples\":1,"),
            "{\"samples\":1,\"ranks\":\"2\",\"count\":1,\"tree\":{\"name\":\"\",\"ranks\":\"2\",\"count\":1,"
            "\"children\":[{\"name\":\"main\",\"ranks\":\"2\",\"count\":1,\"children\":[{\"name\":\"say \\\"hi\\\"\","
            "\"ranks\":\"2\",\"count\":1,\"children\":[]}]}]},\"classes\":[{\"ranks\":\"2\",\"count\":1,"
            "\"path\":[\"main\",\"say \\\"hi\\\"\"]}]}\n");
}

TEST(StackProtocol, ARequestComesBackAsItWent) {
  Request r{.samples = 3, .interval_ms = 50, .lines = true, .threads = false, .mpi_internals = true,
            .targets = {{0, 0, 100}, {0, 1, 101}, {1, 2, 200}}};
  auto back = decode_request(encode(r));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, r);
}

TEST(StackProtocol, ABadRequestIsRefusedWithWhatIsWrong) {
  Request r{.samples = 0};
  auto zero = decode_request(encode(r));
  ASSERT_FALSE(zero);
  EXPECT_NE(zero.error().find("0 samples"), std::string::npos) << zero.error();
  auto bad_pid = decode_request(encode(Request{.targets = {{0, 5, -1}}}));
  ASSERT_FALSE(bad_pid);
  EXPECT_NE(bad_pid.error().find("rank 5 has pid -1"), std::string::npos) << bad_pid.error();
  auto other = decode_request(Packet(kRequestTag, {std::uint32_t{1}}));
  EXPECT_FALSE(other);
}

}  // namespace
}  // namespace canopy::stack
