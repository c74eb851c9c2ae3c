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
std::string describe_interfaces(const std::vector<NetInterface>& ifs);

// The interface to listen on: the spec's first match when spec is set (an
// error listing what exists when nothing matches); else the one whose
// address routes to `toward` (the rendezvous); else the first non-loopback.
Result<NetInterface> choose_interface(const std::string& spec, const SockAddr* toward);

}  // namespace conflux
