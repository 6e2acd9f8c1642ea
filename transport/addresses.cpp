#include "transport/addresses.h"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>

namespace canopy::transport {

namespace {

std::string numeric(const sockaddr* sa) {
  char text[INET6_ADDRSTRLEN] = {};
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, text, sizeof text);
  } else if (sa->sa_family == AF_INET6) {
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, text, sizeof text);
  }
  return text;
}

bool link_local_v6(const std::string& address) {
  in6_addr a{};
  return inet_pton(AF_INET6, address.c_str(), &a) == 1 && IN6_IS_ADDR_LINKLOCAL(&a);
}

}  // namespace

bool is_numeric_address(const std::string& text) {
  unsigned char buffer[sizeof(in6_addr)];
  return inet_pton(AF_INET, text.c_str(), buffer) == 1 || inet_pton(AF_INET6, text.c_str(), buffer) == 1;
}

bool is_loopback(const std::string& address) {
  in_addr v4{};
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, address.c_str(), &v6) == 1) {
    if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
    // ::ffff:127.x.y.z
    return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
  }
  return false;
}

std::vector<std::string> resolve(const std::string& name) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  std::vector<std::string> out;
  if (getaddrinfo(name.c_str(), nullptr, &hints, &found) != 0) return out;
  for (addrinfo* a = found; a; a = a->ai_next) {
    std::string text = numeric(a->ai_addr);
    if (!text.empty() && std::find(out.begin(), out.end(), text) == out.end()) out.push_back(text);
  }
  freeaddrinfo(found);
  std::stable_partition(out.begin(), out.end(), [](const std::string& a) { return a.find(':') == std::string::npos; });
  return out;
}

std::optional<std::string> source_towards(const std::string& address) {
  sockaddr_storage to{};
  socklen_t length = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&to);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&to);
  if (inet_pton(AF_INET, address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(9);  // discard; nothing is sent: connect() on UDP only picks the route
    length = sizeof *v4;
  } else if (inet_pton(AF_INET6, address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(9);
    length = sizeof *v6;
  } else {
    return std::nullopt;
  }
  const int fd = socket(to.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> out;
  sockaddr_storage from{};
  socklen_t from_length = sizeof from;
  if (connect(fd, reinterpret_cast<sockaddr*>(&to), length) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&from), &from_length) == 0) {
    out = numeric(reinterpret_cast<sockaddr*>(&from));
  }
  close(fd);
  return out;
}

std::vector<std::string> local_addresses() {
  ifaddrs* list = nullptr;
  std::vector<std::string> out;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    if (i->ifa_addr->sa_family != AF_INET && i->ifa_addr->sa_family != AF_INET6) continue;
    std::string text = numeric(i->ifa_addr);
    if (text.empty() || link_local_v6(text) || std::find(out.begin(), out.end(), text) != out.end()) continue;
    out.push_back(std::move(text));
  }
  freeifaddrs(list);
  std::stable_partition(out.begin(), out.end(), [](const std::string& a) { return !is_loopback(a); });
  std::stable_partition(out.begin(), out.end(),
                        [](const std::string& a) { return !is_loopback(a) && a.find(':') == std::string::npos; });
  return out;
}

}  // namespace canopy::transport
