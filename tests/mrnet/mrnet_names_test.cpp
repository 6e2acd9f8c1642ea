// What MRNet 5.0.1's headers give a program, through mrnet/MRNet.h alone, used the
// way MRNet's own tests and examples use it (issue 48): <inttypes.h>'s PRI macros,
// gettimeofday and the other system calls xplat/Types.h brings, xplat's types,
// mrn_printf, Packet::set_DestroyData, the performance-data calls, the stream ids.
// Built as gnu++17, g++ 12's default and what an MRNet tool's Makefile gets; the
// file includes nothing else of the system's on purpose: a name missing from the
// layer's headers fails the build.
#include "mrnet/MRNet.h"

#include <gtest/gtest.h>
#include <malloc.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CANOPY_NAMES_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define CANOPY_NAMES_ASAN 1
#endif

using namespace MRN;

TEST(MrnetNames, FormatMacrosAndSystemCallsComeWithMRNetH) {
  char text[128];
  const int16_t small = -7;
  const uint64_t large = UINT64_MAX;
  const size_t count = 3;
  std::snprintf(text, sizeof text, "%" PRIi16 " %" PRIu64 " %" PRIszt, small, large, count);
  EXPECT_STREQ(text, "-7 18446744073709551615 3");
  struct timeval now;
  ASSERT_EQ(gettimeofday(&now, NULL), 0);
  EXPECT_GT(now.tv_sec, 0);
  EXPECT_GT(getpid(), 0);
  EXPECT_EQ(ntohl(htonl(42u)), 42u);
  XPlat_Port port = 5000;
  Port same = port;
  bool_t yes = 1;
  EXPECT_EQ(same, 5000);
  EXPECT_TRUE(yes);
  EXPECT_GE(XPLAT_MAX_HOSTNAME_LEN, 256);
  std::list<std::string> names{"a", "b"};
  std::ostringstream out;
  out << names.size() << ' ' << std::sqrt(16.0);
  EXPECT_EQ(out.str(), "2 4");
}

TEST(MrnetNames, MrnPrintfWritesWhereItIsToldWithFileLineAndFunction) {
  FILE* file = tmpfile();
  ASSERT_NE(file, nullptr);
  const int n = mrn_printf("/some/dir/tool.C", 12, "main", file, "rank %u of %d\n", 3u, 4);
  ASSERT_GT(n, 0);
  rewind(file);
  char line[256] = {};
  ASSERT_NE(fgets(line, sizeof line, file), nullptr);
  EXPECT_STREQ(line, "tool.C:12 main(): rank 3 of 4\n");
  EXPECT_EQ(n, static_cast<int>(std::strlen(line)));
  fclose(file);
  EXPECT_EQ(MIN_OUTPUT_LEVEL, 0);
  EXPECT_EQ(MAX_OUTPUT_LEVEL, 5);
  set_OutputLevel(3);
  EXPECT_EQ(CUR_OUTPUT_LEVEL, 3);
  set_OutputLevel(1);
}

TEST(MrnetNames, StreamIdsAndSettingsAreMRNets) {
  EXPECT_EQ(CTL_STRM_ID, 1u << 30);
  EXPECT_EQ(TOPOL_STRM_ID, (1u << 30) + 1);
  EXPECT_EQ(USER_STRM_BASE_ID, (1u << 30) + 10);
  EXPECT_EQ(static_cast<int>(MRNET_FAILURE_RECOVERY), 3);
  EXPECT_EQ(static_cast<int>(XPLAT_RSH), 8);
  EXPECT_EQ(static_cast<int>(PERFDATA_MAX_MET), 7);
  EXPECT_EQ(static_cast<int>(BE_NODE), 2);
}

TEST(MrnetNames, PerformanceDataTypesAreMRNets) {
  // The calls that use them (Network and Stream's collect_PerformanceData...) are
  // declared with them; they return false (docs/mrnet.md).
  rank_perfdata_map results;
  std::map<int, rank_perfdata_map> per_stream;
  perfdata_t value;
  value.u = 1;
  results[0].push_back(value);
  EXPECT_EQ(results.size(), 1u);
  EXPECT_EQ(per_stream.size(), 0u);
}

// MRNet frees the arrays and strings a packet was built from once the packet goes,
// if told to (Examples/PerThreadStreams builds its filter's output so). The packet
// holds copies: what it frees is the caller's, here 8 MiB, which malloc maps, so
// that its return shows in mallinfo2's mapped bytes. (Under AddressSanitizer,
// mallinfo2 says nothing: LeakSanitizer finds the array if it is not freed.)
TEST(MrnetNames, SetDestroyDataFreesWhatThePacketWasBuiltFrom) {
  const uint32_t n = 1u << 20;
  auto* values = static_cast<uint64_t*>(std::malloc(n * sizeof(uint64_t)));
  ASSERT_NE(values, nullptr);
  for (uint32_t i = 0; i < n; ++i) values[i] = i;
  char* name = strdup("filter output");
#ifndef CANOPY_NAMES_ASAN
  const size_t before = mallinfo2().hblkhd;
#endif
  {
    PacketPtr packet(new Packet(7, FirstApplicationTag, "%auld %s", values, n, name));
    ASSERT_FALSE(packet->has_Error());
    packet->set_DestroyData(true);
    uint64_t* copy = nullptr;
    uint32_t length = 0;
    char* text = nullptr;
    ASSERT_EQ(packet->unpack("%auld %s", &copy, &length, &text), 0);
    EXPECT_EQ(length, n);
    EXPECT_EQ(copy[n - 1], n - 1);
    EXPECT_STREQ(text, "filter output");
    std::free(copy);
    std::free(text);
  }
#ifndef CANOPY_NAMES_ASAN
  EXPECT_LE(mallinfo2().hblkhd + n * sizeof(uint64_t), before) << "the packet did not free the caller's array";
#endif
}

TEST(MrnetNames, WithoutSetDestroyDataThePacketLeavesTheCallersDataAlone) {
  char name[] = "on the stack";
  {
    PacketPtr packet(new Packet(7, FirstApplicationTag, "%s", name));
    ASSERT_FALSE(packet->has_Error());
  }
  EXPECT_STREQ(name, "on the stack");
}
