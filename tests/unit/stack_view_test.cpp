// What canopy stack's front-end and daemons share (stack/paths.h, render.h, protocol.h).
#include <gtest/gtest.h>

#include <set>

#include "stack/paths.h"
#include "stack/protocol.h"
#include "stack/render.h"

namespace canopy::stack {
namespace {

using Frames = std::vector<std::string>;

TEST(StackPaths, APathEndsAtTheFirstMpiCallUnlessInternalsAreAsked) {
  const Frames frames{"main", "PMPI_Barrier", "ompi_coll_base_barrier", "opal_progress"};
  EXPECT_EQ(shape_path(frames, {}), (Frames{"main", "MPI_Barrier"}));
  EXPECT_EQ(shape_path(frames, {.mpi_internals = true}),
            (Frames{"main", "MPI_Barrier", "ompi_coll_base_barrier", "opal_progress"}));
  EXPECT_EQ(shape_path({"main", "solve"}, {}), (Frames{"main", "solve"}));
}

TEST(StackPaths, FileAndLineSuffixesDoNotHideTheFunction) {
  EXPECT_EQ(function_of("main (hang.c:12)"), "main");
  EXPECT_EQ(shape_path({"main (hang.c:12)", "PMPI_Recv (recv.c:40)", "x"}, {}),
            (Frames{"main (hang.c:12)", "MPI_Recv (recv.c:40)"}));
}

TEST(StackPaths, StartUpFramesAboveMainAreDroppedUnlessFullIsAsked) {
  const Frames frames{"_start", "__libc_start_main_impl", "__libc_start_call_main", "main", "MPI_Barrier"};
  EXPECT_EQ(shape_path(frames, {}), (Frames{"main", "MPI_Barrier"}));
  EXPECT_EQ(shape_path(frames, {.startup_frames = true}), frames);
  // glibc without symbols: its frames above main are unnamed.
  EXPECT_EQ(shape_path({"_start", "libc.so.6+0x271ca", "main (hang.c:40)", "solve"}, {}),
            (Frames{"main (hang.c:40)", "solve"}));
}

TEST(StackPaths, AThreadsStartFramesAreDroppedAndAnythingElseAboveMainIsKept) {
  EXPECT_EQ(shape_path({"clone3", "start_thread", "progress_engine", "poll"}, {}),
            (Frames{"progress_engine", "poll"}));
  // After main returned: exit's frames are no start-up frames.
  EXPECT_EQ(shape_path({"_start", "__libc_start_main", "__libc_start_call_main", "exit", "_dl_fini"}, {}),
            (Frames{"exit", "_dl_fini"}));
  // A named frame of the program's own above main is not the C runtime's.
  EXPECT_EQ(shape_path({"_start", "my_launcher", "main"}, {}), (Frames{"my_launcher", "main"}));
  // A stripped program: its _start and its main are unnamed.
  EXPECT_EQ(shape_path({"sleep+0x2620", "__libc_start_main", "__libc_start_call_main", "sleep+0x2557", "sleep+0x5f80",
                        "__nanosleep"},
                       {}),
            (Frames{"sleep+0x2557", "sleep+0x5f80", "__nanosleep"}));
  EXPECT_TRUE(is_startup_frame("__libc_start_call_main"));
  EXPECT_FALSE(is_startup_frame("main"));
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

// The job as a drawing's title names it.
Heading hang_heading() {
  return {.job = "mpirun 27420", .command = "mpirun -np 8 ./mpi_hang", .when = "2026-11-29 17:56:41 UTC",
          .hosts = 1, .samples = 3, .found = "ranks found through the launcher's MPIR table"};
}

// The lines of `dot` that contain `what`.
std::vector<std::string> lines_with(const std::string& dot, const std::string& what) {
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < dot.size()) {
    const std::size_t end = std::min(dot.find('\n', at), dot.size());
    std::string line = dot.substr(at, end - at);
    if (line.find(what) != std::string::npos) out.push_back(line);
    at = end + 1;
  }
  return out;
}

TEST(StackDot, TheTitleNamesTheJobTheTimeTheRanksAndTheSamples) {
  const std::string dot = to_dot(hang_tree(), hang_heading());
  EXPECT_EQ(dot.rfind("digraph", 0), 0u) << dot;
  EXPECT_NE(dot.find("labelloc=t"), std::string::npos) << dot;
  EXPECT_NE(dot.find("<b>Stack traces of 8 ranks on 1 host, 3 samples</b>"), std::string::npos) << dot;
  EXPECT_NE(dot.find(">mpirun 27420: mpirun -np 8 ./mpi_hang<"), std::string::npos) << dot;
  EXPECT_NE(dot.find(">taken 2026-11-29 17:56:41 UTC<"), std::string::npos) << dot;
  EXPECT_NE(dot.find(">ranks found through the launcher's MPIR table<"), std::string::npos) << dot;
}

TEST(StackDot, TheRootIsTheJobNotASlash) {
  const std::string dot = to_dot(hang_tree(), hang_heading());
  EXPECT_EQ(lines_with(dot, "label=\"/\"").size(), 0u) << dot;
  ASSERT_EQ(lines_with(dot, "  n0 [").size(), 1u) << dot;
  EXPECT_NE(lines_with(dot, "  n0 [")[0].find("label=\"mpirun 27420\\n8 ranks\""), std::string::npos) << dot;
}

TEST(StackDot, TheLegendHasEveryClassWithItsRangesAndItsOwnColour) {
  const std::string dot = to_dot(hang_tree(), hang_heading());
  EXPECT_NE(dot.find("<b>2 classes of 8 ranks (where the ranks stop)</b>"), std::string::npos) << dot;
  const auto big = class_colour(0), outlier = class_colour(1);
  EXPECT_NE(big.line, outlier.line);
  EXPECT_NE(dot.find("<td bgcolor=\"" + big.line + "\" width=\"14\"> </td><td align=\"left\">7 ranks [0-2,4-7]</td>"
                     "<td align=\"left\">MPI_Barrier \u2190 main</td>"),
            std::string::npos)
      << dot;
  EXPECT_NE(dot.find("<td bgcolor=\"" + outlier.line + "\" width=\"14\"> </td><td align=\"left\">1 rank [3]</td>"
                     "<td align=\"left\">pause \u2190 compute \u2190 main</td>"),
            std::string::npos)
      << dot;
}

TEST(StackDot, NodesAndEdgesOfOneClassHaveItsColourAndSharedOnesAreGrey) {
  const std::string dot = to_dot(hang_tree(), hang_heading());
  const auto outlier = class_colour(1).line, big = class_colour(0).line;
  // The outlier's frames and the edges into them (compute, pause) are red.
  for (const char* frame : {"compute", "pause"}) {
    const auto node = lines_with(dot, "[label=\"" + std::string(frame) + "\"");
    ASSERT_EQ(node.size(), 1u) << dot;
    EXPECT_NE(node[0].find("color=\"" + outlier + "\""), std::string::npos) << node[0];
  }
  EXPECT_EQ(lines_with(dot, "label=\"1:[3]\", color=\"" + outlier + "\"").size(), 2u) << dot;
  EXPECT_EQ(lines_with(dot, "label=\"7:[0-2,4-7]\", color=\"" + big + "\"").size(), 1u) << dot;
  // main and _start lead to both classes: the default grey.
  for (const char* frame : {"main", "_start"}) {
    const auto node = lines_with(dot, "[label=\"" + std::string(frame) + "\"");
    ASSERT_EQ(node.size(), 1u) << dot;
    EXPECT_EQ(node[0].find("color="), std::string::npos) << node[0];
  }
  EXPECT_EQ(lines_with(dot, "label=\"8:[0-7]\"]").size(), 2u) << dot;
}

TEST(StackDot, ClassesPastTheNamedColoursGetColoursOfTheirOwn) {
  std::set<std::string> lines;
  for (std::size_t i = 0; i < 40; ++i) lines.insert(class_colour(i).line);
  EXPECT_EQ(lines.size(), 40u);
}

TEST(StackDot, FramesAndTitlesAreEscaped) {
  CallTree tree;
  tree.add_path({"main", "std::vector<int>::at(\"x\")"}, 0);
  Heading heading = hang_heading();
  heading.command = "mpirun a<b & \"c\"";
  const std::string dot = to_dot(tree, heading);
  EXPECT_NE(dot.find("label=\"std::vector<int>::at(\\\"x\\\")\""), std::string::npos) << dot;
  EXPECT_NE(dot.find("mpirun a&lt;b &amp; &quot;c&quot;"), std::string::npos) << dot;
  EXPECT_NE(dot.find("at(&quot;x&quot;) \u2190 main"), std::string::npos) << dot;
}

TEST(StackProtocol, ARequestComesBackAsItWent) {
  Request r{.samples = 3, .interval_ms = 50, .lines = true, .threads = false, .mpi_internals = true,
            .startup_frames = false, .targets = {{0, 0, 100}, {0, 1, 101}, {1, 2, 200}}};
  auto back = decode_request(encode(r));
  ASSERT_TRUE(back) << back.error();
  EXPECT_EQ(*back, r);
  r.startup_frames = true;
  r.mpi_internals = false;
  back = decode_request(encode(r));
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
