// The attach file reader (core/attach_file.h, docs/attach.md): the whole file
// is checked, and every error names the file and line.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <unistd.h>

#include "core/attach_file.h"
#include "canopy/backend.h"
#include "core/auth.h"

using canopy::attach::parse_attach_file;

namespace {

// What canopy::Network::launch writes for b:2x2 (frontend/network.cpp).
constexpr std::string_view kGood =
    "canopy-attach 2\n"
    "network 5f0c1d2e3a4b5c6d\n"
    "secret 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"
    "backend 0 1000001 127.0.0.1 40311\n"
    "backend 1 1000001 127.0.0.1 40311\n"
    "backend 2 1000002 127.0.0.1 40313\n"
    "backend 3 1000002 127.0.0.1 40313\n";

// The error of parsing `text` as file "f", or "" if it parses.
std::string error_of(std::string_view text) {
  auto file = parse_attach_file(text, "f");
  return file ? "" : file.error();
}

// A file in /tmp holding `text`, removed with the object.
struct TempFile {
  explicit TempFile(std::string_view text) {
    char name[] = "/tmp/canopy-attach-test-XXXXXX";
    int fd = mkstemp(name);
    if (fd >= 0) close(fd);
    path = name;
    std::ofstream(path, std::ios::trunc) << text;
  }
  ~TempFile() { std::remove(path.c_str()); }
  std::string path;
};

TEST(AttachFile, TheFrontEndsFileIsReadWhole) {
  auto file = parse_attach_file(std::string("# written by canopy\n\n") + std::string(kGood), "f");
  ASSERT_TRUE(file) << file.error();
  EXPECT_EQ(file->network_id, 0x5f0c1d2e3a4b5c6dull);
  ASSERT_EQ(file->backends.size(), 4u);
  const auto* two = file->find(2);
  ASSERT_NE(two, nullptr);
  EXPECT_EQ(two->parent, 1000002u);
  EXPECT_EQ(two->address, "127.0.0.1");
  EXPECT_EQ(two->port, 40313);
  EXPECT_EQ(two->line, 8);
  EXPECT_EQ(canopy::core::to_hex(file->secret), "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff");
  EXPECT_EQ(file->find(4), nullptr);
}

TEST(AttachFile, AFileWithoutTheHeaderIsRefusedAtItsFirstRecord) {
  std::string no_header(kGood.substr(kGood.find('\n') + 1));
  EXPECT_EQ(error_of(no_header).rfind("f:1: expected the header 'canopy-attach 2' first, found 'network'", 0), 0u)
      << error_of(no_header);
  EXPECT_EQ(error_of("# comment\nbackend 0 1000001 127.0.0.1 40311\n").rfind("f:2: expected the header", 0), 0u);
}

TEST(AttachFile, AnotherVersionIsRefused) {
  EXPECT_EQ(error_of("canopy-attach 3\nnetwork 1\nbackend 0 1 a 1\n"),
            "f:1: unsupported attach file version 3 (this library reads 2)");
  // Version 1 had no secret: written by an older front-end, which this library
  // cannot authenticate to.
  EXPECT_EQ(error_of("canopy-attach 1\nnetwork 1\nbackend 0 1 a 1\n"),
            "f:1: unsupported attach file version 1 (this library reads 2, which holds the network's secret: the "
            "front-end is of an older Canopy)");
  EXPECT_EQ(error_of("canopy-attach\n"), "f:1: expected 'canopy-attach VERSION'");
}

TEST(AttachFile, TheNetworkIdMustFollowTheHeader) {
  EXPECT_EQ(error_of("canopy-attach 2\nbackend 0 1000001 127.0.0.1 40311\n").rfind("f:2: expected 'network HEX'", 0),
            0u);
  EXPECT_EQ(error_of("canopy-attach 2\nnetwork xyz\n"),
            "f:2: network id 'xyz' is not a hexadecimal 64-bit number");
  EXPECT_EQ(error_of("canopy-attach 2\nnetwork 1\nsecret 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"), "f:3: no 'backend' lines");
  EXPECT_EQ(error_of("canopy-attach 2\n"), "f:1: no 'network HEX' line");
  EXPECT_EQ(error_of(""), "f:1: no header 'canopy-attach 2': the file is empty");
}

// The secret follows the network id; it is 64 hex digits, and an error never
// repeats it (it may be most of a real secret).
TEST(AttachFile, TheSecretMustFollowTheNetworkId) {
  EXPECT_EQ(error_of("canopy-attach 2\nnetwork 1\nbackend 0 1 a 1\n"),
            "f:3: expected 'secret HEX' after the network id, found 'backend'");
  EXPECT_EQ(error_of("canopy-attach 2\nnetwork 1\n"), "f:2: no 'secret HEX' line");
  EXPECT_EQ(error_of("canopy-attach 2\nnetwork 1\nsecret 0011\nbackend 0 1 a 1\n"),
            "f:3: a network secret is 64 hex digits, not 4 characters");
  const std::string bad(63, 'a');
  EXPECT_EQ(error_of("canopy-attach 2\nnetwork 1\nsecret " + bad + "g\nbackend 0 1 a 1\n"),
            "f:3: a network secret holds hex digits only");
  EXPECT_EQ(error_of(std::string(kGood) + "secret 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n"), "f:8: a second 'secret' line");
}

// A back-end must not start from a file whose later lines are damaged: the reader
// reads past its own line.
TEST(AttachFile, AMalformedLineAfterTheRanksOwnLineIsRefused) {
  std::string text = std::string(kGood) + "backend 4 1000002 127.0.0.1\n";
  EXPECT_EQ(error_of(text), "f:8: expected 'backend RANK PARENT-RANK ADDRESS PORT', found 4 fields");
  EXPECT_EQ(error_of(std::string(kGood) + "backend 4 1000002 127.0.0.1 0\n"),
            "f:8: port '0' is not a port (1 to 65535)");
  EXPECT_EQ(error_of(std::string(kGood) + "backend -4 1000002 127.0.0.1 40313\n"),
            "f:8: back-end rank '-4' is not a rank (0 to 4294967295)");
  EXPECT_EQ(error_of(std::string(kGood) + "backend 4 100000x 127.0.0.1 40313\n"),
            "f:8: parent rank '100000x' is not a rank");
  EXPECT_EQ(error_of(std::string(kGood) + "relay 4 1000002 127.0.0.1 40313\n").rfind("f:8: unknown key 'relay'", 0),
            0u);
  EXPECT_EQ(error_of(std::string(kGood) + "commnode 4 1000002 127.0.0.1 40313\n"),
            "f:8: expected 'commnode RANK ADDRESS PORT', found 5 fields");
  EXPECT_EQ(error_of(std::string(kGood) + "network 12\n"), "f:8: a second 'network' line");
  EXPECT_EQ(error_of(std::string(kGood) + "canopy-attach 2\n"), "f:8: a second header line");
}

TEST(AttachFile, ADuplicateRankIsRefused) {
  std::string text = std::string(kGood) + "backend 1 1000002 127.0.0.1 40313\n";
  EXPECT_EQ(error_of(text), "f:8: duplicate back-end rank 1 (first at line 5)");
}

// Backend::attach reads through the same parser, so the errors reach the caller
// with the file's path, before anything is started.
TEST(AttachFile, BackendAttachRefusesADamagedFileWithItsPathAndLine) {
  TempFile duplicate(std::string(kGood) + "backend 1 1000002 127.0.0.1 40313\n");
  auto be = canopy::Backend::attach(duplicate.path, 0);
  ASSERT_FALSE(be);
  EXPECT_EQ(be.error(), duplicate.path + ":8: duplicate back-end rank 1 (first at line 5)");
  EXPECT_EQ(be.error_kind(), canopy::ErrorKind::invalid_input);

  TempFile no_header(kGood.substr(kGood.find('\n') + 1));
  auto headless = canopy::Backend::attach(no_header.path, 0);
  ASSERT_FALSE(headless);
  EXPECT_EQ(headless.error().rfind(no_header.path + ":1: expected the header 'canopy-attach 2' first", 0), 0u)
      << headless.error();

  TempFile good(kGood);
  auto stranger = canopy::Backend::attach(good.path, 9);
  ASSERT_FALSE(stranger);
  EXPECT_EQ(stranger.error(), "rank 9 is not a back-end of the tree in " + good.path + " (it lists 4 back-ends)");
}

TEST(AttachFile, AMissingFileIsNamed) {
  auto file = canopy::attach::read_attach_file("/nonexistent/canopy.attach");
  ASSERT_FALSE(file);
  EXPECT_EQ(file.error(), "cannot read attach file /nonexistent/canopy.attach: No such file or directory");
}

}  // namespace

namespace {

// The re-attach file (docs/fault-tolerance.md) of b:2x2 whose commnodes listen on
// known ports: written as Network::launch writes it, read back whole.
TEST(ReattachFile, WhatTheFrontEndWritesIsReadBack) {
  auto topology = canopy::generate_topology("b:2x2");
  ASSERT_TRUE(topology) << topology.error();
  auto nodes = topology->nodes();
  for (auto& n : nodes) {
    if (n.role == canopy::Role::commnode) n.port = static_cast<std::uint16_t>(40000 + n.rank % 100);
  }
  auto ported = canopy::Topology::make(nodes, topology->hosts());
  ASSERT_TRUE(ported) << ported.error();
  canopy::core::Secret secret{};
  secret[0] = 0xab;
  const std::string text = canopy::attach::reattach_file_text(*ported, 0x1234, secret);
  auto file = parse_attach_file(text, "f");
  ASSERT_TRUE(file) << file.error();
  EXPECT_EQ(file->network_id, 0x1234u);
  EXPECT_EQ(file->secret, secret);
  EXPECT_EQ(file->frontend, std::optional<canopy::Rank>(canopy::kFirstInternalRank));
  EXPECT_TRUE(file->backends.empty());
  ASSERT_EQ(file->commnodes.size(), 2u);
  EXPECT_EQ(file->commnodes[0].rank, canopy::kFirstInternalRank + 1);
  EXPECT_EQ(file->commnodes[0].port, 40001);
  EXPECT_EQ(file->commnodes[1].port, 40002);
  EXPECT_EQ(file->commnodes[1].line, 6);
}

TEST(ReattachFile, BadCommnodeAndFrontendLinesNameTheirLine) {
  const std::string head =
      "canopy-attach 2\nnetwork 1\nsecret 00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff\n";
  EXPECT_EQ(error_of(head + "commnode 1000001 127.0.0.1\n"), "f:4: expected 'commnode RANK ADDRESS PORT', found 3 fields");
  EXPECT_EQ(error_of(head + "commnode 1000001 127.0.0.1 0\n"), "f:4: port '0' is not a port (1 to 65535)");
  EXPECT_EQ(error_of(head + "commnode x 127.0.0.1 1\n"), "f:4: commnode rank 'x' is not a rank");
  EXPECT_EQ(error_of(head + "commnode 5 a 1\ncommnode 5 a 2\n"), "f:5: duplicate rank 5 (first at line 4)");
  EXPECT_EQ(error_of(head + "frontend 7\nfrontend 7\ncommnode 5 a 1\n"), "f:5: a second 'frontend' line");
  EXPECT_EQ(error_of(head + "frontend\ncommnode 5 a 1\n"), "f:4: expected 'frontend RANK'");
  EXPECT_EQ(error_of(head + "frontend 7\n"), "f:4: no 'commnode' lines");
}

}  // namespace

namespace {

// An open attach file lists where back-ends join: the commnodes with no commnode
// below them, and no front-end (which makes a re-attach file).
TEST(AttachFile, AnOpenAttachFileListsTheCommnodesBackendsJoinUnder) {
  auto t = canopy::generate_topology("b:2x2", {}, canopy::Leaves::commnodes);  // FE, 2, then 4 commnodes
  ASSERT_TRUE(t) << t.error();
  std::uint16_t port = 40000;
  for (const auto& n : std::vector<canopy::TopologyNode>(t->nodes())) t->set_port(n.rank, ++port);  // learnt at launch
  canopy::core::Secret secret{};
  const std::string closed = canopy::attach::attach_file_text(*t, 1, secret);
  EXPECT_EQ(closed.find("commnode "), std::string::npos) << closed;
  auto file = canopy::attach::parse_attach_file(canopy::attach::attach_file_text(*t, 1, secret, true), "f");
  ASSERT_TRUE(file) << file.error();
  EXPECT_TRUE(file->open());
  std::vector<canopy::Rank> where;
  for (const auto& c : file->commnodes) where.push_back(c.rank);
  const canopy::Rank fe = canopy::kFirstInternalRank;
  EXPECT_EQ(where, (std::vector<canopy::Rank>{fe + 3, fe + 4, fe + 5, fe + 6}));
  EXPECT_TRUE(file->backends.empty());
  auto reattach = canopy::attach::parse_attach_file(canopy::attach::reattach_file_text(*t, 1, secret), "f");
  ASSERT_TRUE(reattach) << reattach.error();
  EXPECT_FALSE(reattach->open());
}

}  // namespace
