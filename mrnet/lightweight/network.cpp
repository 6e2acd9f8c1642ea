// Network_t and Stream_t of MRNet's lightweight C API over canopy::Backend
// (docs/mrnet.md, decisions 5, 6, 8 and 10).
#include <chrono>
#include <condition_variable>
#include <cstdarg>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "canopy/backend.h"
#include "mrnet/backend_args.h"
#include "mrnet/conventions.h"
#include "mrnet/lightweight/export.h"
#include "mrnet/lightweight/packet_table.h"
#include "mrnet/lightweight/report.h"
#include "mrnet/lightweight/topology.h"
#include "mrnet/packet_codec.h"
#include "mrnet_lightweight/Network.h"

using MRN::lightweight::PacketTable;
using MRN::lightweight::report;

struct Stream_t {
  Network_t* network = nullptr;
  unsigned int id = 0;             // MRNet's
  canopy::StreamId canopy_id = 0;  // the Canopy stream that carries it
};

struct Network_t {
  struct Incoming {
    Stream_t* stream = nullptr;
    MRN::PacketPtr packet;
  };

  Network_t(std::unique_ptr<canopy::Backend> joined, std::string local_host)
      : backend(std::move(joined)), rank(backend->rank()), host(std::move(local_host)) {
    stream_for(rank, MRN::layer::kPerBackendStream);
  }

  // The first packet received and not yet taken, of `only` or of any stream if
  // `only` is null, into `out`: 1; 0 if there is none and `blocking` is false; -1
  // once the network has shut down and none is left. Packets of other streams
  // that arrive meanwhile are kept for later, in their order.
  int take(Stream_t* only, bool blocking, Incoming& out) {
    std::unique_lock lock(mutex);
    while (true) {
      if (take_pending(only, out)) return 1;
      if (shut_down) return -1;
      if (listening) {  // another thread is receiving: wait for what it brings
        if (!blocking) return 0;
        listened.wait(lock);
        continue;
      }
      if (!receive_once(lock, blocking ? kBlockingWait : std::chrono::milliseconds::zero()) && !blocking) return 0;
    }
  }

  int send(const Stream_t& stream, canopy::Packet&& packet) {
    auto sent = backend->send(stream.canopy_id, std::move(packet));
    if (!sent) {
      report("cannot send on stream " + std::to_string(stream.id) + ": " + sent.error());
      return -1;
    }
    return 0;
  }

  Stream_t* find_stream(unsigned int id) {
    std::lock_guard lock(mutex);
    auto it = streams.find(id);
    return it == streams.end() ? nullptr : it->second.get();
  }

  // Shut down as far as this back-end has heard (nothing is received to find out):
  // a flush right after the last send must not fail because the front-end,
  // answered, has already shut the tree down.
  bool known_shut_down() {
    std::lock_guard lock(mutex);
    return shut_down;
  }

  // Looks at what has arrived first, unless another thread is receiving: a back-end
  // that only polls this (while (!Stream_is_Closed(s)) sleep(1)) sees the shut-down
  // too. What arrives meanwhile is kept for the receives.
  bool is_shut_down() {
    std::unique_lock lock(mutex);
    if (!shut_down && !listening) receive_once(lock, std::chrono::milliseconds::zero());
    return shut_down;
  }

  // One receive from Canopy, `lock` released meanwhile (this thread is the one
  // listening): what came is kept in its stream's queue, or the network is marked
  // shut down. False if nothing came within `wait`.
  bool receive_once(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds wait) {
    listening = true;
    lock.unlock();
    auto in = backend->receive(wait);
    lock.lock();
    listening = false;
    listened.notify_all();
    if (!in) {
      shut_down = true;  // for good: Backend::receive() fails from now on
    } else if (*in) {
      accept(std::move(**in));
    }
    return !in || *in;
  }

  // One receive never waits longer than this; it loops.
  static constexpr std::chrono::milliseconds kBlockingWait = std::chrono::hours(1);

  const std::unique_ptr<canopy::Backend> backend;
  const canopy::Rank rank;
  std::string host;
  // The live tree as this back-end knows it, brought up to date by each
  // Network_get_NetworkTopology() (under topology_mutex).
  NetworkTopology_t topology;
  std::mutex topology_mutex;

 private:
  bool take_pending(Stream_t* only, Incoming& out) {
    for (auto it = pending.begin(); it != pending.end(); ++it) {
      if (only && it->stream != only) continue;
      out = std::move(*it);
      pending.erase(it);
      return true;
    }
    return false;
  }

  // Under `mutex`: a packet from the back-end, kept as MRNet's for take().
  void accept(canopy::Received&& in) {
    if (in.stream == 0) {  // Backend::send_to from another back-end without a stream
      report("dropped a packet (tag " + std::to_string(in.packet.tag()) + ") that came on no stream");
      return;
    }
    const unsigned int id = MRN::layer::mrnet_stream_id(in.stream, rank);
    auto packet = MRN::codec::from_canopy(std::move(in.packet), id);
    if (!packet) {
      report("dropped a packet on stream " + std::to_string(id) + ": " + packet.error());
      return;
    }
    pending.push_back(Incoming{stream_for(id, in.stream), std::move(*packet)});
  }

  // Under `mutex` (or in the constructor): the stream of MRNet id `id`, made on first use.
  Stream_t* stream_for(unsigned int id, canopy::StreamId canopy_id) {
    auto& stream = streams[id];
    if (!stream) stream.reset(new Stream_t{this, id, canopy_id});
    return stream.get();
  }

  std::mutex mutex;
  std::condition_variable listened;  // a thread has come back from backend->receive()
  bool listening = false;            // a thread is in backend->receive(): others wait for it
  bool shut_down = false;
  std::deque<Incoming> pending;  // received, not yet taken, in arrival order
  std::map<unsigned int, std::unique_ptr<Stream_t>> streams;
};

namespace {

// Network_recv and Stream_recv: `in` into the caller's packet, tag and stream.
void deliver(Network_t& net, Network_t::Incoming& in, int* tag, Packet_t* packet, Stream_t** stream) {
  PacketTable::instance().fill(packet, std::move(in.packet), &net);
  if (tag) *tag = packet->tag;
  if (stream) *stream = in.stream;
}

int receive(Network_t* net, int* tag, Packet_t* packet, Stream_t** stream, bool blocking) {
  if (!net || !packet) return -1;
  Network_t::Incoming in;
  const int got = net->take(nullptr, blocking, in);
  if (got == 1) deliver(*net, in, tag, packet, stream);
  return got;
}

}  // namespace

extern "C" {

CANOPY_MRNET_LW_EXPORT Network_t* Network_CreateNetworkBE(int argc, char* argv[]) {
  auto args = MRN::layer::parse_backend_args(argc, argv);
  if (!args) {
    report("Network_CreateNetworkBE: " + args.error());
    return nullptr;
  }
  auto backend = MRN::layer::connect_backend(argc, argv);
  if (!backend) {
    report("Network_CreateNetworkBE: cannot join the tree as back-end " + std::to_string(args->rank) + ": " +
           backend.error());
    return nullptr;
  }
  return new Network_t(std::move(*backend), args->host);
}

CANOPY_MRNET_LW_EXPORT void delete_Network_t(Network_t* net) {
  if (!net) return;
  PacketTable::instance().release_all(net);
  delete net;
}

CANOPY_MRNET_LW_EXPORT char* Network_get_LocalHostName(Network_t* net) { return net ? net->host.data() : nullptr; }

CANOPY_MRNET_LW_EXPORT Port Network_get_LocalPort(Network_t*) { return UnknownPort; }

CANOPY_MRNET_LW_EXPORT Rank Network_get_LocalRank(Network_t* net) { return net ? net->rank : UnknownRank; }

CANOPY_MRNET_LW_EXPORT NetworkTopology_t* Network_get_NetworkTopology(Network_t* net) {
  if (!net) return nullptr;
  auto status = net->backend->status();
  std::lock_guard lock(net->topology_mutex);
  net->topology.reset(status);
  return &net->topology;
}

CANOPY_MRNET_LW_EXPORT char Network_is_ShutDown(Network_t* net) { return !net || net->is_shut_down() ? 1 : 0; }

CANOPY_MRNET_LW_EXPORT void Network_waitfor_ShutDown(Network_t* net) {
  if (!net) return;
  Network_t::Incoming discarded;
  while (net->take(nullptr, true, discarded) == 1) {
  }
}

CANOPY_MRNET_LW_EXPORT int Network_recv(Network_t* net, int* tag, Packet_t* packet, Stream_t** stream) {
  return receive(net, tag, packet, stream, true);
}

CANOPY_MRNET_LW_EXPORT int Network_recv_nonblock(Network_t* net, int* tag, Packet_t* packet, Stream_t** stream) {
  return receive(net, tag, packet, stream, false);
}

CANOPY_MRNET_LW_EXPORT Stream_t* Network_get_Stream(Network_t* net, unsigned int id) {
  return net ? net->find_stream(id) : nullptr;
}

CANOPY_MRNET_LW_EXPORT void Network_set_OutputLevel(int level) { MRN::lightweight::set_output_level(level); }

CANOPY_MRNET_LW_EXPORT void Network_set_DebugLogDir(char*) {}

CANOPY_MRNET_LW_EXPORT void get_Version(int* major, int* minor, int* revision) {
  if (major) *major = MRNET_VERSION_MAJOR;
  if (minor) *minor = MRNET_VERSION_MINOR;
  if (revision) *revision = MRNET_VERSION_REV;
}

CANOPY_MRNET_LW_EXPORT unsigned int Stream_get_Id(Stream_t* stream) { return stream ? stream->id : INVALID_STREAM_ID; }

CANOPY_MRNET_LW_EXPORT int Stream_send(Stream_t* stream, int tag, const char* fmt, ...) {
  if (!stream || !fmt) return -1;
  va_list values;
  va_start(values, fmt);
  // Straight into Canopy's packet, as the C++ layer's Stream::send.
  auto packet = MRN::codec::pack_canopy(tag, fmt, values);
  va_end(values);
  if (!packet) {
    report("Stream_send on stream " + std::to_string(stream->id) + ": " + packet.error());
    return -1;
  }
  return stream->network->send(*stream, std::move(*packet));
}

CANOPY_MRNET_LW_EXPORT int Stream_send_packet(Stream_t* stream, Packet_t* packet) {
  const MRN::PacketPtr* values = MRN::lightweight::values_of(packet);
  if (!stream || !values) return -1;
  canopy::Packet out = MRN::codec::to_canopy(**values);
  out.set_tag(packet->tag);
  return stream->network->send(*stream, std::move(out));
}

CANOPY_MRNET_LW_EXPORT int Stream_flush(Stream_t* stream) {
  return stream && !stream->network->known_shut_down() ? 0 : -1;
}

CANOPY_MRNET_LW_EXPORT int Stream_recv(Stream_t* stream, int* tag, Packet_t* packet, bool_t blocking) {
  if (!stream || !packet) return -1;
  Network_t::Incoming in;
  const int got = stream->network->take(stream, blocking != 0, in);
  if (got == 1) deliver(*stream->network, in, tag, packet, nullptr);
  return got;
}

CANOPY_MRNET_LW_EXPORT char Stream_is_Closed(Stream_t* stream) {
  return !stream || stream->network->is_shut_down() ? 1 : 0;
}

}  // extern "C"
