#include "core/reachable.h"

#include <algorithm>

#include "transport/addresses.h"

namespace canopy::core {

namespace {

std::string joined(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& item : items) out += (out.empty() ? "" : ", ") + item;
  return out.empty() ? "none" : out;
}

const Host* host_named(const Topology& topology, const std::string& name) {
  for (const Host& h : topology.hosts()) {
    if (h.name == name) return &h;
  }
  return nullptr;
}

}  // namespace

Result<std::vector<std::string>> choose_reachable_address(Topology& topology, Rank self, const std::string& advertise) {
  const TopologyNode& node = topology.at(self);
  const std::string me = node.host;
  const bool frontend = node.role == Role::frontend;
  const std::string who = frontend ? std::string("front-end") : "commnode " + std::to_string(self);
  // How the user names another address: the front-end's flag, else the topology.
  const std::string choose =
      frontend ? std::string("--advertise ADDR") : "an address for host '" + me + "' in the topology (hosts: address)";
  const Host* mine = host_named(topology, me);
  if (!advertise.empty()) {
    if (!transport::is_numeric_address(advertise)) {
      return Error{"--advertise " + advertise + ": not a numeric IPv4 or IPv6 address", ErrorKind::invalid_input};
    }
    const auto here = transport::local_addresses();
    if (std::find(here.begin(), here.end(), advertise) == here.end()) {
      return Error{"--advertise " + advertise + ": not an address of this host (its addresses: " + joined(here) + ")",
                   ErrorKind::invalid_input};
    }
    if (mine && !mine->nics.empty()) {
      return Error{"--advertise " + advertise + ": the topology lists host '" + me + "''s NICs, which are its addresses",
                   ErrorKind::invalid_input};
    }
    topology.set_address(me, advertise);
    return std::vector<std::string>{"the " + who + " listens on " + advertise + " and its children are told it (--advertise)"};
  }
  if (mine && (!mine->address.empty() || !mine->nics.empty())) return std::vector<std::string>{};
  // The other hosts of the tree, in the order their first process comes.
  std::vector<std::string> others;
  for (const auto& n : topology.nodes()) {
    if (n.host != me && std::find(others.begin(), others.end(), n.host) == others.end()) others.push_back(n.host);
  }
  if (others.empty()) return std::vector<std::string>{};
  const auto own = transport::resolve(topology.address_of(me));
  const bool loopback = own.empty() || std::all_of(own.begin(), own.end(), transport::is_loopback);
  if (!loopback) return std::vector<std::string>{};

  const std::string what = "the " + who + "'s host '" + me + "' resolves to " +
                           (own.empty() ? std::string("nothing") : joined(own)) + " here";
  // Hosts that resolve here to loopback addresses are this machine (a test's, or
  // aliases): only another machine, or a host that does not resolve here, needs an
  // address that is not loopback.
  std::vector<std::string> tried;
  bool remote = false;      // another host resolved here to an address that is not loopback
  bool unresolved = false;  // another host did not resolve here
  for (const auto& other : others) {
    const auto there = transport::resolve(topology.address_of(other));
    if (there.empty()) {
      unresolved = true;
      tried.push_back("'" + other + "' does not resolve");
      continue;
    }
    if (transport::is_loopback(there.front())) {
      tried.push_back("'" + other + "' resolves to " + there.front() + ", a loopback address");
      continue;
    }
    remote = true;
    const auto from = transport::source_towards(there.front());
    if (!from || transport::is_loopback(*from)) {
      tried.push_back("no route to '" + other + "' (" + there.front() + ")");
      continue;
    }
    topology.set_address(me, *from);
    return std::vector<std::string>{what + ", which processes on '" + other + "' cannot reach: it listens on " + *from +
                                    ", the address this host reaches " + there.front() + " from, and its children "
                                    "are told it (" + choose + " chooses another)"};
  }
  if (!remote && !unresolved) return std::vector<std::string>{};  // every process runs on this machine
  const auto here = transport::local_addresses();
  if (!here.empty() && !transport::is_loopback(here.front())) {
    topology.set_address(me, here.front());
    return std::vector<std::string>{what + ", which processes on other hosts cannot reach (" + joined(tried) +
                                    "): it listens on " + here.front() + ", the first address of this host that is "
                                    "not loopback (" + choose + " chooses another)"};
  }
  if (!remote) {  // names that do not resolve here may still be this host's (a launcher's aliases)
    return std::vector<std::string>{what + ", and no other host of the tree resolves here (" + joined(tried) +
                                    "), nor has this host another address: its children are told " +
                                    (own.empty() ? topology.address_of(me) : own.front()) +
                                    "; if they run elsewhere, name an address with " + choose};
  }
  return Error{what + ", which processes on '" + others.front() + "' cannot reach, and this host has no other address (" +
                   joined(tried) + "; its addresses: " + joined(here) + "): name one with " + choose,
               ErrorKind::invalid_input};
}

}  // namespace canopy::core
