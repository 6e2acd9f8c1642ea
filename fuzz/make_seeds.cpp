// Writes the binary seeds of the fuzz corpus (fuzz/corpus/frames, fuzz/corpus/stripe):
// well-formed inputs of today's wire format, from which the fuzzer mutates. Run by
// scripts/fuzz.sh before each fuzzing run, so that the seeds follow the format; the
// text seeds (topologies, format strings) are files of fuzz/corpus/.
//
//   canopy-fuzz-seeds DIR     writes DIR/frames/* and DIR/stripe/*
#include <capnp/message.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "canopy.capnp.h"
#include "core/auth.h"
#include "core/codec.h"
#include "core/plan.h"
#include "core/service.h"
#include "gossip.capnp.h"
#include "membership/gossip_table.h"
#include "streams.capnp.h"
#include "transport/checksum.h"
#include "transport/frame.h"
#include "transport/stripe_wire.h"

using namespace canopy;

namespace {

void write(const std::filesystem::path& path, const void* data, std::size_t size, int first = -1) {
  std::ofstream out(path, std::ios::binary);
  if (first >= 0) out.put(static_cast<char>(first));
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
}

void write_frames(const std::filesystem::path& path, std::vector<capnp::MallocMessageBuilder*> messages, int chunk) {
  canopy::transport::FrameBuffer bytes;
  for (auto* m : messages) transport::append_frame(*m, bytes);
  write(path, bytes.data(), bytes.size() * sizeof(capnp::word), chunk);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: canopy-fuzz-seeds DIR\n");
    return 2;
  }
  const std::filesystem::path dir(argv[1]);
  std::filesystem::create_directories(dir / "frames");
  std::filesystem::create_directories(dir / "stripe");

  capnp::MallocMessageBuilder hello;
  {
    auto m = hello.initRoot<wire::Message>();
    auto h = m.getBody().initHello();
    h.setProtocolVersion(wire::PROTOCOL_VERSION);
    h.setNetworkId(0x5eed);
    h.setRole(wire::Role::BACKEND);
    h.setRank(3);
    h.setNonce(core::as_data(core::new_nonce()));
  }
  capnp::MallocMessageBuilder topology;
  {
    auto m = topology.initRoot<wire::Message>();
    auto t = m.getBody().initTopology();
    auto tree = generate_topology("b:2^2");
    core::encode_topology(*tree, t);
    core::LaunchPlan plan;
    plan.commands.set().commnode_exe = "/usr/bin/canopy-commnode";
    plan.commands.set().backend_argv = {"/usr/bin/canopy-demo-backend", "--flag"};
    core::encode_plan(plan, t);
  }
  capnp::MallocMessageBuilder endpoints;  // ports learnt after the topology
  {
    auto m = endpoints.initRoot<wire::Message>();
    auto e = m.getBody().initEndpoints();
    auto runs = e.initRankRuns(4);  // ranks 0 and 1000001
    auto ports = e.initPorts(2);
    runs.set(0, 0);
    runs.set(1, 1);
    runs.set(2, 1000001);
    runs.set(3, 1);
    ports.set(0, 40001);
    ports.set(1, 40002);
  }
  capnp::MallocMessageBuilder data;
  {
    auto m = data.initRoot<wire::Message>();
    auto s = m.getBody().initService();
    s.setId(3);
    s.setKind(static_cast<std::uint16_t>(wire::streams::Kind::DATA));
    auto d = s.getBody().initAs<wire::DataPacket>();
    d.setStreamId(1);
    core::encode_packet(Packet(7, {std::int32_t(1), std::string("text"), std::vector<double>{1.5, 2.5}}), d);
  }
  capnp::MallocMessageBuilder replay;  // a broadcast sent again to an orphan
  {
    auto m = replay.initRoot<wire::Message>();
    auto s = m.getBody().initService();
    s.setId(3);
    s.setKind(static_cast<std::uint16_t>(wire::streams::Kind::REPLAY));
    auto r = s.getBody().initAs<wire::streams::Replay>();
    r.setStreamId(1);
    r.setTarget(1000001);
    r.setVia(4);
    auto b = r.initBroadcast();
    b.setSeq(3);
    auto d = b.initPacket();
    d.setStreamId(1);
    core::encode_packet(Packet(7, {std::int32_t(2), std::vector<std::int32_t>{1, 2}}), d);
  }
  capnp::MallocMessageBuilder table;
  {
    auto m = table.initRoot<wire::Message>();
    auto s = m.getBody().initService();
    s.setId(7);
    s.setKind(static_cast<std::uint16_t>(wire::gossip::Kind::TABLE));
    std::vector<membership::TableEntry> entries{{0, 5}, {1, 7}, {4, 2}};
    auto bytes = membership::encode_table(entries);
    s.getBody().initAs<wire::gossip::Table>().setEntries(capnp::Data::Reader(bytes.data(), bytes.size()));
  }
  write_frames(dir / "frames" / "hello", {&hello}, 63);
  write_frames(dir / "frames" / "topology", {&topology, &endpoints}, 7);
  write_frames(dir / "frames" / "data", {&data}, 0);
  write_frames(dir / "frames" / "table", {&table}, 15);
  write_frames(dir / "frames" / "replay", {&replay}, 5);
  write_frames(dir / "frames" / "all", {&hello, &topology, &endpoints, &data, &replay, &table}, 31);

  // Stripe: a path hello, then fragments (kind, then seq u16, length u8, flag, bytes).
  std::byte path_hello[transport::kPathHelloBytes];
  transport::encode_hello(transport::PathHello{}, path_hello);
  write(dir / "stripe" / "path_hello", path_hello, sizeof path_hello);
  std::byte header[transport::kStripeHeaderBytes];
  transport::encode_header(transport::FrameHeader{.length = 8, .seq = 16}, transport::ChecksumKind::crc32c, header);
  write(dir / "stripe" / "header", header, sizeof header);
  canopy::transport::FrameBuffer frame;
  transport::append_frame(data, frame);
  const auto* bytes = reinterpret_cast<const std::uint8_t*>(frame.data());
  const std::size_t size = frame.size() * sizeof(capnp::word);
  std::vector<std::uint8_t> fragments{0};  // crc32c
  for (std::size_t at = 0; at < size; at += 32) {  // in order, 32 bytes each
    const std::size_t n = std::min<std::size_t>(32, size - at);
    fragments.push_back(static_cast<std::uint8_t>(at));
    fragments.push_back(static_cast<std::uint8_t>(at >> 8));
    fragments.push_back(static_cast<std::uint8_t>(n));
    fragments.push_back(0);  // the right checksum
    fragments.insert(fragments.end(), bytes + at, bytes + at + n);
  }
  write(dir / "stripe" / "fragments", fragments.data(), fragments.size());
  std::printf("seeds written to %s\n", dir.c_str());
  return 0;
}
