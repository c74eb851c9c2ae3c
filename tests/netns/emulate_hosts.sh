#!/usr/bin/env bash
# Emulated multi-host cluster on one machine: H network namespaces ("hosts"),
# each joined by a veth pair to a bridge in a "switch" namespace, addresses
# 10.77.0.<h+1>/24; every rank runs in its host's namespace under its own UTS
# namespace (distinct hostname), so conflux sees H hosts with R ranks each:
# shared memory inside a host, TCP between hosts. Traffic only ever goes to
# addresses inside these namespaces.
#
# Source it, then:   cfx_hosts_up H [rate]      (rate e.g. 1gbit: cfx_shape H rate)
#                    cfx_shape H RATE [tbf|htb] (every host link carries at most RATE each way)
#                    cfx_add_network H SUBNET IF (a second network: interface IF on every
#                                                host, SUBNET.<h+1>/24, its own bridge)
#                    cfx_flow_cap H RATE        (caps every TCP flow leaving each host at RATE,
#                                                as clouds cap one flow: AWS 5 Gbit/s outside a
#                                                placement group; the host link stays uncapped)
#                    cfx_run_cluster H R cmd...  (runs R ranks per host; RANK etc. set; exit status)
#                    cfx_hosts_down
# Requires root (ip netns, veth, tc).

CFX_NS_PREFIX=${CFX_NS_PREFIX:-cfxh$$}
CFX_SUBNET=${CFX_SUBNET:-10.77.0}

cfx_hosts_down() {
  local ns
  for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep "^${CFX_NS_PREFIX}" || true); do
    ip netns del "$ns" 2>/dev/null || true
  done
}

cfx_hosts_up() {
  local hosts=$1 rate=${2:-}
  local sw=${CFX_NS_PREFIX}sw
  ip netns add "$sw"
  ip -n "$sw" link add br0 type bridge
  ip -n "$sw" link set br0 up
  ip -n "$sw" link set lo up
  local h ns
  for ((h = 0; h < hosts; h++)); do
    ns=${CFX_NS_PREFIX}h$h
    ip netns add "$ns"
    ip -n "$ns" link set lo up
    ip link add "cfxv${$}h${h}" type veth peer name "cfxp${$}h${h}"
    ip link set "cfxv${$}h${h}" netns "$ns"
    ip link set "cfxp${$}h${h}" netns "$sw"
    ip -n "$ns" link set "cfxv${$}h${h}" name eth0
    ip -n "$ns" addr add "${CFX_SUBNET}.$((h + 1))/24" dev eth0
    ip -n "$ns" link set eth0 up
    # The switch port is named after its host, so later calls (cfx_shape)
    # find it without knowing the shell that made it.
    ip -n "$sw" link set "cfxp${$}h${h}" name "port$h"
    ip -n "$sw" link set "port$h" master br0
    ip -n "$sw" link set "port$h" up
  done
  [ -z "$rate" ] || cfx_shape "$hosts" "$rate"
}

# A link of RATE in each direction: the host's eth0 shapes what it sends
# (its uplink) and its switch port what it receives (the downlink), so many
# senders into one host queue at the switch as they would on a real one.
# netem is not in this kernel; tbf and htb are. Both are set up so that they
# delay rather than drop what one TCP stream sends (a queue of 50 ms at the
# rate); bench/line_rate measures the single-stream rate each one gives.
cfx_shape() {
  local hosts=$1 rate=$2 shaper=${3:-${CFX_SHAPER:-tbf}} h
  for ((h = 0; h < hosts; h++)); do
    _cfx_shape_dev "${CFX_NS_PREFIX}h$h" eth0 "$rate" "$shaper"
    _cfx_shape_dev "${CFX_NS_PREFIX}sw" "port$h" "$rate" "$shaper"
  done
}

_cfx_shape_dev() {
  local ns=$1 dev=$2 rate=$3 shaper=$4
  tc -n "$ns" qdisc del dev "$dev" root 2>/dev/null || true
  case $shaper in
    tbf) tc -n "$ns" qdisc add dev "$dev" root tbf rate "$rate" burst 256kb latency 50ms ;;
    htb)
      tc -n "$ns" qdisc add dev "$dev" root handle 1: htb default 1
      tc -n "$ns" class add dev "$dev" parent 1: classid 1:1 htb rate "$rate" ceil "$rate" burst 256kb cburst 256kb quantum 60000
      tc -n "$ns" qdisc add dev "$dev" parent 1:1 handle 10: bfifo limit "$(_cfx_queue_bytes "$rate")"
      ;;
    *) echo "cfx_shape: unknown shaper $shaper (tbf or htb)" >&2; return 2 ;;
  esac
}

# 50 ms at RATE (e.g. 1gbit, 500mbit), in bytes.
_cfx_queue_bytes() {
  local r=$1 n unit
  n=${r%%[a-zA-Z]*}
  unit=${r#"$n"}
  case $unit in
    gbit) echo $((n * 1000000000 / 8 / 20)) ;;
    mbit) echo $((n * 1000000 / 8 / 20)) ;;
    kbit) echo $((n * 1000 / 8 / 20)) ;;
    *) echo "cfx_shape: rate $r: use kbit, mbit or gbit" >&2; return 2 ;;
  esac
}

# Per-flow caps without fq's maxrate (not in this kernel): an htb class per
# (source port mod 64, destination port mod 64), chosen by two levels of
# u32 hash tables on the TCP ports; non-TCP traffic goes uncapped. Each
# host's ephemeral ports (listeners bound to port 0 and outgoing
# connections) are confined to 40000-40063, so a port's low six bits name
# it and no two flows between two hosts share a class; tcp_tw_reuse lets
# new connections reuse ports that earlier launches left in TIME_WAIT.
# Fixed ports (the rendezvous) fall outside and may share.
cfx_flow_cap() {
  local hosts=$1 rate=$2 h i j b ns batch
  batch=$(mktemp)
  for ((h = 0; h < hosts; h++)); do
    ns=${CFX_NS_PREFIX}h$h
    ip netns exec "$ns" sysctl -qw net.ipv4.ip_local_port_range="40000 40063" net.ipv4.tcp_tw_reuse=1
    {
      echo "qdisc add dev eth0 root handle 1: htb default 1"
      echo "class add dev eth0 parent 1: classid 1:1 htb rate 100gbit quantum 60000"
      for ((i = 0; i < 64; i++)); do
        echo "filter add dev eth0 parent 1: prio 1 handle $((i + 2)): protocol ip u32 divisor 64"
        for ((j = 0; j < 64; j++)); do
          b=$(printf '%x' $((0x1000 + i * 64 + j)))
          echo "class add dev eth0 parent 1: classid 1:$b htb rate $rate ceil $rate burst 64k quantum 60000"
          echo "filter add dev eth0 parent 1: prio 1 protocol ip u32 ht $((i + 2)):$(printf '%x' "$j"): match ip protocol 6 0xff flowid 1:$b"
        done
      done
      # Table 1's bucket i (source port bits i) hashes the destination
      # port's low six bits (bytes 22-23 of the packet) into table i + 2...
      echo "filter add dev eth0 parent 1: prio 1 handle 1: protocol ip u32 divisor 64"
      for ((i = 0; i < 64; i++)); do
        echo "filter add dev eth0 parent 1: prio 1 protocol ip u32 ht 1:$(printf '%x' "$i"): match ip protocol 6 0xff hashkey mask 0x0000003f at 20 link $((i + 2)):"
      done
      # ...and the root table hashes the source port's low six bits (bytes 20-21) into table 1.
      echo "filter add dev eth0 parent 1: prio 1 protocol ip u32 ht 800:: match ip protocol 6 0xff hashkey mask 0x003f0000 at 20 link 1:"
    } >"$batch"
    tc -n "$ns" -batch "$batch"
  done
  rm -f "$batch"
}

cfx_add_network() {
  local hosts=$1 subnet=$2 ifname=$3 h ns
  local sw=${CFX_NS_PREFIX}sw br=br_$ifname
  ip -n "$sw" link add "$br" type bridge
  ip -n "$sw" link set "$br" up
  for ((h = 0; h < hosts; h++)); do
    ns=${CFX_NS_PREFIX}h$h
    ip link add "cfxw${$}h${h}" type veth peer name "cfxq${$}h${h}"
    ip link set "cfxw${$}h${h}" netns "$ns"
    ip link set "cfxq${$}h${h}" netns "$sw"
    ip -n "$ns" link set "cfxw${$}h${h}" name "$ifname"
    ip -n "$ns" addr add "${subnet}.$((h + 1))/24" dev "$ifname"
    ip -n "$ns" link set "$ifname" up
    ip -n "$sw" link set "cfxq${$}h${h}" master "$br"
    ip -n "$sw" link set "cfxq${$}h${h}" up
  done
}

# cfx_run_cluster HOSTS RANKS_PER_HOST cmd args...
# CFX_IFNAME sets CONFLUX_SOCKET_IFNAME (default "=eth0"; empty: the library's default).
# Global rank = host * RANKS_PER_HOST + local rank; rendezvous on host 0.
cfx_run_cluster() {
  local hosts=$1 per=$2
  shift 2
  local port=$((20000 + RANDOM % 20000))
  local world=$((hosts * per)) pids=() h l rank ns status=0
  for ((h = 0; h < hosts; h++)); do
    ns=${CFX_NS_PREFIX}h$h
    for ((l = 0; l < per; l++)); do
      rank=$((h * per + l))
      ip netns exec "$ns" unshare -u env RANK=$rank WORLD_SIZE=$world LOCAL_RANK=$l LOCAL_WORLD_SIZE=$per \
        CONFLUX_ROOT="${CFX_SUBNET}.1:$port" CONFLUX_JOB_ID="cfx-netns-$port" \
        CONFLUX_SOCKET_IFNAME="${CFX_IFNAME-=eth0}" \
        sh -c 'hostname "emuhost$1"; shift; exec "$@"' _ "$h" "$@" &
      pids+=($!)
    done
  done
  for pid in "${pids[@]}"; do
    wait "$pid" || status=$?
  done
  return $status
}
