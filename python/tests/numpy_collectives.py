"""Every conflux collective on numpy arrays, blocking and nonblocking,
checked against numpy references computed from the same seeded inputs.
Run under a launcher: conflux run -n N python3 numpy_collectives.py"""
import array
import sys

import numpy as np

import conflux

comm = conflux.Comm.from_env()
rank, n = comm.rank, comm.size


def inputs(count, dtype, r):
    """Rank r's input: small integers, exact in every type and every op."""
    rng = np.random.default_rng(1000 + r)
    return rng.integers(1, 4, size=count).astype(dtype)


def check(got, want, what):
    if not np.array_equal(np.asarray(got), np.asarray(want)):
        sys.exit(f"rank {rank}: {what}: got {got[:8]} want {want[:8]}")


checks = 0
for dtype in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.float16):
    for count in (0, 1, 7 * n, 4099 * n):
        all_in = [inputs(count, dtype, r) for r in range(n)]
        mine = all_in[rank]
        tag = f"{np.dtype(dtype).name} x {count}"
        ops = {conflux.SUM: lambda a: np.sum(a, axis=0, dtype=dtype),
               conflux.MAX: lambda a: np.max(a, axis=0) if count else np.zeros(0, dtype),
               conflux.MIN: lambda a: np.min(a, axis=0) if count else np.zeros(0, dtype)}
        if dtype != np.uint8:  # products of 1..3 overflow uint8 at 4+ ranks only
            ops[conflux.PROD] = lambda a: np.prod(a, axis=0, dtype=dtype)
        for op, ref in ops.items():
            want = ref(np.stack(all_in)) if count else np.zeros(0, dtype)
            out = np.empty_like(mine)
            check(comm.allreduce(mine, out, op=op), want, f"allreduce {op} {tag}")
            inplace = mine.copy()
            comm.allreduce(inplace, op=op)
            check(inplace, want, f"allreduce in place {op} {tag}")
            req = comm.iallreduce(mine, np.empty_like(mine), op=op)
            check(req.wait(), want, f"iallreduce {op} {tag}")
            root = n - 1
            red = np.zeros_like(mine)
            comm.reduce(mine, red, op=op, root=root)
            if rank == root:
                check(red, want, f"reduce {op} {tag}")
            checks += 4
        stacked = np.concatenate(all_in)
        out = np.empty(count * n, dtype)
        check(comm.allgather(mine, out), stacked, f"allgather {tag}")
        check(comm.iallgather(mine, np.empty(count * n, dtype)).wait(), stacked, f"iallgather {tag}")
        # reduce_scatter: every rank contributes n blocks of count/n
        if count % n == 0:
            blk = count // n
            rs = np.empty(blk, dtype)
            comm.reduce_scatter(mine, rs)
            check(rs, np.sum(np.stack(all_in), axis=0, dtype=dtype)[rank * blk:(rank + 1) * blk], f"reduce_scatter {tag}")
            a2a = np.empty_like(mine)
            comm.alltoall(mine, a2a)
            check(a2a, np.concatenate([a[rank * blk:(rank + 1) * blk] for a in all_in]), f"alltoall {tag}")
            sc = np.empty(blk, dtype)
            comm.scatter(all_in[1 % n] if rank == 1 % n else None, sc, root=1 % n)
            check(sc, all_in[1 % n][rank * blk:(rank + 1) * blk], f"scatter {tag}")
            checks += 3
        bc = mine.copy()
        comm.broadcast(bc, root=0)
        check(bc, all_in[0], f"broadcast {tag}")
        g = np.empty(count * n, dtype) if rank == 0 else None
        comm.gather(mine, g, root=0)
        if rank == 0:
            check(g, stacked, f"gather {tag}")
        checks += 4

# alltoallv with uneven counts: rank r sends (r + j + 1) elements to rank j.
send_counts = [rank + j + 1 for j in range(n)]
recv_counts = [j + rank + 1 for j in range(n)]
send = np.concatenate([np.full(c, rank * 100 + j, np.int64) for j, c in enumerate(send_counts)])
recv = np.empty(sum(recv_counts), np.int64)
comm.alltoallv(send, send_counts, recv, recv_counts)
check(recv, np.concatenate([np.full(c, j * 100 + rank, np.int64) for j, c in enumerate(recv_counts)]), "alltoallv")
checks += 1

# send/recv ring inside a group (would deadlock without it), and the i-forms.
right, left = (rank + 1) % n, (rank - 1) % n
got = np.empty(5, np.float64)
with conflux.group():
    comm.send(np.full(5, rank, np.float64), right)
    comm.recv(got, left)
check(got, np.full(5, left, np.float64), "send/recv ring")
if rank == 0:
    comm.isend(np.arange(3, dtype=np.int32), 1).wait()
elif rank == 1:
    r = comm.irecv(np.empty(3, np.int32), 0)
    check(r.wait(), np.arange(3, dtype=np.int32), "isend/irecv")
checks += 2

# Other buffer-protocol objects: bytearray (uint8) and array.array('d').
ba = bytearray([rank + 1] * 16)
comm.allreduce(ba)
check(np.frombuffer(ba, np.uint8), np.full(16, n * (n + 1) // 2, np.uint8), "bytearray allreduce")
arr = array.array("d", [float(rank)] * 4)
comm.allreduce(arr, op=conflux.MAX)
check(np.array(arr), np.full(4, n - 1.0), "array.array allreduce")
# bfloat16 through dtype= over uint16 storage: 1.0 is 0x3F80.
bf = np.full(8, 0x3F80, np.uint16)
comm.allreduce(bf, dtype=conflux.BFLOAT16)
want_bf = np.frombuffer(np.float32(n).tobytes(), np.uint16)[1]
check(bf, np.full(8, want_bf, np.uint16), "bfloat16 allreduce")
# Multi-dimensional C-contiguous arrays are fine.
m = np.full((3, 4), rank, np.float32)
comm.allreduce(m)
check(m, np.full((3, 4), n * (n - 1) / 2, np.float32), "2-D allreduce")
checks += 4

# Nonblocking: several in flight, completed out of order; test() polls.
reqs = [comm.iallreduce(np.full(1000, i + rank, np.float64), np.empty(1000)) for i in range(4)]
while not reqs[0].test():
    pass
for i, r in reversed(list(enumerate(reqs))):
    check(r.wait(), np.full(1000, n * i + n * (n - 1) / 2), f"iallreduce #{i}")
comm.ibarrier().wait()
checks += 5

# split: even and odd ranks.
sub = comm.split(rank % 2, rank)
x = np.array([rank], np.int64)
sub.allreduce(x)
check(x, np.array([sum(r for r in range(n) if r % 2 == rank % 2)]), "split allreduce")
assert sub.size == len(range(rank % 2, n, 2)) and sub.rank == rank // 2
assert comm.split(conflux.SPLIT_NOCOLOR if rank else 0) is None or rank == 0
sub.destroy()
checks += 1

comm.barrier()
print(f"rank {rank}/{n}: {checks} checks passed")
