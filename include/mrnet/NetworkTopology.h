// MRN::NetworkTopology: the tree as MRNet 5.0.1 tools query it (docs/mrnet.md), on
// Canopy: the live tree as the process knows it (canopy::Network::status() at the
// front-end, canopy::Backend::status() at a back-end): current parents after
// adoptions, failed nodes marked.
// TopologyLocalInfo is what a filter function is told about the node it runs at.
#pragma once

#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "mrnet/Error.h"
#include "mrnet/Types.h"

namespace MRN {

class Network;

class NetworkTopology : public Error {
 public:
  class Node {
   public:
    // A reference (MRNet returns a copy): the lightweight API hands out its storage.
    const std::string& get_HostName() const { return host_; }
    // Where a commnode (or the front-end) listens: an MRNet tool in attach mode hands
    // it to its back-ends with the host and rank (docs/mrnet.md). UnknownPort for a
    // back-end, and at a back-end for every node.
    Port get_Port() const { return port_; }
    Rank get_Rank() const { return rank_; }
    Rank get_Parent() const { return parent_ ? parent_->rank_ : UnknownRank; }
    const std::set<Node*>& get_Children() const { return children_; }
    unsigned int get_NumChildren() const { return static_cast<unsigned int>(children_.size()); }
    unsigned int find_SubTreeHeight();
    bool failed() const { return failed_; }
    bool is_BackEnd() const { return backend_; }
    // MRNet's adoption-score queries; Canopy chooses adopters itself (docs/fault-tolerance.md).
    double get_AdoptionScore() const { return 0; }
    double get_WRSKey() const { return 0; }
    double get_RandKey() const { return 0; }
    void set_Port(Port) {}

   private:
    friend class NetworkTopology;
    Node(std::string host, Rank rank, bool backend) : host_(std::move(host)), rank_(rank), backend_(backend) {}
    std::string host_;
    Port port_ = UnknownPort;
    Rank rank_;
    bool backend_;
    bool failed_ = false;
    Node* parent_ = nullptr;
    std::set<Node*> children_;
  };

  NetworkTopology();
  ~NetworkTopology();
  NetworkTopology(const NetworkTopology&) = delete;
  NetworkTopology& operator=(const NetworkTopology&) = delete;

  unsigned int get_NumNodes() const;
  void get_TreeStatistics(unsigned int& num_nodes, unsigned int& depth, unsigned int& min_fanout,
                          unsigned int& max_fanout, double& avg_fanout, double& stddev_fanout);
  Node* get_Root() { return root_; }
  Node* find_Node(Rank rank) const;
  void get_Leaves(std::vector<Node*>& leaves) const;
  void get_ParentNodes(std::set<Node*>& nodes) const;
  void get_OrphanNodes(std::set<Node*>& nodes) const;
  void get_BackEndNodes(std::set<Node*>& nodes) const;
  size_t num_BackEndNodes() const;
  size_t num_InternalNodes() const;
  void get_Descendants(Node* node, std::vector<Node*>& descendants) const;
  void get_LeafDescendants(Node* node, std::vector<Node*>& descendants) const;
  bool node_Failed(Rank rank) const;

  // One line per parent: "host:rank => host:rank ... ;" (MRNet's topology format).
  std::string get_TopologyString();
  void print(FILE* out) const;
  void print_TopologyFile(const char* filename) const;
  void print_DOTGraph(const char* filename) const;

  // The layer's own: replaces the whole tree. `parent` UnknownRank marks the root.
  struct Entry {
    Rank rank;
    std::string host;
    Rank parent;
    bool backend;
    bool failed;
    Port port = UnknownPort;
  };
  void reset_Nodes(const std::vector<Entry>& entries);

 private:
  std::string topology_string() const;
  std::map<Rank, std::unique_ptr<Node>> nodes_;
  Node* root_ = nullptr;
};

// What a filter function learns about the node it runs at (its last argument).
class TopologyLocalInfo {
 public:
  TopologyLocalInfo(NetworkTopology* topology, NetworkTopology::Node* node)
      : local_node(node), topol(topology) {}
  // The layer's own, where no NetworkTopology is at hand (inside Canopy's commnodes):
  // the node's rank, how many children take part in the stream there, and where the
  // node stood in the live tree when the filter was created (docs/mrnet.md).
  struct Place {
    unsigned int children = 0;
    unsigned int siblings = 0;
    unsigned int descendants = 0;
    unsigned int leaf_descendants = 0;
    unsigned int root_distance = 0;
    unsigned int max_leaf_distance = 0;
  };
  TopologyLocalInfo(Rank rank, const Place& place) : rank_(rank), place_(place) {}

  Rank get_Rank() const;
  unsigned int get_NumChildren() const;
  unsigned int get_NumSiblings() const;
  unsigned int get_NumDescendants() const;
  unsigned int get_NumLeafDescendants() const;
  unsigned int get_RootDistance() const;
  unsigned int get_MaxLeafDistance() const;
  const NetworkTopology* get_Topology() const { return topol; }
  const Network* get_Network() const { return nullptr; }

 private:
  NetworkTopology::Node* local_node = nullptr;
  NetworkTopology* topol = nullptr;
  Rank rank_ = UnknownRank;
  Place place_;
};

}  // namespace MRN
