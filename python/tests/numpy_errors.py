"""Misuse raises conflux.Error with a result code and the library's (or the
binding's) message, and the communicator stays usable afterwards.
Run under a launcher: conflux run -n N python3 numpy_errors.py"""
import sys

import numpy as np

import conflux

comm = conflux.Comm.from_env()
rank, n = comm.rank, comm.size
R = conflux.Result
checks = 0


def expect(code, words, fn, *args, **kwargs):
    global checks
    try:
        fn(*args, **kwargs)
    except conflux.Error as e:
        if e.code != int(code) or not all(w in e.message for w in words):
            sys.exit(f"rank {rank}: {fn.__name__}: got [{e.code_name}] {e.message!r}, want {code.name} with {words}")
        assert str(e).startswith(f"[{code.name}]"), str(e)
        checks += 1
        return
    sys.exit(f"rank {rank}: {fn.__name__}{args} did not raise")


f32 = np.zeros(8 * n, np.float32)
expect(R.INVALID_ARGUMENT, ["dtype mismatch", "float32", "int64"], comm.allreduce, f32, np.zeros(8 * n, np.int64))
expect(R.INVALID_ARGUMENT, ["C-contiguous"], comm.allreduce, np.zeros(16, np.float32)[::2])
expect(R.INVALID_ARGUMENT, ["recvbuf", "expected"], comm.allgather, f32, np.zeros(8, np.float32))
expect(R.INVALID_ARGUMENT, ["format"], comm.allreduce, np.zeros(4, np.int16))
ro = np.zeros(4, np.float32)
ro.flags.writeable = False
expect(R.INVALID_ARGUMENT, ["writable"], comm.allreduce, ro)
expect(R.INVALID_ARGUMENT, ["buffer protocol"], comm.allreduce, [1.0, 2.0])
expect(R.INVALID_ARGUMENT, ["multiple"], comm.alltoall, np.zeros(n + 1, np.float32), np.zeros(n + 1, np.float32))
expect(R.INVALID_ARGUMENT, ["2-byte", "float32"], comm.allreduce, np.zeros(4, np.uint16), dtype=conflux.FLOAT32)
# Checked by the library itself: its cfxGetLastError text comes through.
expect(R.INVALID_ARGUMENT, ["root", "out of range"], comm.broadcast, f32, root=n)
expect(R.INVALID_ARGUMENT, ["peer", "out of range"], comm.send, f32, n + 3)
expect(R.INVALID_ARGUMENT, ["root", "out of range"], comm.ireduce, f32, root=-1)
expect(R.INVALID_ARGUMENT, ["unique id", "128"], conflux.Comm, 2, b"short", 0)

# The communicator still works after all of that.
x = np.full(4, rank + 1.0)
comm.allreduce(x)
assert np.array_equal(x, np.full(4, n * (n + 1) / 2)), x

# A deadline: rank 0 waits for a message nobody sends, on a sub-communicator
# so the world one stays clean, and gets TIMEOUT naming the call.
sub = comm.split(0, rank)
if rank == 0:
    sub.set_timeout(0.5)
    expect(R.TIMEOUT, [], sub.recv, np.zeros(4), 1)
comm.barrier()
sub.abort()

comm.barrier()
print(f"rank {rank}/{n}: {checks} error checks passed")
