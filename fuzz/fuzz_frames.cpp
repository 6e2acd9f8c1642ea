// Frames and every decoder a received message reaches without a live tree: the
// bytes of a connection, cut into frames by transport::FrameReader (in chunks of
// whatever sizes the input's first byte picks), read as Cap'n Proto messages with
// the links' limits, and each message handed to the decoder of its kind: the
// topology and launch plan, packets, the gossip table, and every field of the
// core's own messages (docs/testing.md, "Fuzzing").
#include <capnp/serialize.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "canopy.capnp.h"
#include "core/codec.h"
#include "gossip.capnp.h"
#include "membership/gossip_table.h"
#include "streams.capnp.h"
#include "transport/frame.h"

using namespace canopy;

namespace {

void walk(wire::Message::Reader m) {
  using Body = wire::Message::Body;
  auto body = m.getBody();
  switch (body.which()) {
    case Body::HELLO: {
      auto h = body.getHello();
      (void)h.getNonce().size();
      (void)(h.getRank() + h.getIncarnation() + h.getEpoch());
      break;
    }
    case Body::TOPOLOGY: {
      auto t = body.getTopology();
      if (auto topology = core::decode_topology(t)) (void)topology->size();
      (void)core::decode_plan(t);
      break;
    }
    case Body::ENDPOINTS: {
      std::vector<std::pair<canopy::Rank, std::uint16_t>> endpoints;
      (void)core::read_endpoints(body.getEndpoints(), endpoints);
      break;
    }
    case Body::FAILURE_REPORT: (void)body.getFailureReport().getReason().size(); break;
    case Body::ATTACH_REPORTS:
      for (auto a : body.getAttachReports()) (void)(a.getOrphan() + a.getAdopter() + a.getIncarnation());
      break;
    case Body::CHALLENGE: (void)body.getChallenge().getProof().size(); break;
    case Body::HELLO_PROOF: (void)body.getHelloProof().getProof().size(); break;
    case Body::SHUTDOWN: (void)body.getShutdown().getReason().size(); break;
    case Body::SERVICE: {
      auto service = body.getService();
      if (service.getId() == 3) {
        switch (static_cast<wire::streams::Kind>(service.getKind())) {
          case wire::streams::Kind::DATA:
            (void)core::decode_packet(service.getBody().getAs<wire::DataPacket>()).size();
            break;
          case wire::streams::Kind::BROADCAST: {
            auto b = service.getBody().getAs<wire::streams::Broadcast>();
            (void)(core::decode_packet(b.getPacket()).size() + b.getSeq());
            break;
          }
          case wire::streams::Kind::REPLAY: {
            auto r = service.getBody().getAs<wire::streams::Replay>();
            if (r.hasBroadcast()) (void)core::decode_packet(r.getBroadcast().getPacket()).size();
            (void)(r.getLostUpTo() + r.getTarget() + r.getVia());
            break;
          }
          default: break;
        }
      }
      if (service.getId() == 7 && service.getKind() == static_cast<std::uint16_t>(wire::gossip::Kind::TABLE)) {
        auto entries = service.getBody().getAs<wire::gossip::Table>().getEntries();
        (void)membership::decode_table({entries.begin(), entries.size()});
      }
      break;
    }
    default: break;
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::size_t chunk = 1 + data[0] % 64;  // how the bytes arrive
  ++data;
  --size;
  transport::FrameLimits limits;
  limits.max_frame_bytes = 1 << 20;  // the same checks, smaller: the fuzzer's memory
  limits.traversal_limit_words = limits.max_frame_bytes / 8;
  transport::FrameReader reader(limits);
  for (std::size_t at = 0; at < size; at += chunk) {
    const std::size_t n = std::min(chunk, size - at);
    auto space = reader.prepare(n);
    std::memcpy(space.data(), data + at, n);
    reader.commit(n);
    auto outcome = transport::read_messages(reader, [](capnp::MessageReader& message) {
      try {
        walk(message.getRoot<wire::Message>());
      } catch (const kj::Exception&) {
        // A malformed message: the link closes it as a bad frame.
      }
      return true;
    });
    if (outcome.status == transport::ReadOutcome::Status::failed) break;  // the link would close
  }
  return 0;
}
