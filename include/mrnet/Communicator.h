// MRN::Communicator: a set of back-ends a stream is created over (docs/mrnet.md).
// Made by Network::get_BroadcastCommunicator() (every back-end) and
// Network::new_Communicator(...); owned by the Network.
#pragma once

#include <mutex>
#include <set>

#include "mrnet/CommunicationNode.h"
#include "mrnet/Types.h"

namespace MRN {

class Network;

class Communicator {
 public:
  // Adds back-end `rank`; false if the network has no such back-end.
  bool add_EndPoint(Rank rank);
  bool add_EndPoint(CommunicationNode* node);
  const std::set<CommunicationNode*>& get_EndPoints() const { return endpoints_; }
  unsigned int size() const { return static_cast<unsigned int>(endpoints_.size()); }

 private:
  friend class Network;
  explicit Communicator(Network* network) : network_(network) {}
  Network* network_;
  std::set<CommunicationNode*> endpoints_;
  std::mutex mutex_;
};

}  // namespace MRN
