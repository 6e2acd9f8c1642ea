#include "mrnet/filters/wave.h"

#include <memory>
#include <utility>

#include "mrnet/conventions.h"
#include "mrnet/packet_codec.h"

namespace canopy::mrnet_filters {

std::string position(std::size_t index, std::size_t count, const Packet& packet) {
  return "packet " + std::to_string(index + 1) + " of " + std::to_string(count) + " (from rank " +
         std::to_string(packet.source()) + ")";
}

Result<std::vector<MRN::PacketPtr>> decode_wave(std::string_view filter, std::span<const Packet> wave,
                                                StreamId stream) {
  std::vector<MRN::PacketPtr> packets;
  packets.reserve(wave.size());
  for (std::size_t i = 0; i < wave.size(); ++i) {
    const unsigned int stream_id = stream == 0 ? 0 : MRN::layer::mrnet_stream_id(stream, wave[i].source());
    auto packet = MRN::codec::from_canopy(wave[i], stream_id);
    if (!packet) {
      return Error{std::string(filter) + ": " + position(i, wave.size(), wave[i]) + ": " + packet.error(),
                   ErrorKind::invalid_input};
    }
    packets.push_back(std::move(*packet));
  }
  return packets;
}

Packet encode(int tag, const std::string& format, std::vector<Value> values) {
  auto impl = std::make_unique<MRN::Packet::Impl>();
  impl->format = format;
  impl->tag = tag;
  impl->types = MRN::codec::parse_format(format).value();
  impl->values = std::move(values);
  return MRN::codec::to_canopy(MRN::Packet(std::move(impl)));
}

}  // namespace canopy::mrnet_filters
