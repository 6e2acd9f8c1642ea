// MRN::Network: MRNet 5.0.1's network (docs/mrnet.md), on Canopy's public API.
//
//   Network* net = Network::CreateNetworkFE("tree.top", "./be", be_argv);
//   if (net->has_Error()) { net->print_error("launch"); return 1; }
//   Communicator* all = net->get_BroadcastCommunicator();
//   Stream* s = net->new_Stream(all, TFILTER_SUM, SFILTER_WAITFORALL);
//   s->send(FirstApplicationTag, "%d", 5);
//   int tag; PacketPtr p; s->recv(&tag, p); int sum; p->unpack("%d", &sum);
//   delete net;  // tears the tree down
//
// A front-end's network is Canopy's front-end (canopy::Network): the tree heals from
// failures, links may be striped, and nothing is left running after `delete`. A
// back-end's is a Canopy back-end (canopy::Backend), started by Canopy with MRNet's
// five trailing arguments or attached (decision 6).
#pragma once

#include <cstdarg>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "mrnet/Communicator.h"
#include "mrnet/Error.h"
#include "mrnet/Event.h"
#include "mrnet/FilterIds.h"
#include "mrnet/NetworkTopology.h"
#include "mrnet/Packet.h"
#include "mrnet/Stream.h"
#include "mrnet/Types.h"
#include "xplat/Monitor.h"  // as MRNet's Network.h: tools reach XPlat::Monitor through it

namespace MRN {

class Network : public Error {
 public:
  // Launches the tree of `topology` (a file in MRNet's format or Canopy's YAML, or,
  // with `using_mem_buf`, the text itself) with `backend_exe` and `backend_argv`
  // (NULL-terminated) on every leaf. Never NULL: on failure has_Error() is true and
  // print_error() says why. Attributes: MRNET_STARTUP_TIMEOUT (seconds),
  // MRNET_FAILURE_RECOVERY ("false" turns healing off), XPLAT_RSH (how to reach
  // another host); others are accepted and ignored (docs/mrnet.md).
  static Network* CreateNetworkFE(const char* topology, const char* backend_exe, const char** backend_argv,
                                  const std::map<std::string, std::string>* attrs = NULL,
                                  bool rank_backends = true, bool using_mem_buf = false);
  // A back-end: takes its rank and parent from the last five arguments, as MRNet
  // does. Never NULL; has_Error() on failure.
  static Network* CreateNetworkBE(int argc, char* argv[]);
  // Front-end: tears the tree down. Back-end: leaves.
  virtual ~Network();

  NetworkTopology* get_NetworkTopology() const;
  bool is_ShutDown() const;
  // Back-end: returns once the front-end has shut the tree down. Front-end: at once.
  void waitfor_ShutDown() const;
  // Prints "<str>: <MRNet's message>: <why>" to stderr when there is an error.
  void print_error(const char* str);

  std::string get_LocalHostName() const;
  Port get_LocalPort() const { return UnknownPort; }
  Rank get_LocalRank() const;
  bool is_LocalNodeChild() const { return !is_LocalNodeFrontEnd(); }
  bool is_LocalNodeParent() const { return is_LocalNodeFrontEnd(); }
  bool is_LocalNodeInternal() const { return false; }
  bool is_LocalNodeFrontEnd() const;
  bool is_LocalNodeBackEnd() const { return !is_LocalNodeFrontEnd(); }

  // Every back-end; owned by the network.
  Communicator* get_BroadcastCommunicator() const;
  // New communicators, owned by the network (back-ends: NULL).
  Communicator* new_Communicator();
  Communicator* new_Communicator(Communicator& copy);
  Communicator* new_Communicator(const std::set<Rank>& backends);
  Communicator* new_Communicator(std::set<CommunicationNode*>& backends);
  CommunicationNode* get_EndPoint(Rank rank) const;

  // Loads filter function `function` from `so_file` into the tree: the next id from
  // 100, or -1 (print_error says why: no file, no symbol, no NAME_format_string).
  int load_FilterFunc(const char* so_file, const char* function);
  int load_FilterFuncs(const char* so_file, const std::vector<const char*>& functions, std::vector<int>& ids);

  // A stream over `communicator` (NULL on error; print_error says why).
  Stream* new_Stream(Communicator* communicator, int upstream_filter = TFILTER_NULL,
                     int sync_filter = SFILTER_WAITFORALL, int downstream_filter = TFILTER_NULL);
  // MRNet's per-node filter assignment strings: one filter id for every node.
  Stream* new_Stream(Communicator* communicator, std::string upstream_filters, std::string sync_filters,
                     std::string downstream_filters);
  // A user stream, or at the front-end the per-back-end stream `id` = a back-end's
  // rank (at a back-end, its own rank): NULL if unknown.
  Stream* get_Stream(unsigned int id) const;

  // The next packet of any stream: 1; 0 if non-blocking and nothing is there; -1 if
  // there is no stream, the network stopped or failed (print_error says why).
  int recv(int* tag, PacketPtr& packet, Stream** stream, bool blocking = true);
  // Front-end: to one back-end, on its per-back-end stream. 0 or -1.
  int send(Rank backend, int tag, const char* format, ...);
  int send(Rank backend, const char* format, va_list values, int tag);
  int send(Rank backend, int tag, const void** values, const char* format);
  int send(Rank backend, PacketPtr& packet);
  int flush() const;

  // MRNet's performance data is not collected (docs/mrnet.md): these return false,
  // `results` stays empty, and print_PerformanceData says so on stderr, once.
  bool enable_PerformanceData(perfdata_metric_t metric, perfdata_context_t context) { return false; }
  bool disable_PerformanceData(perfdata_metric_t metric, perfdata_context_t context) { return false; }
  bool collect_PerformanceData(std::map<int, rank_perfdata_map>& results, perfdata_metric_t metric,
                               perfdata_context_t context, int aggr_filter_id = TFILTER_ARRAY_CONCAT) {
    return false;
  }
  void print_PerformanceData(perfdata_metric_t metric, perfdata_context_t context);

  // Events: polled, by descriptor, or by callback (run on the layer's event thread).
  void clear_Events();
  unsigned int num_EventsPending();
  Event* next_Event();  // the caller deletes it; NULL if none
  int get_EventNotificationFd(EventClass event_class);
  void clear_EventNotificationFd(EventClass event_class);
  void close_EventNotificationFd(EventClass event_class);
  bool register_EventCallback(EventClass event_class, EventType type, evt_cb_func function, void* data,
                              bool onetime = false);
  bool remove_EventCallback(evt_cb_func function, EventClass event_class, EventType type);
  bool remove_EventCallbacks(EventClass event_class, EventType type);

  // Front-end: healing on (MRNet's default and Canopy's) or off from now on, at every
  // process of the tree (canopy::Network::set_healing); returns once each has
  // switched. Off, a lost commnode ends its subtree. At launch, the attribute
  // MRNET_FAILURE_RECOVERY ("0" or "false": off) does the same. A back-end cannot:
  // false, as in MRNet.
  bool set_FailureRecovery(bool enable);

  struct Impl;  // the layer's own

 private:
  friend class Stream;
  friend class Communicator;
  Network();
  std::unique_ptr<Impl> impl_;
};

}  // namespace MRN
