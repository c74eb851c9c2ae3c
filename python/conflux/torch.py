"""PyTorch backend: ``import conflux.torch`` registers "conflux" with
torch.distributed, so ``dist.init_process_group("conflux")`` works under
torchrun (or ``conflux run``) with nothing beyond the usual RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT.

Route: torch 1.13 lets Python subclass ProcessGroup and Work (pybind11
trampolines in c10d/PyProcessGroup.hpp), so the backend is Python over the
conflux module's nonblocking calls on tensor addresses. The C++ side of
torch (DDP's Reducer, broadcast_coalesced) reaches allreduce, broadcast,
allgather, barrier and get_future through those trampolines; everything
else is called from torch.distributed's Python code.

Each operation is issued at once (conflux runs them in issue order on the
communicator's progress thread); one completion thread per process group
waits for them in that order, copies results out of staging buffers where
an op needed one, and completes the Work and its Future, so Work.wait(),
is_completed(), exception() and get_future() reflect the real state and
DDP's communication hook overlaps with backward.
"""

import atexit
import datetime
import queue
import threading
import weakref

import torch
import torch.distributed as dist

from . import _conflux
from ._errors import Error

__all__ = ["ProcessGroupConflux", "Work", "Error"]

_DTYPES = {
    torch.int8: _conflux.INT8, torch.uint8: _conflux.UINT8, torch.bool: _conflux.UINT8,
    torch.int32: _conflux.INT32, torch.int64: _conflux.INT64,
    torch.float16: _conflux.FLOAT16, torch.bfloat16: _conflux.BFLOAT16,
    torch.float32: _conflux.FLOAT32, torch.float64: _conflux.FLOAT64,
}
_OPS = {
    dist.ReduceOp.SUM: _conflux.SUM, dist.ReduceOp.PRODUCT: _conflux.PROD,
    dist.ReduceOp.MIN: _conflux.MIN, dist.ReduceOp.MAX: _conflux.MAX,
}
if hasattr(dist.ReduceOp, "AVG"):
    _OPS[dist.ReduceOp.AVG] = _conflux.AVG


def _dtype(t):
    if t.device.type != "cpu":
        raise Error(f"conflux backend supports CPU tensors only, got {t.device}", int(_conflux.Result.INVALID_ARGUMENT))
    try:
        return _DTYPES[t.dtype]
    except KeyError:
        raise Error(f"conflux has no datatype for {t.dtype}", int(_conflux.Result.INVALID_ARGUMENT)) from None


def _op(reduce_op):
    # torch hands either a ReduceOp struct or the RedOpType enum inside it.
    key = getattr(reduce_op, "op", reduce_op)
    for k, v in _OPS.items():
        if k == key or getattr(k, "op", k) == key:
            return v
    raise Error(f"conflux backend does not support reduction {reduce_op}", int(_conflux.Result.INVALID_ARGUMENT))


def _timeout_seconds(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        s = timeout.total_seconds()
    else:
        s = float(timeout) / 1000.0  # milliseconds, as C++ passes it
    return s if s > 0 else None  # 0 is c10d's kNoTimeout


class Work(dist.Work):
    """A conflux operation in flight, as torch.distributed sees it."""

    def __init__(self, requests, finish, result):
        super().__init__()
        self._requests = requests  # conflux Requests, waited in order
        self._finish = finish      # copy-out run after the requests complete
        self._result = result      # tensors returned by result() / the future
        self._done = threading.Event()
        self._exc = None
        self._future = torch.futures.Future()

    # Called on the completion thread.
    def _complete(self):
        try:
            for r in self._requests:
                r.wait()
            if self._finish is not None:
                self._finish()
        except BaseException as e:  # noqa: B902 - every failure must reach the waiter
            self._exc = e
        self._requests = None
        self._done.set()
        if self._exc is None:
            self._future.set_result(self._result)
        else:
            self._future.set_exception(self._exc)

    def wait(self, timeout=None):
        """Block until done; raise conflux.Error (or a timeout error) on failure."""
        if not self._done.wait(_timeout_seconds(timeout)):
            raise Error(f"conflux Work not complete after {timeout}", int(_conflux.Result.TIMEOUT))
        if self._exc is not None:
            raise self._exc
        return True

    def is_completed(self):
        return self._done.is_set()

    def is_success(self):
        return self._done.is_set() and self._exc is None

    def exception(self):
        return self._exc

    def result(self):
        return self._result

    def get_future(self):
        return self._future

    def synchronize(self):
        pass  # CPU only: nothing to synchronize with


_live_groups = weakref.WeakSet()


@atexit.register
def _stop_completion_threads():
    for group in list(_live_groups):
        group._shutdown()


class ProcessGroupConflux(dist.ProcessGroup):
    """A torch.distributed process group backed by a conflux communicator."""

    _UID_KEY = "conflux_unique_id"

    def __init__(self, store, rank, size, timeout):
        super().__init__(rank, size)
        # Rendezvous through the store torch gives us (already prefixed per
        # group): rank 0 creates the conflux id, the others read it.
        if rank == 0:
            uid = _conflux.get_unique_id()
            store.set(self._UID_KEY, uid)
        else:
            uid = bytes(store.get(self._UID_KEY))
        self.comm = _conflux.Comm(size, uid, rank)
        seconds = _timeout_seconds(timeout)
        if seconds:
            self.comm.set_timeout(seconds)
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._completion_loop, name="conflux-completion", daemon=True)
        self._thread.start()
        _live_groups.add(self)

    def _shutdown(self, timeout=10.0):
        """Stop the completion thread after the work already queued.

        Runs at exit: a daemon thread still inside torch when the interpreter
        finalises is killed mid C++ frame, which aborts the process."""
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout)

    def getBackendName(self):  # noqa: N802 - c10d's name
        return "conflux"

    def _get_backend_name(self):
        return "conflux"

    def _completion_loop(self):
        while True:
            work = self._queue.get()
            if work is None:
                return
            work._complete()

    def _submit(self, requests, result, finish=None):
        work = Work(requests, finish, result)
        self._queue.put(work)
        return work

    def _call(self, name, send, recv, count, dtype, op=_conflux.SUM, root=0, keep=None, **v):
        return self.comm._raw_call(name, send.data_ptr() if send is not None else 0,
                                   recv.data_ptr() if recv is not None else 0, count, dtype, op, root,
                                   keepalive=keep, **v)

    @staticmethod
    def _dense(t):
        """A contiguous tensor with t's data; copy back into t if it differs."""
        return t if t.is_contiguous() else t.contiguous()

    def _inplace(self, name, tensors, op=_conflux.SUM, root=0):
        reqs, backs = [], []
        for t in tensors:
            d = self._dense(t)
            if d is not t:
                backs.append((t, d))
            reqs.append(self._call(name, d, d, d.numel(), _dtype(d), op, root, keep=d))
        return self._submit(reqs, tensors, (lambda: [t.copy_(d) for t, d in backs]) if backs else None)

    # ---- collectives ----------------------------------------------------
    def allreduce(self, tensors, opts=None):
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        return self._inplace("allreduce", tensors, op)

    def allreduce_coalesced(self, tensors, opts=None):
        # One flat buffer, one allreduce: fewer, larger messages.
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        flat = torch.cat([t.reshape(-1) for t in tensors])
        req = self._call("allreduce", flat, flat, flat.numel(), _dtype(flat), op, keep=flat)

        def unflatten():
            at = 0
            for t in tensors:
                t.copy_(flat[at:at + t.numel()].view_as(t))
                at += t.numel()
        return self._submit([req], tensors, unflatten)

    def broadcast(self, tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        return self._inplace("broadcast", tensors, root=root)

    def reduce(self, tensors, opts=None):
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        root = opts.rootRank if opts is not None else 0
        return self._inplace("reduce", tensors, op, root)

    def allgather(self, output_tensors, input_tensors, opts=None):
        inp = self._dense(input_tensors[0])
        outs = output_tensors[0]
        staging = torch.empty(inp.numel() * self.size(), dtype=inp.dtype)
        req = self._call("allgather", inp, staging, inp.numel(), _dtype(inp), keep=(inp, staging))

        def copy_out():
            for r, o in enumerate(outs):
                o.copy_(staging[r * inp.numel():(r + 1) * inp.numel()].view_as(o))
        return self._submit([req], output_tensors, copy_out)

    def _allgather_base(self, output, input, opts=None):
        inp, out = self._dense(input), self._dense(output)
        req = self._call("allgather", inp, out, inp.numel(), _dtype(inp), keep=(inp, out))
        return self._submit([req], [output], None if out is output else (lambda: output.copy_(out)))

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        reqs, finishes = [], []
        for outs, inp in zip(output_lists, input_list):
            w = self.allgather([outs], [inp])
            reqs.append(w)
        # Each sub-Work completes in order on the completion thread.
        return self._submit([], output_lists, lambda: [w.wait() for w in reqs])

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        out = output_tensors[0]
        flat = torch.cat([t.reshape(-1) for t in input_tensors[0]])
        dense = self._dense(out)
        req = self._call("reduce_scatter", flat, dense, dense.numel(), _dtype(dense), op, keep=(flat, dense))
        return self._submit([req], output_tensors, None if dense is out else (lambda: out.copy_(dense)))

    def _reduce_scatter_base(self, output, input, opts=None):
        op = _op(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)
        inp, out = self._dense(input), self._dense(output)
        req = self._call("reduce_scatter", inp, out, out.numel(), _dtype(out), op, keep=(inp, out))
        return self._submit([req], [output], None if out is output else (lambda: output.copy_(out)))

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        inp, out = self._dense(input), self._dense(output)
        n = self.size()
        if not output_split_sizes and not input_split_sizes:
            req = self._call("alltoall", inp, out, inp.numel() // n, _dtype(inp), keep=(inp, out))
        else:
            # Split sizes count rows of dim 0; conflux counts elements.
            in_row = inp.numel() // max(inp.size(0), 1) if inp.dim() else 1
            out_row = out.numel() // max(out.size(0), 1) if out.dim() else 1
            in_rows = list(input_split_sizes) or [inp.size(0) // n] * n
            out_rows = list(output_split_sizes) or [out.size(0) // n] * n
            req = self._call("alltoallv", inp, out, 0, _dtype(inp), keep=(inp, out),
                             sendcounts=[r * in_row for r in in_rows], sdispls=_prefix([r * in_row for r in in_rows]),
                             recvcounts=[r * out_row for r in out_rows],
                             rdispls=_prefix([r * out_row for r in out_rows]))
        return self._submit([req], [output], None if out is output else (lambda: output.copy_(out)))

    def alltoall(self, output_tensors, input_tensors, opts=None):
        flat_in = torch.cat([t.reshape(-1) for t in input_tensors])
        sizes_out = [t.numel() for t in output_tensors]
        flat_out = torch.empty(sum(sizes_out), dtype=flat_in.dtype)
        sizes_in = [t.numel() for t in input_tensors]
        req = self._call("alltoallv", flat_in, flat_out, 0, _dtype(flat_in), keep=(flat_in, flat_out),
                         sendcounts=sizes_in, sdispls=_prefix(sizes_in),
                         recvcounts=sizes_out, rdispls=_prefix(sizes_out))

        def copy_out():
            at = 0
            for t in output_tensors:
                t.copy_(flat_out[at:at + t.numel()].view_as(t))
                at += t.numel()
        return self._submit([req], output_tensors, copy_out)

    def gather(self, output_tensors, input_tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        inp = self._dense(input_tensors[0])
        staging = torch.empty(inp.numel() * self.size(), dtype=inp.dtype) if self.rank() == root else None
        req = self._call("gather", inp, staging, inp.numel(), _dtype(inp), root=root, keep=(inp, staging))
        finish = None
        if self.rank() == root:
            def finish():
                for r, o in enumerate(output_tensors[0]):
                    o.copy_(staging[r * inp.numel():(r + 1) * inp.numel()].view_as(o))
        return self._submit([req], output_tensors, finish)

    def scatter(self, output_tensors, input_tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        out = output_tensors[0]
        dense = self._dense(out)
        flat = torch.cat([t.reshape(-1) for t in input_tensors[0]]) if self.rank() == root else None
        req = self._call("scatter", flat, dense, dense.numel(), _dtype(dense), root=root, keep=(flat, dense))
        return self._submit([req], output_tensors, None if dense is out else (lambda: out.copy_(dense)))

    def send(self, tensors, dst, tag=0):
        t = self._dense(tensors[0])
        return self._submit([self._call("send", t, None, t.numel(), _dtype(t), root=dst, keep=t)], tensors)

    def recv(self, tensors, src, tag=0):
        t = tensors[0]
        d = self._dense(t)
        req = self._call("recv", None, d, d.numel(), _dtype(d), root=src, keep=d)
        return self._submit([req], tensors, None if d is t else (lambda: t.copy_(d)))

    def recv_anysource(self, tensors, tag=0):
        raise Error("conflux backend does not support recv from any source", int(_conflux.Result.INVALID_USAGE))

    def barrier(self, opts=None):
        return self._submit([self.comm._raw_call("barrier", 0, 0, 0, _conflux.UINT8)], [])

    def monitored_barrier(self, opts=None, wait_all_ranks=False):
        return self.barrier(opts).wait()


def _prefix(counts):
    out, at = [], 0
    for c in counts:
        out.append(at)
        at += c
    return out


def _create(store, rank, size, timeout):
    return ProcessGroupConflux(store, rank, size, timeout)


if "CONFLUX" not in dist.Backend._plugins:
    dist.Backend.register_backend("conflux", _create)
