#!/usr/bin/env python3
"""A TCP port on 127.0.0.1 that is free now, for a test's rendezvous
(MASTER_PORT, torchrun's store).

    python3 free_port.py          prints one
    from free_port import free_port

Taken from below the kernel's ephemeral range: a port the kernel hands out
(bind to port 0) is free only until another process's connection or
listener takes it, which the tests running beside this one do, and the
rendezvous then fails with "Address already in use". Below that range only
an explicit bind lands, so two tests collide only if they draw the same
port at once.
"""
import random
import socket


def free_port():
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        first_ephemeral = int(f.read().split()[0])
    for _ in range(200):
        port = random.randint(max(1024, first_ephemeral - 12000), first_ephemeral - 1)
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port below the ephemeral range")


if __name__ == "__main__":
    print(free_port())
