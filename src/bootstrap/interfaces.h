// Network interface choice with NCCL's CONFLUX_SOCKET_IFNAME grammar:
// "eth,ib" prefixes, "^docker,lo" excludes, "=eth0" exact names.
#pragma once

#include "bootstrap/socket.h"

#include <string>
#include <vector>

namespace conflux {

struct NetInterface {
  std::string name;
  SockAddr addr;  // port 0
};

std::vector<NetInterface> list_interfaces();  // up, with an IPv4/IPv6 address
bool ifname_matches(const std::string& spec, const std::string& name);
bool is_loopback(const SockAddr& a);
std::string describe_interfaces(const std::vector<NetInterface>& ifs);

// The interface to listen on: the spec's first match when spec is set (an
// error listing what exists when nothing matches); else the one whose
// address routes to `toward` (the rendezvous); else the first non-loopback.
Result<NetInterface> choose_interface(const std::string& spec, const SockAddr* toward);

// Where peers reach this rank for data (TCP links): the topology's nearest
// NIC when it is a usable IP interface other than `route` (the one that
// reaches the rendezvous), with `route` kept as the fallback address for
// peers that cannot reach the NIC; else `route` alone. The user's
// CONFLUX_SOCKET_IFNAME (spec) always wins, and a loopback rendezvous means a
// single-host job that stays on loopback. `why` explains the choice for logs.
struct DataInterfaces {
  NetInterface preferred;
  bool has_fallback = false;
  NetInterface fallback;
  std::string why;
};
DataInterfaces choose_data_interfaces(const std::string& spec, const NetInterface& route, const std::string& nearest,
                                      const std::vector<NetInterface>& ifs);

}  // namespace conflux
