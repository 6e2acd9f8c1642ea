// A back-end for stream tests that acts on commands sent down the stream.
//   tag kReply,  "%d %d": (slow rank, delay ms): reply {rank} on the stream; the slow
//                rank waits `delay ms` first.
//   tag kUnion,  "%d %d": (count, interval ms): send `count` packets, one integer
//                each (script_protocol.h), `interval ms` apart.
//   tag kGossip: reply the gossip settings this back-end runs with.
//   tag kEcho,   "%ad": reply {rank, the array}: what reached the back-end, after
//                the stream's downstream filters.
//   tag kDrain,  "%d": (n): takes the next n packets (kItem) with try_receive()
//                alone, waiting 5 ms whenever nothing is there (the network's own
//                thread reads them meanwhile), up to 20 s; then one try_receive()
//                more must give nothing; replies {n} (-1 if it did not).
//   tag kRelay,  "%ud %ud": (from, to): back-end `from` sends kPeer {from}
//                point-to-point to back-end `to`, which checks the packet's source
//                and answers up the stream with kRelayed {from, to}.
// Started by a Canopy parent, with `--attach FILE RANK` in attach mode, or with
// `--join FILE RANK PARENT` in open attach (Backend::attach under PARENT). With
// SCRIPT_BACKEND_SAY_WHY set it prints why it stopped on stderr.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "canopy/backend.h"
#include "script_protocol.h"

int main(int argc, char** argv) {
  using namespace canopy::script;
  auto rank_at = [&](int i) { return static_cast<canopy::Rank>(std::atol(argv[i])); };
  auto backend = argc == 4 && std::string(argv[1]) == "--attach"  ? canopy::Backend::attach(argv[2], rank_at(3))
                 : argc == 5 && std::string(argv[1]) == "--join" ? canopy::Backend::attach(argv[2], rank_at(3), {}, rank_at(4))
                                                                 : canopy::Backend::connect();
  if (!backend) {
    std::fprintf(stderr, "script_backend: %s\n", backend.error().c_str());
    return 1;
  }
  auto& be = **backend;
  const auto me = static_cast<std::int32_t>(be.rank());
  while (true) {
    auto in = be.receive(std::chrono::hours(1));
    if (!in) {  // shut down, or refused by the tree: the end, normally
      if (std::getenv("SCRIPT_BACKEND_SAY_WHY")) std::fprintf(stderr, "script_backend: %s\n", in.error().c_str());
      return 0;
    }
    if (!*in) continue;
    const auto& stream = (*in)->stream;
    const auto& packet = (*in)->packet;
    if (packet.tag() == kReply) {
      std::int32_t slow = -1, delay_ms = 0;
      if (!packet.unpack("%d %d", slow, delay_ms)) continue;
      if (slow == me) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
      (void)be.send(stream, canopy::Packet{kReply, {me}});
    } else if (packet.tag() == kGossip) {
      const auto g = be.gossip();
      (void)be.send(stream, canopy::Packet{kGossip, {std::vector<std::int32_t>{
                                                        static_cast<std::int32_t>(g.schedule),
                                                        static_cast<std::int32_t>(g.period.count()),
                                                        static_cast<std::int32_t>(g.ping_timeout.count())}}});
    } else if (packet.tag() == kEcho) {
      const auto* array = packet.size() == 1 ? std::get_if<std::vector<std::int32_t>>(&packet[0]) : nullptr;
      if (array) (void)be.send(stream, canopy::Packet{kEcho, {me, *array}});
    } else if (packet.tag() == kDrain) {
      std::int32_t n = 0, taken = 0;
      if (!packet.unpack("%d", n)) continue;
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (taken < n && std::chrono::steady_clock::now() < until) {
        auto item = be.try_receive();
        if (!item) return 0;
        if (!*item) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          continue;
        }
        if ((*item)->packet.tag() == kItem) ++taken;
      }
      auto more = be.try_receive();
      (void)be.send(stream, canopy::Packet{kDrain, {more && !*more ? taken : -1}});
    } else if (packet.tag() == kRelay) {
      std::uint32_t from = 0, to = 0;
      if (packet.unpack("%ud %ud", from, to) && from == be.rank()) {
        (void)be.send_to(to, stream, canopy::Packet{kPeer, {me}});
      }
    } else if (packet.tag() == kUnion) {
      std::int32_t count = 0, interval_ms = 0;
      if (!packet.unpack("%d %d", count, interval_ms)) continue;
      for (std::int32_t i = 0; i < count; ++i) {
        (void)be.send(stream, canopy::Packet{kUnion, {std::vector<std::int32_t>{union_value(be.rank(), i)}}});
        if (interval_ms) std::this_thread::sleep_for(std::chrono::milliseconds(interval_ms));
      }
    } else if (packet.tag() == kPeer) {
      std::int32_t from = 0;
      if (packet.unpack("%d", from) && static_cast<canopy::Rank>(from) == packet.source()) {
        (void)be.send(stream, canopy::Packet{kRelayed, {from, me}});
      }
    }
  }
}
