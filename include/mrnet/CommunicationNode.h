// MRN::CommunicationNode: one end-point of a communicator (a back-end), as MRNet
// 5.0.1 tools see it (docs/mrnet.md).
#pragma once

#include <string>

#include "mrnet/Types.h"

namespace MRN {

class CommunicationNode {
 public:
  CommunicationNode(const std::string& host, Port port, Rank rank) : host_(host), port_(port), rank_(rank) {}
  std::string get_HostName() const { return host_; }
  Port get_Port() const { return port_; }
  Rank get_Rank() const { return rank_; }

  struct ltnode {
    bool operator()(const CommunicationNode* a, const CommunicationNode* b) const {
      return a->get_Rank() < b->get_Rank();
    }
  };

 private:
  std::string host_;
  Port port_;
  Rank rank_;
};

}  // namespace MRN
