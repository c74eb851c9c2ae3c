#!/bin/sh
# Open MPI's remote-launch agent for the emulated hosts of emulate_hosts.sh,
# used as `mpirun --mca plm_rsh_agent tests/netns/mpirun_agent.sh`: where
# mpirun would ssh to a host, this runs the daemon in that host's network
# namespace (and its own UTS namespace, named as cfx_run_cluster names it).
# Open MPI calls it as `agent HOST COMMAND...`, COMMAND being a line for a
# remote shell, as ssh would pass it on.
# Hosts are the addresses CFX_SUBNET.<h+1>; CFX_NS_PREFIX names the namespaces.
set -eu
host=$1
shift
h=$((${host##*.} - 1))
ns=${CFX_NS_PREFIX:?CFX_NS_PREFIX names the emulated hosts}h$h
exec ip netns exec "$ns" unshare -u sh -c "hostname emuhost$h; $*"
