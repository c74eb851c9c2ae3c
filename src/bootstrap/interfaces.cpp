#include "bootstrap/interfaces.h"

#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sstream>

namespace conflux {

std::vector<NetInterface> list_interfaces() {
  std::vector<NetInterface> out;
  ifaddrs* list = nullptr;
  if (getifaddrs(&list) != 0) return out;
  for (ifaddrs* i = list; i != nullptr; i = i->ifa_next) {
    if (i->ifa_addr == nullptr || (i->ifa_flags & IFF_UP) == 0) continue;
    int family = i->ifa_addr->sa_family;
    if (family != AF_INET && family != AF_INET6) continue;
    if (family == AF_INET6) {
      auto* in6 = reinterpret_cast<const sockaddr_in6*>(i->ifa_addr);
      if (IN6_IS_ADDR_LINKLOCAL(&in6->sin6_addr)) continue;  // needs a scope id; skip as NCCL does
    }
    NetInterface n;
    n.name = i->ifa_name;
    n.addr.len = family == AF_INET ? sizeof(sockaddr_in) : sizeof(sockaddr_in6);
    std::memcpy(&n.addr.storage, i->ifa_addr, n.addr.len);
    n.addr.set_port(0);
    out.push_back(n);
  }
  freeifaddrs(list);
  // IPv4 first: the common case, and what peers most likely reach.
  std::stable_sort(out.begin(), out.end(), [](const NetInterface& a, const NetInterface& b) {
    return a.addr.family() == AF_INET && b.addr.family() != AF_INET;
  });
  return out;
}

bool ifname_matches(const std::string& spec_in, const std::string& name) {
  std::string spec = spec_in;
  bool exclude = !spec.empty() && spec[0] == '^';
  if (exclude) spec.erase(0, 1);
  bool exact = !spec.empty() && spec[0] == '=';
  if (exact) spec.erase(0, 1);
  bool matched = false;
  std::stringstream ss(spec);
  std::string item;
  while (std::getline(ss, item, ',')) {
    if (item.empty()) continue;
    if (exact ? name == item : name.compare(0, item.size(), item) == 0) matched = true;
  }
  return exclude ? !matched : matched;
}

std::string describe_interfaces(const std::vector<NetInterface>& ifs) {
  std::string s;
  for (const auto& i : ifs) {
    if (!s.empty()) s += ", ";
    std::string a = i.addr.str();
    s += i.name + " (" + a.substr(0, a.rfind(':')) + ")";
  }
  return s.empty() ? "none" : s;
}

namespace {
// The local address the kernel would use to reach `toward` (no packet is sent:
// connect() on a UDP socket only picks the route).
bool route_source(const SockAddr& toward, SockAddr* source) {
  int fd = ::socket(toward.family(), SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  SockAddr target = toward;
  if (target.port() == 0) target.set_port(9);
  bool ok = ::connect(fd, target.sa(), target.len) == 0;
  if (ok) {
    source->len = sizeof source->storage;
    ok = getsockname(fd, reinterpret_cast<sockaddr*>(&source->storage), &source->len) == 0;
  }
  ::close(fd);
  return ok;
}

bool same_ip(const SockAddr& a, const SockAddr& b) {
  if (a.family() != b.family()) return false;
  if (a.family() == AF_INET)
    return reinterpret_cast<const sockaddr_in*>(&a.storage)->sin_addr.s_addr ==
           reinterpret_cast<const sockaddr_in*>(&b.storage)->sin_addr.s_addr;
  return std::memcmp(&reinterpret_cast<const sockaddr_in6*>(&a.storage)->sin6_addr,
                     &reinterpret_cast<const sockaddr_in6*>(&b.storage)->sin6_addr, 16) == 0;
}
}  // namespace

bool is_loopback(const SockAddr& a) {
  if (a.family() == AF_INET)
    return (ntohl(reinterpret_cast<const sockaddr_in*>(a.sa())->sin_addr.s_addr) >> 24) == 127;
  if (a.family() == AF_INET6) return IN6_IS_ADDR_LOOPBACK(&reinterpret_cast<const sockaddr_in6*>(a.sa())->sin6_addr);
  return false;
}

Result<NetInterface> choose_interface(const std::string& spec, const SockAddr* toward) {
  std::vector<NetInterface> ifs = list_interfaces();
  if (!spec.empty()) {
    for (const auto& i : ifs)
      if (ifname_matches(spec, i.name)) return i;
    return invalid_argument("CONFLUX_SOCKET_IFNAME=" + spec + " matches no interface; interfaces: " +
                            describe_interfaces(ifs));
  }
  if (toward != nullptr) {
    SockAddr source;
    if (route_source(*toward, &source)) {
      for (const auto& i : ifs)
        if (same_ip(i.addr, source)) return i;
    }
  }
  for (const auto& i : ifs)
    if (i.name != "lo" && i.name.compare(0, 6, "docker") != 0) return i;
  for (const auto& i : ifs)
    if (i.name == "lo") return i;
  return invalid_argument("no usable network interface; interfaces: " + describe_interfaces(ifs));
}

DataInterfaces choose_data_interfaces(const std::string& spec, const NetInterface& route, const std::string& nearest,
                                      const std::vector<NetInterface>& ifs) {
  DataInterfaces d;
  d.preferred = route;
  if (!spec.empty()) {
    d.why = "CONFLUX_SOCKET_IFNAME chose " + route.name;
  } else if (route.name == "lo" || is_loopback(route.addr)) {
    d.why = "rendezvous over loopback: single-host job";
  } else if (nearest.empty()) {
    d.why = "no NIC in the topology; the route to the rendezvous";
  } else if (nearest == route.name) {
    d.why = "nearest NIC by topology, also the route to the rendezvous";
  } else {
    auto it = std::find_if(ifs.begin(), ifs.end(), [&](const NetInterface& i) {
      return i.name == nearest && i.addr.family() == route.addr.family();
    });
    if (it == ifs.end()) {
      d.why = "nearest NIC " + nearest + " has no " + (route.addr.family() == AF_INET6 ? "IPv6" : "IPv4") +
              " address; the route to the rendezvous";
    } else {
      d.preferred = *it;
      d.has_fallback = true;
      d.fallback = route;
      d.why = "nearest NIC by topology; " + route.name + " (route to the rendezvous) as fallback";
    }
  }
  return d;
}

}  // namespace conflux
