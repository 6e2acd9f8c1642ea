// Addresses of this host and the routes out of it, as the kernel sees them: what a
// front-end needs to tell processes on other hosts an address of its own they can
// reach (core/reachable.h; docs/launch.md, "Which address the children are told").
// Blocking calls (getaddrinfo, getifaddrs); called once before a launch.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace canopy::transport {

// Whether `address`, numeric (IPv4 or IPv6), is a loopback address (127.0.0.0/8, ::1).
bool is_loopback(const std::string& address);
// Whether `text` is a numeric IPv4 or IPv6 address.
bool is_numeric_address(const std::string& text);
// The numeric addresses a host name (or a numeric address) resolves to here, IPv4
// first; empty if it does not resolve.
std::vector<std::string> resolve(const std::string& name);
// The address of this host the kernel would send from to reach `address` (numeric):
// its route's source; nothing if there is no route.
std::optional<std::string> source_towards(const std::string& address);
// The addresses of this host's interfaces that are up, loopback ones last, IPv4
// before IPv6 (link-local IPv6 left out: it needs an interface to be of use).
std::vector<std::string> local_addresses();

}  // namespace canopy::transport
