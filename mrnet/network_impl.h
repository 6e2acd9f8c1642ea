// MRN::Network's state (docs/mrnet.md): the Canopy front-end or back-end under it,
// the streams and their queues, filters, communicators and events. Private to the
// layer; shared by network.cpp, stream.cpp and events.cpp.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "canopy/backend.h"
#include "canopy/frontend.h"
#include "mrnet/Network.h"

namespace MRN {

namespace layer {
// print_PerformanceData's answer: one line on stderr, once per process.
void say_no_performance_data();
}  // namespace layer

// A filter id the network knows: a built-in, or a tool's function (load_FilterFunc).
struct FilterInfo {
  std::string canopy_name;  // the Canopy filter that runs it
  std::string so_file;      // a tool's function: its shared object and name
  std::string function;
  // A stream whose nodes run filters of their own (per-node assignment): new
  // parameters keep each node's function.
  bool per_node = false;
};

struct Network::Impl {
  Network* self = nullptr;
  std::unique_ptr<canopy::Network> frontend;
  std::unique_ptr<canopy::Backend> backend;
  Rank rank = UnknownRank;
  std::string host;

  // Front-end: the back-ends, the communicators, the filters.
  std::map<Rank, std::unique_ptr<CommunicationNode>> endpoints;
  std::list<std::unique_ptr<Communicator>> communicators;
  Communicator* broadcast = nullptr;
  std::map<int, FilterInfo> filters;
  // Each stream's tool functions (for set_FilterParameters), by Canopy id and slot.
  std::map<std::pair<canopy::StreamId, canopy::FilterSlot>, FilterInfo> stream_filters;
  int next_filter_id = 100;
  std::string plugin;                 // canopy_mrnet_filters.so
  std::vector<std::string> loaded;    // Canopy filter names loaded into the tree
  bool recovery = true;
  std::string attach_file;        // attach mode: the file CANOPY_ATTACH names
  bool open_attach = false;       // attach mode without CANOPY_BACKENDS: back-ends join as they come
  std::vector<std::string> attach_places;  // open attach: the attach file's links (attach_place.h)
  std::atomic<bool> per_backend_open{false};  // the per-back-end streams' Canopy stream exists
  std::mutex per_backend_mutex;                // one thread opens it
  std::set<Rank> attached;        // back-ends seen in the view, part of the topology from then on (guarded by mutex)
  mutable std::unique_ptr<NetworkTopology> topology;

  // Streams and what has arrived for them. `mutex` guards streams, their queues,
  // `pumping`, `stopped` and the event queue; one thread at a time receives from
  // Canopy (pumping), the others wait on `arrived`.
  mutable std::mutex mutex;
  std::condition_variable arrived;
  bool pumping = false;
  std::vector<canopy::Received> batch;  // pump()'s, reused
  bool stopped = false;
  std::map<unsigned int, std::unique_ptr<Stream>> streams;
  unsigned int round_robin = 0;  // where Network::recv looks first

  // Events (events.cpp).
  std::deque<std::unique_ptr<Event>> events;
  struct Callback {
    EventClass event_class;
    EventType type;
    evt_cb_func function;
    void* data;
    bool onetime;
  };
  std::vector<Callback> callbacks;
  std::deque<std::unique_ptr<Event>> for_callbacks;  // events a callback takes
  std::map<EventClass, std::pair<int, int>> event_pipes;  // read, write
  std::thread event_thread;
  int wake[2] = {-1, -1};
  bool data_events_wanted = false;

  bool is_frontend() const { return frontend != nullptr; }

  // Receives from Canopy (waiting at most `timeout` for the first packet, then
  // taking what is already there) and files each packet in the queue of its stream.
  // Called with `lock` held; releases it meanwhile. False if Canopy reported a
  // failure that the receiver must hear of (the network's error says which); data
  // that may be lost after a failure is an error event.
  bool pump(std::unique_lock<std::mutex>& lock, std::chrono::milliseconds timeout);
  // Creates the Canopy stream of the per-back-end streams, if not yet done: at
  // launch, or in attach mode before the first stream or point-to-point send.
  canopy::Result<void> open_per_backend_stream();
  // Files one packet: the stream it belongs to, made if needed.
  void file(canopy::Received&& received);
  // The stream for MRNet id `id` on Canopy stream `canopy_id`, made if unknown.
  Stream* stream_for(unsigned int id, canopy::StreamId canopy_id, Rank backend);
  // Waits for a packet of `stream` (or, if null, of any stream). 1, 0 or -1.
  int receive(Stream* stream, int* tag, PacketPtr& packet, Stream** from, bool blocking);
  // Sends one MRNet packet down (front-end: to `backend`, or all of the stream if
  // UnknownRank) or up (back-end). 0 or -1.
  int send(canopy::StreamId canopy_id, Rank backend, const Packet& packet);
  // The same for a packet already in Canopy's form (codec::to_canopy, pack_canopy).
  int send(canopy::StreamId canopy_id, Rank backend, canopy::Packet&& packet);
  // Records an error from Canopy's result on the network. Returns -1.
  int fail(ErrorCode code, const std::string& why);
  // Stopped as far as this process has heard (nothing is received to find out).
  bool known_stopped() {
    std::lock_guard lock(mutex);
    return stopped || (!frontend && !backend);
  }

  // Finds canopy_mrnet_filters.so (`plugin`), or says why not.
  canopy::Result<void> find_plugin();
  // Loads the MRNet plug-in's built-in filters into the tree (at launch).
  canopy::Result<void> load_builtins();
  // Makes sure the tree has Canopy filter `name` (loading the MRNet plug-in).
  canopy::Result<void> ensure_loaded(const std::string& name);
  // new_Stream, with the nodes named in `upstream_at` running their own upstream
  // filters (MRNet's per-node assignment strings).
  Stream* new_stream(Communicator* communicator, int upstream, int sync, int downstream,
                     const std::map<Rank, int>& upstream_at);

  // Events (events.cpp): converts Canopy's, queues them, and wakes whoever waits.
  void poll_canopy_events();
  void post(std::unique_ptr<Event> event);
  void start_event_thread();
  void stop_event_thread();
  void event_loop();
};

}  // namespace MRN
