"""PyTorch backend: ``import conflux.torch`` registers "conflux" with
torch.distributed, so ``dist.init_process_group("conflux")`` works under
torchrun (or ``conflux run``) with nothing beyond the usual RANK,
WORLD_SIZE, MASTER_ADDR and MASTER_PORT. Installed as a package, conflux
also publishes entry points that torch 2.5+ loads at ``import torch``
(group "torch.backends"), so the import is not even needed there.

Route: torch lets Python subclass ProcessGroup and Work (pybind11
trampolines in c10d/PyProcessGroup.hpp), so the backend is Python over the
conflux module's nonblocking calls on tensor addresses. The same class
serves torch 1.13 and torch 2.x: it defines the method names of both
(_allgather_base and allgather_into_tensor_coalesced, _start_coalescing /
_end_coalescing, ...), and features are detected by inspecting torch, never
by parsing its version. C++ parts of torch (DDP's Reducer) reach the
methods PyProcessGroup.hpp forwards; torch.distributed's Python code reaches
the rest.

Collectives are issued at once on the group's main communicator (conflux
runs them in issue order on its progress thread); one completion thread
per group waits for them in that order, copies results out of staging
buffers where an op needed one, and completes the Work and its Future.

Point-to-point traffic has semantics a single ordered communicator cannot
give: torch (like MPI and gloo) lets sends and receives between a pair
complete in any interleaving, match by tag, and receive from any source.
So each group also has, per peer and direction, a two-rank communicator
that carries only this rank's sends to that peer (or only that peer's
sends to this rank). Every message is a header (tag, byte count) and the
payload. A receiver thread per incoming peer always has the next header
receive posted; it matches each arriving message with the oldest posted
recv of that source (or of any source) and tag, and receives the payload
straight into its tensor, or, when none is posted yet, into a buffer that
a later recv takes it from. Sends therefore never wait for the receiver's
program order, a recv from any source learns its sender from the header,
and p2p never blocks a collective. These communicators are created in the
background when the group is created, so the group's creation does not wait
for them; the first p2p call does.
"""

import collections
import datetime
import inspect
import itertools
import queue
import threading
import time
import weakref

import torch
import torch.distributed as dist

from . import _conflux
from ._errors import Error

__all__ = ["ProcessGroupConflux", "Work", "Error", "register"]

_INVALID_ARGUMENT = int(_conflux.Result.INVALID_ARGUMENT)
_INVALID_USAGE = int(_conflux.Result.INVALID_USAGE)
_TIMEOUT = int(_conflux.Result.TIMEOUT)
_ABORTED = int(_conflux.Result.ABORTED)
_REMOTE = int(_conflux.Result.REMOTE_ERROR)

# Element types conflux reduces. Other types travel as bytes in the ops that
# do not reduce (broadcast, gathers, all-to-all, send/recv).
_DTYPES = {
    torch.int8: _conflux.INT8, torch.uint8: _conflux.UINT8, torch.bool: _conflux.UINT8,
    torch.int32: _conflux.INT32, torch.int64: _conflux.INT64,
    torch.float16: _conflux.FLOAT16, torch.bfloat16: _conflux.BFLOAT16,
    torch.float32: _conflux.FLOAT32, torch.float64: _conflux.FLOAT64,
}
_COMPLEX = {torch.complex64: torch.float32, torch.complex128: torch.float64}

_RED = dist.ReduceOp.RedOpType if hasattr(dist.ReduceOp, "RedOpType") else dist.ReduceOp
_OPS = {"SUM": _conflux.SUM, "PRODUCT": _conflux.PROD, "MIN": _conflux.MIN, "MAX": _conflux.MAX,
        "AVG": _conflux.AVG}
# A bool tensor reduced with SUM or PRODUCT would leave bytes other than 0
# and 1; logical or / and (as MAX / MIN on bytes) keep it a valid bool.
_BOOL_OPS = {_conflux.SUM: _conflux.MAX, _conflux.PROD: _conflux.MIN}


def _torch_version():
    return getattr(torch, "__version__", "(unknown)")


def _invalid(msg):
    return Error(f"conflux backend: {msg}", _INVALID_ARGUMENT)


def _check_cpu(t):
    if t.device.type != "cpu":
        raise _invalid(f"CPU tensors only, got a tensor on {t.device}")
    if t.layout != torch.strided:
        raise _invalid(f"dense tensors only, got a {t.layout} tensor")


def _red_name(reduce_op):
    """The name of a ReduceOp (struct or RedOpType), e.g. 'SUM'."""
    key = getattr(reduce_op, "op", reduce_op)
    name = getattr(key, "name", None)
    if name is None:
        name = str(key).rsplit(".", 1)[-1]
    return name


def _premul_factor(reduce_op):
    """PREMUL_SUM's factor as a float, from the ReduceOp's supplement."""
    state = None
    getstate = getattr(reduce_op, "__getstate__", None)
    if getstate is not None:
        try:
            state = getstate()
        except (TypeError, RuntimeError):
            state = None
    if not isinstance(state, tuple) or len(state) != 2 or state[1] is None:
        raise _invalid(f"PREMUL_SUM: torch {_torch_version()} does not expose the factor of a PREMUL_SUM "
                       "ReduceOp to Python backends (ReduceOp.__getstate__), so conflux cannot apply it")
    factor = state[1]
    if isinstance(factor, (list, tuple)):
        factor = factor[0]
    if isinstance(factor, torch.Tensor):
        factor = factor.item()
    return float(factor)


def _reduction(reduce_op):
    """(conflux op, factor or None) for a torch ReduceOp; PREMUL_SUM is a SUM
    of inputs first multiplied by its factor."""
    name = _red_name(reduce_op)
    if name == "PREMUL_SUM":
        return _conflux.SUM, _premul_factor(reduce_op)
    try:
        return _OPS[name], None
    except KeyError:
        raise _invalid(f"conflux does not support reduction {name} "
                       f"(it supports {', '.join(sorted(_OPS))} and PREMUL_SUM)") from None


def _opts_reduction(opts):
    return _reduction(opts.reduceOp if opts is not None else dist.ReduceOp.SUM)


def _reduce_view(t, op, what):
    """The tensor conflux reduces for t (complex as real pairs), its conflux
    type and the op adjusted for bools. t must be contiguous."""
    _check_cpu(t)
    if t.dtype in _COMPLEX:
        if op not in (_conflux.SUM, _conflux.AVG):
            raise _invalid(f"{what}: a {t.dtype} tensor can be reduced with SUM or AVG only")
        return torch.view_as_real(t), _DTYPES[_COMPLEX[t.dtype]], op
    try:
        dtype = _DTYPES[t.dtype]
    except KeyError:
        raise _invalid(f"{what}: conflux has no reduction for {t.dtype} (it reduces "
                       "int8, uint8, bool, int32, int64, float16, bfloat16, float32, float64, "
                       "complex64 and complex128)") from None
    if t.dtype == torch.bool:
        op = _BOOL_OPS.get(op, op)
    return t, dtype, op


def _wire(t):
    """(conflux type, element count) moving a contiguous t unchanged: its own
    type when conflux has it, otherwise its bytes."""
    _check_cpu(t)
    if t.dtype in _DTYPES and t.dtype != torch.bool:
        return _DTYPES[t.dtype], t.numel()
    return _conflux.UINT8, t.numel() * t.element_size()


def _timeout_seconds(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, datetime.timedelta):
        s = timeout.total_seconds()
    else:
        s = float(timeout) / 1000.0  # milliseconds, as C++ passes it
    return s if s > 0 else None  # 0 is c10d's kNoTimeout


def _dense(t):
    """t if contiguous, else a contiguous copy (the caller copies back)."""
    return t if t.is_contiguous() else t.contiguous()


def _flat_bytes(t):
    """A contiguous tensor's storage as a flat uint8 tensor (same memory)."""
    return t.reshape(-1).view(torch.uint8) if t.numel() else torch.empty(0, dtype=torch.uint8)


def _prefix(counts):
    out, at = [], 0
    for c in counts:
        out.append(at)
        at += c
    return out


# ---- Work --------------------------------------------------------------------

# torch's C++ callers (broadcast_coalesced in DDP's constructor, for one)
# hold a Work by its C++ half and may call wait() after it completed. The
# Python half, where wait() is implemented, must still exist then: once it
# is collected, pybind11 finds no override and C++ runs the base class's
# wait(), which never returns. Until completion a group references its
# Works; afterwards the most recent completed ones stay referenced here.
# (torch 2.x pins the Python half for the functional collectives itself.)
_RECENTLY_COMPLETED = collections.deque(maxlen=4096)

class Work(dist.Work):
    """A conflux operation in flight, as torch.distributed sees it.

    Until it completes, a Work is referenced by its group (the completion
    queue, the pending receives), so dropping the caller's handle does not
    cancel it; after it completes, _RECENTLY_COMPLETED keeps it for torch's
    C++ callers that wait late."""

    def __init__(self, requests=(), finish=None, result=None, what="operation", deadline=None, timeout_s=None):
        super().__init__()
        self._timeout_s = timeout_s      # the group's timeout, named in a timeout error
        self._requests = list(requests)  # conflux Requests, waited in order
        self._finish = finish            # copy-out run after the requests complete
        self._result = result if result is not None else []
        self._what = what
        self._deadline = deadline        # monotonic time after which wait() gives up (p2p receives)
        self._on_timeout = None          # withdraws a p2p receive that timed out; False if already matched
        self._done = threading.Event()
        self._exc = None
        self._source = -1
        self._callbacks = []
        self._lock = threading.Lock()
        # The Future torch sees is a continuation of a private one, so that a
        # failure completes it with a C++ error. (torch.futures.Future's
        # set_exception instead stores the exception as the result, to be
        # raised by a Python wait(); DDP's C++ Reducer would take that
        # object for its gradients, and crashes.)
        self._promise = torch.futures.Future()
        self._future = self._promise.then(self._settle)

    # Completion: exactly once, from whichever thread finishes the op.
    def _complete(self):
        """Wait for the requests, run the copy-out and complete (completion thread)."""
        exc = None
        try:
            for r in self._requests:
                r.wait()
            if self._finish is not None:
                self._finish()
        except Error as e:
            exc = e
            if e.code == _TIMEOUT and self._timeout_s:
                exc = Error(f"conflux backend: {self._what} timeout after {self._timeout_s:g} s: {e.message}",
                            e.code)
        except BaseException as e:  # noqa: B902 - every failure must reach the waiter
            exc = e
        self._set_done(exc)

    def _set_done(self, exc=None, source=None):
        with self._lock:
            if self._done.is_set():
                return False
            self._exc = exc
            if source is not None:
                self._source = source
            self._requests = None
            self._finish = None
            callbacks, self._callbacks = self._callbacks, []
            self._done.set()
        _RECENTLY_COMPLETED.append(self)
        self._promise.set_result(None)
        for cb in callbacks:
            cb(self)
        return True

    def _add_done_callback(self, cb):
        with self._lock:
            if not self._done.is_set():
                self._callbacks.append(cb)
                return
        cb(self)

    def _settle(self, _):
        if self._exc is not None:
            raise self._exc
        return self._result

    def wait(self, timeout=None):
        """Block until done; raise conflux.Error on failure or timeout."""
        seconds = _timeout_seconds(timeout)
        if self._deadline is not None:
            left = max(0.0, self._deadline - time.monotonic())
            seconds = left if seconds is None else min(seconds, left)
        if not self._done.wait(seconds):
            if self._on_timeout is None:
                raise Error(f"conflux: {self._what} not complete after {seconds:.3f} s", _TIMEOUT)
            # A receive that timed out is withdrawn, so no later message can
            # land in it; one whose message is already arriving is finished.
            if not self._on_timeout(seconds):
                self._done.wait()
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

    def _source_rank(self):
        """The sender of a completed recv (from any source): its rank in the group."""
        if not self._done.is_set():
            raise Error("conflux: source rank asked for before the recv completed", _INVALID_USAGE)
        return self._source

    source_rank = _source_rank


def _completed_work(result=None, what="operation"):
    w = Work(result=result, what=what)
    w._set_done()
    return w


def _all_of(works, result, what):
    """A Work that completes when every one of works has, failing with the
    first failure among them."""
    agg = Work(result=result, what=what)
    works = list(works)
    if not works:
        agg._set_done()
        return agg
    left = [len(works)]
    lock = threading.Lock()

    def one_done(_):
        with lock:
            left[0] -= 1
            last = left[0] == 0
        if last:
            agg._set_done(next((w._exc for w in works if w._exc is not None), None))
    for w in works:
        w._add_done_callback(one_done)
    return agg


class _Lane:
    """A thread that completes Works in the order they were queued."""

    def __init__(self, name):
        self._queue = queue.SimpleQueue()
        self._thread = threading.Thread(target=_Lane._loop, args=(self._queue,), name=name, daemon=True)
        self._thread.start()

    @staticmethod
    def _loop(q):
        while True:
            work = q.get()
            if work is None:
                return
            work._complete()

    def put(self, work):
        self._queue.put(work)

    def stop(self, timeout):
        if self._thread.is_alive():
            self._queue.put(None)
            self._thread.join(timeout)


# ---- point-to-point ------------------------------------------------------------

_ANY = -1
_HEADER_WORDS = 2  # tag, payload bytes
_CLOSE = -1        # payload bytes of the last message on a link: the sender shuts down


class _PendingRecv:
    __slots__ = ("src", "tag", "dense", "tensor", "work")

    def __init__(self, src, tag, dense, tensor, work):
        self.src, self.tag, self.dense, self.tensor, self.work = src, tag, dense, tensor, work


class _P2P:
    """Tagged, any-source point-to-point traffic over per-direction two-rank
    communicators (see the module docstring)."""

    def __init__(self, store, rank, size, timeout_s):
        self._rank, self._size = rank, size
        self._timeout_s = timeout_s
        self._lock = threading.Lock()
        self._pending = []          # _PendingRecv, in posting order
        self._unexpected = []       # (arrival, src, tag, bytes tensor), in arrival order
        self._arrivals = itertools.count()
        self._broken = {}           # peer -> Error once its incoming link failed
        self._closed = None         # Error once the group was shut down or aborted
        self._out = {}              # peer -> Comm carrying this rank's sends to it
        self._in = {}               # peer -> Comm carrying its sends to this rank
        self._send_lanes = {}
        self._receivers = []
        self._ready = threading.Event()
        self._init_error = None
        peers = [p for p in range(size) if p != rank]
        # Ids of this rank's outgoing directions, published before anyone waits.
        self._uids = {}
        for p in peers:
            uid = _conflux.get_unique_id()
            store.set(f"conflux_p2p_{rank}_{p}", uid)
            self._uids[p] = uid
        self._init_thread = None
        if peers:
            self._init_thread = threading.Thread(target=self._connect, args=(store, peers),
                                                 name="conflux-p2p-init", daemon=True)
            self._init_thread.start()
        else:
            self._ready.set()

    # -- setup
    def _connect(self, store, peers):
        errors = []

        def join(peer, out):
            try:
                uid = self._uids[peer] if out else bytes(store.get(f"conflux_p2p_{peer}_{self._rank}"))
                comm = _conflux.Comm(2, uid, 0 if out else 1)
                if out and self._timeout_s:
                    comm.set_timeout(self._timeout_s)
                (self._out if out else self._in)[peer] = comm
            except BaseException as e:  # noqa: B902
                errors.append(e)
        threads = []
        for p in peers:
            threads.append(threading.Thread(target=join, args=(p, True), daemon=True))
            threads.append(threading.Thread(target=join, args=(p, False), daemon=True))
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            self._init_error = Error(f"conflux backend: setting up point-to-point links failed: {errors[0]}",
                                     getattr(errors[0], "code", _REMOTE))
        else:
            for p in peers:
                t = threading.Thread(target=self._receive_loop, args=(p, self._in[p]),
                                     name=f"conflux-recv-{p}", daemon=True)
                t.start()
                self._receivers.append(t)
        self._ready.set()

    def _wait_ready(self):
        if not self._ready.is_set():
            self._ready.wait()
        if self._closed is not None:
            raise self._closed
        if self._init_error is not None:
            raise self._init_error

    # -- sending
    def send(self, tensor, dst, tag):
        _check_cpu(tensor)
        if dst == self._rank:
            return self._deliver_local(tensor, tag)
        self._check_peer(dst, "send to")
        self._wait_ready()
        dense = _dense(tensor)
        payload = _flat_bytes(dense)
        header = torch.tensor([int(tag), payload.numel()], dtype=torch.int64)
        comm = self._out[dst]
        reqs = [comm._raw_call("send", header.data_ptr(), 0, _HEADER_WORDS, _conflux.INT64, root=1, keepalive=header)]
        if payload.numel():
            reqs.append(comm._raw_call("send", payload.data_ptr(), 0, payload.numel(), _conflux.UINT8, root=1,
                                       keepalive=payload))
        lane = self._send_lanes.get(dst)
        if lane is None:
            lane = self._send_lanes[dst] = _Lane(f"conflux-send-{dst}")
        work = Work(reqs, None, [tensor], what=f"send to rank {dst} (tag {tag})")
        lane.put(work)
        return work

    def _deliver_local(self, tensor, tag):
        data = _flat_bytes(_dense(tensor)).clone()
        with self._lock:
            match = self._take_pending(self._rank, tag)
            if match is None:
                self._unexpected.append((next(self._arrivals), self._rank, tag, data))
        if match is not None:
            self._fill(match, data, self._rank)
        return _completed_work([tensor], what=f"send to self (tag {tag})")

    # -- receiving
    def recv(self, tensor, src, tag):
        _check_cpu(tensor)
        if src != _ANY and src != self._rank:
            self._check_peer(src, "recv from")
        if src != self._rank and self._size > 1:
            self._wait_ready()
        dense = _dense(tensor)
        who = "any rank" if src == _ANY else f"rank {src}"
        deadline = time.monotonic() + self._timeout_s if self._timeout_s else None
        work = Work(result=[tensor], what=f"recv from {who} (tag {tag})", deadline=deadline)
        pending = _PendingRecv(src, tag, dense, tensor, work)
        with self._lock:
            if self._closed is not None:
                raise self._closed
            hit = self._take_unexpected(src, tag)
            if hit is None:
                if src != _ANY and src in self._broken:
                    raise self._broken[src]
                self._pending.append(pending)
        if hit is not None:
            self._fill(pending, hit[3], hit[1])
            return work

        def withdraw(seconds):
            with self._lock:
                try:
                    self._pending.remove(pending)
                except ValueError:
                    return False  # a receiver thread has claimed it; its result will come
            work._set_done(Error(f"conflux: {work._what} timed out after {seconds:g} s: "
                                 "no matching send arrived", _TIMEOUT))
            return True
        work._on_timeout = withdraw
        return work

    def _matches(self, want_src, want_tag, src, tag):
        return (want_src == _ANY or want_src == src) and want_tag == tag

    def _take_pending(self, src, tag):
        for i, p in enumerate(self._pending):
            if self._matches(p.src, p.tag, src, tag):
                return self._pending.pop(i)
        return None

    def _take_unexpected(self, src, tag):
        for i, u in enumerate(self._unexpected):
            if self._matches(src, tag, u[1], u[2]):
                return self._unexpected.pop(i)
        return None

    def _fill(self, pending, data, src):
        """Complete a recv from a buffered message."""
        dst = _flat_bytes(pending.dense)
        if dst.numel() != data.numel():
            pending.work._set_done(self._size_error(pending, src, data.numel()))
            return
        dst.copy_(data)
        if pending.dense is not pending.tensor:
            pending.tensor.copy_(pending.dense)
        pending.work._set_done(source=src)

    def _size_error(self, pending, src, nbytes):
        want = pending.dense.numel() * pending.dense.element_size()
        return _invalid(f"recv from rank {src} (tag {pending.tag}): the tensor has {want} bytes, "
                        f"the matching send carried {nbytes}")

    def _receive_loop(self, peer, comm):
        """Drain peer's messages to this rank: match each with a posted recv,
        or buffer it for a later one."""
        header = torch.empty(_HEADER_WORDS, dtype=torch.int64)
        while True:
            try:
                comm._raw_call("recv", 0, header.data_ptr(), _HEADER_WORDS, _conflux.INT64, root=0).wait()
                tag, nbytes = (int(v) for v in header.tolist())
                if nbytes == _CLOSE:
                    self._peer_failed(peer, Error(f"conflux backend: rank {peer} shut its process group down",
                                                  _REMOTE))
                    return
                with self._lock:
                    match = self._take_pending(peer, tag)
                if match is not None and _flat_bytes(match.dense).numel() == nbytes:
                    if nbytes:
                        dst = _flat_bytes(match.dense)
                        comm._raw_call("recv", 0, dst.data_ptr(), nbytes, _conflux.UINT8, root=0).wait()
                    if match.dense is not match.tensor:
                        match.tensor.copy_(match.dense)
                    match.work._set_done(source=peer)
                    continue
                data = torch.empty(nbytes, dtype=torch.uint8)
                if nbytes:
                    comm._raw_call("recv", 0, data.data_ptr(), nbytes, _conflux.UINT8, root=0).wait()
                if match is not None:  # the sizes differ: fail that recv, keep the stream in step
                    match.work._set_done(self._size_error(match, peer, nbytes))
                    continue
                with self._lock:  # a recv may have been posted meanwhile
                    match = self._take_pending(peer, tag)
                    if match is None:
                        self._unexpected.append((next(self._arrivals), peer, tag, data))
                if match is not None:
                    self._fill(match, data, peer)
            except Error as e:
                self._peer_failed(peer, e)
                return
            except BaseException as e:  # noqa: B902 - report, never die silently
                self._peer_failed(peer, Error(f"conflux backend: receiving from rank {peer} failed: {e!r}",
                                              _REMOTE))
                return

    def _peer_failed(self, peer, err):
        if self._closed is not None:
            err = self._closed
        elif err.code != _ABORTED and err.code != _REMOTE:
            # The library numbers the link's two ends: the sender is rank 0 there.
            err = Error(f"conflux backend: the link from rank {peer} failed ({err.message}; on that link "
                        f"rank {peer} is rank 0 and this rank is rank 1)", err.code)
        with self._lock:
            self._broken[peer] = err
            everyone_gone = len(self._broken) >= self._size - 1
            doomed = [p for p in self._pending if p.src == peer or (p.src == _ANY and everyone_gone)]
            for p in doomed:
                self._pending.remove(p)
        for p in doomed:
            p.work._set_done(err)

    def _check_peer(self, peer, what):
        if not 0 <= peer < self._size:
            raise _invalid(f"{what} rank {peer}: the group has ranks 0..{self._size - 1}")

    # -- teardown
    def close(self, err, join_timeout):
        with self._lock:
            if self._closed is None:
                self._closed = err
            doomed, self._pending = self._pending, []
        for p in doomed:
            p.work._set_done(err)
        if self._init_thread is not None:
            self._init_thread.join(join_timeout)
        # Tell every peer this rank sends no more (after the sends already
        # queued), so its receiver thread ends without an error.
        close = torch.tensor([0, _CLOSE], dtype=torch.int64)
        for peer, comm in list(self._out.items()):
            lane = self._send_lanes.get(peer)
            try:
                req = comm._raw_call("send", close.data_ptr(), 0, _HEADER_WORDS, _conflux.INT64, root=1,
                                     keepalive=close)
            except Error:
                continue
            if lane is None:
                lane = self._send_lanes[peer] = _Lane(f"conflux-send-{peer}")
            lane.put(Work([req], what=f"closing the link to rank {peer}"))
        for lane in list(self._send_lanes.values()):
            lane.stop(join_timeout)
        # Peers that shut down too have closed their links by now or soon;
        # a link whose peer is still running (or gone) is aborted, which ends
        # the header receive that is always posted on it.
        until = time.monotonic() + min(join_timeout, 2.0)
        for t in self._receivers:
            t.join(max(0.0, until - time.monotonic()))
        for peer, comm in list(self._in.items()):
            if peer not in self._broken:
                try:
                    comm.abort()
                except Error:
                    pass
        for t in self._receivers:
            t.join(join_timeout)
        for comm in list(self._out.values()):
            try:
                comm.destroy()
            except Error:
                pass

    def abort(self, err):
        with self._lock:
            if self._closed is None:
                self._closed = err
        for comm in list(self._out.values()) + list(self._in.values()):
            try:
                comm.abort()
            except Error:
                pass
        self.close(err, 5.0)


# ---- the process group ----------------------------------------------------------

def _release(lane, p2p, state, join_timeout=10.0):
    """Stop a group's threads once its Work is done and release its p2p links.

    Runs at shutdown(), when the group is garbage collected (torch dropped
    it after destroy_process_group) and at exit (weakref.finalize's atexit
    hook): a daemon thread still inside torch when the interpreter finalises
    is killed mid C++ frame, which aborts the process."""
    if state["closed"] is None:
        state["closed"] = Error("conflux backend: the process group was shut down", _INVALID_USAGE)
    lane.stop(join_timeout)
    p2p.close(state["closed"], join_timeout)


class ProcessGroupConflux(dist.ProcessGroup):
    """A torch.distributed process group backed by conflux communicators."""

    _UID_KEY = "conflux_unique_id"

    def __init__(self, store, rank, size, timeout):
        try:
            super().__init__(rank, size)
        except TypeError as e:
            raise Error(f"conflux backend: torch {_torch_version()}'s ProcessGroup cannot be constructed as "
                        f"ProcessGroup(rank, size): {e}", _INVALID_USAGE) from None
        # Rendezvous through the store torch gives us (already prefixed per
        # group): rank 0 creates the conflux id, the others read it.
        if rank == 0:
            uid = _conflux.get_unique_id()
            store.set(self._UID_KEY, uid)
        else:
            uid = bytes(store.get(self._UID_KEY))
        self.comm = _conflux.Comm(size, uid, rank)
        self._timeout_s = _timeout_seconds(timeout)
        if self._timeout_s:
            self.comm.set_timeout(self._timeout_s)
        self._lane = _Lane("conflux-completion")
        self._p2p = _P2P(store, rank, size, self._timeout_s)
        self._coalescing = None  # Works issued between _start_coalescing and _end_coalescing
        self._state = {"closed": None}  # shared with the finalizer, which must not hold self
        self._release = weakref.finalize(self, _release, self._lane, self._p2p, self._state)

    # ---- names torch asks for
    def getBackendName(self):  # noqa: N802 - c10d's name
        return "conflux"

    def _get_backend_name(self):
        return "conflux"

    def name(self):
        return "conflux"

    def __repr__(self):
        return f"<ProcessGroupConflux rank {self.rank()} of {self.size()}>"

    # torch 2.x stores a group's name and description in its backends, which
    # a Python process group has none of; PyProcessGroup.hpp forwards these
    # four to Python, so the group keeps them itself.
    def setGroupName(self, name):  # noqa: N802 - c10d's name
        self._group_name = name

    def getGroupName(self):  # noqa: N802
        return getattr(self, "_group_name", "")

    def setGroupDesc(self, desc):  # noqa: N802
        self._group_desc = desc

    def getGroupDesc(self):  # noqa: N802
        return getattr(self, "_group_desc", "")

    # ---- lifecycle
    def shutdown(self):
        """Finish the work already issued, then release the communicators.
        Later calls on the group raise conflux.Error."""
        self._release()
        try:
            self.comm.destroy()
        except Error:
            pass

    def abort(self):
        """Fail the work in flight (ABORTED) and release the communicators now."""
        if self._state["closed"] is None:
            self._state["closed"] = Error("conflux backend: the process group was aborted", _ABORTED)
        try:
            self.comm.abort()
        except Error:
            pass
        self._p2p.abort(self._state["closed"])
        self._release()

    def _check_open(self):
        if self._state["closed"] is not None:
            raise self._state["closed"]

    # ---- issuing
    def _submit(self, requests, result, finish=None, what="collective"):
        work = Work(requests, finish, result, what=what, timeout_s=self._timeout_s)
        self._lane.put(work)
        if self._coalescing is not None:
            self._coalescing.append(work)
        return work

    def _call(self, name, send, recv, count, dtype, op=_conflux.SUM, root=0, keep=None, **v):
        self._check_open()
        return self.comm._raw_call(name, send.data_ptr() if send is not None else 0,
                                   recv.data_ptr() if recv is not None else 0, count, dtype, op, root,
                                   keepalive=keep, **v)

    def _reduce_in_place(self, name, tensors, opts, root=0):
        op, factor = _opts_reduction(opts)
        reqs, backs = [], []
        for t in tensors:
            d = _dense(t)
            if d is not t:
                backs.append((t, d))
            view, dtype, cop = _reduce_view(d, op, name)
            if factor is not None:
                view.mul_(factor)
            reqs.append(self._call(name, view, view, view.numel(), dtype, cop, root, keep=d))
        return self._submit(reqs, tensors, (lambda: [t.copy_(d) for t, d in backs]) if backs else None, what=name)

    def _move_in_place(self, name, tensors, root):
        reqs, backs = [], []
        for t in tensors:
            d = _dense(t)
            if d is not t:
                backs.append((t, d))
            dtype, count = _wire(d)
            reqs.append(self._call(name, d, d, count, dtype, root=root, keep=d))
        return self._submit(reqs, tensors, (lambda: [t.copy_(d) for t, d in backs]) if backs else None, what=name)

    # ---- collectives
    def allreduce(self, tensors, opts=None):
        return self._reduce_in_place("allreduce", tensors, opts)

    def allreduce_coalesced(self, tensors, opts=None):
        # One flat buffer, one allreduce: fewer, larger messages.
        op, factor = _opts_reduction(opts)
        if not tensors:
            return _completed_work([], "allreduce_coalesced")
        if len({t.dtype for t in tensors}) != 1:
            raise _invalid("allreduce_coalesced: all tensors must have one dtype")
        flat = torch.cat([t.reshape(-1) for t in tensors])
        view, dtype, cop = _reduce_view(flat, op, "allreduce_coalesced")
        if factor is not None:
            view.mul_(factor)
        req = self._call("allreduce", view, view, view.numel(), dtype, cop, keep=flat)

        def unflatten():
            at = 0
            for t in tensors:
                t.copy_(flat[at:at + t.numel()].view_as(t))
                at += t.numel()
        return self._submit([req], tensors, unflatten, what="allreduce_coalesced")

    def broadcast(self, tensors, opts=None):
        return self._move_in_place("broadcast", tensors, opts.rootRank if opts is not None else 0)

    def reduce(self, tensors, opts=None):
        return self._reduce_in_place("reduce", tensors, opts, opts.rootRank if opts is not None else 0)

    def _allgather_one(self, outs, inp, what):
        """Gather inp from every rank into the list outs (one tensor per rank)."""
        inp = _dense(inp)
        if len(outs) != self.size():
            raise _invalid(f"{what}: expected {self.size()} output tensors, got {len(outs)}")
        staging = torch.empty(inp.numel() * self.size(), dtype=inp.dtype)
        dtype, count = _wire(inp)
        req = self._call("allgather", inp, staging, count, dtype, keep=(inp, staging))

        def copy_out():
            for r, o in enumerate(outs):
                o.copy_(staging[r * inp.numel():(r + 1) * inp.numel()].view_as(o))
        return req, copy_out

    def allgather(self, output_tensors, input_tensors, opts=None):
        req, copy_out = self._allgather_one(output_tensors[0], input_tensors[0], "allgather")
        return self._submit([req], output_tensors, copy_out, what="allgather")

    def allgather_coalesced(self, output_lists, input_list, opts=None):
        # output_lists[r][i] receives rank r's input_list[i].
        reqs, finishes = [], []
        for i, inp in enumerate(input_list):
            req, copy_out = self._allgather_one([output_lists[r][i] for r in range(self.size())], inp,
                                                "allgather_coalesced")
            reqs.append(req)
            finishes.append(copy_out)
        return self._submit(reqs, output_lists, lambda: [f() for f in finishes], what="allgather_coalesced")

    def _gather_into(self, output, input):
        inp, out = _dense(input), _dense(output)
        if out.numel() != inp.numel() * self.size():
            raise _invalid(f"all_gather_into_tensor: the output has {out.numel()} elements, expected "
                           f"{self.size()} x {inp.numel()}")
        dtype, count = _wire(inp)
        req = self._call("allgather", inp, out, count, dtype, keep=(inp, out))
        return req, (None if out is output else (lambda: output.copy_(out)))

    def _allgather_base(self, output, input, opts=None):
        req, finish = self._gather_into(output, input)
        return self._submit([req], [output], finish, what="allgather_into_tensor")

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        reqs, finishes = [], []
        for out, inp in zip(outputs, inputs):
            req, finish = self._gather_into(out, inp)
            reqs.append(req)
            if finish is not None:
                finishes.append(finish)
        return self._submit(reqs, outputs, (lambda: [f() for f in finishes]) if finishes else None,
                            what="allgather_into_tensor_coalesced")

    def _scatter_reduce(self, output, flat_input, opts, what):
        """Reduce-scatter a contiguous input whose rank r slice lands in output."""
        op, factor = _opts_reduction(opts)
        out = _dense(output)
        if flat_input.numel() != out.numel() * self.size():
            raise _invalid(f"{what}: the input has {flat_input.numel()} elements, expected "
                           f"{self.size()} x {out.numel()}")
        if factor is not None:
            flat_input = flat_input * factor
        inp_view, dtype, cop = _reduce_view(flat_input, op, what)
        out_view, _, _ = _reduce_view(out, op, what)
        req = self._call("reduce_scatter", inp_view, out_view, out_view.numel(), dtype, cop,
                         keep=(flat_input, out))
        return req, (None if out is output else (lambda: output.copy_(out)))

    def reduce_scatter(self, output_tensors, input_tensors, opts=None):
        flat = torch.cat([t.reshape(-1) for t in input_tensors[0]])
        req, finish = self._scatter_reduce(output_tensors[0], flat, opts, "reduce_scatter")
        return self._submit([req], output_tensors, finish, what="reduce_scatter")

    def _reduce_scatter_base(self, output, input, opts=None):
        req, finish = self._scatter_reduce(output, _dense(input), opts, "reduce_scatter_tensor")
        return self._submit([req], [output], finish, what="reduce_scatter_tensor")

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        reqs, finishes = [], []
        for out, inp in zip(outputs, inputs):
            req, finish = self._scatter_reduce(out, _dense(inp), opts, "reduce_scatter_tensor_coalesced")
            reqs.append(req)
            if finish is not None:
                finishes.append(finish)
        return self._submit(reqs, outputs, (lambda: [f() for f in finishes]) if finishes else None,
                            what="reduce_scatter_tensor_coalesced")

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        inp, out = _dense(input), _dense(output)
        n = self.size()
        dtype, _ = _wire(inp)
        unit = inp.element_size() if dtype == _conflux.UINT8 else 1  # split sizes count elements
        if not output_split_sizes and not input_split_sizes:
            if inp.numel() % n or out.numel() != inp.numel():
                raise _invalid(f"all_to_all_single: {inp.numel()} input and {out.numel()} output elements "
                               f"do not split evenly over {n} ranks")
            req = self._call("alltoall", inp, out, inp.numel() // n * unit, dtype, keep=(inp, out))
        else:
            # Split sizes count rows of dim 0; conflux counts elements.
            in_row = (inp.numel() // max(inp.size(0), 1) if inp.dim() else 1) * unit
            out_row = (out.numel() // max(out.size(0), 1) if out.dim() else 1) * unit
            in_rows = list(input_split_sizes) or [inp.size(0) // n] * n
            out_rows = list(output_split_sizes) or [out.size(0) // n] * n
            sc = [r * in_row for r in in_rows]
            rc = [r * out_row for r in out_rows]
            req = self._call("alltoallv", inp, out, 0, dtype, keep=(inp, out),
                             sendcounts=sc, sdispls=_prefix(sc), recvcounts=rc, rdispls=_prefix(rc))
        return self._submit([req], [output], None if out is output else (lambda: output.copy_(out)),
                            what="all_to_all_single")

    def alltoall(self, output_tensors, input_tensors, opts=None):
        flat_in = torch.cat([t.reshape(-1) for t in input_tensors])
        flat_out = torch.empty(sum(t.numel() for t in output_tensors), dtype=flat_in.dtype)
        dtype, _ = _wire(flat_in)
        unit = flat_in.element_size() if dtype == _conflux.UINT8 else 1
        sc = [t.numel() * unit for t in input_tensors]
        rc = [t.numel() * unit for t in output_tensors]
        req = self._call("alltoallv", flat_in, flat_out, 0, dtype, keep=(flat_in, flat_out),
                         sendcounts=sc, sdispls=_prefix(sc), recvcounts=rc, rdispls=_prefix(rc))

        def copy_out():
            at = 0
            for t in output_tensors:
                t.copy_(flat_out[at:at + t.numel()].view_as(t))
                at += t.numel()
        return self._submit([req], output_tensors, copy_out, what="all_to_all")

    def gather(self, output_tensors, input_tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        inp = _dense(input_tensors[0])
        me_root = self.rank() == root
        if me_root and len(output_tensors[0]) != self.size():
            raise _invalid(f"gather: expected {self.size()} output tensors on the root, got {len(output_tensors[0])}")
        staging = torch.empty(inp.numel() * self.size(), dtype=inp.dtype) if me_root else None
        dtype, count = _wire(inp)
        req = self._call("gather", inp, staging, count, dtype, root=root, keep=(inp, staging))
        finish = None
        if me_root:
            def finish():
                for r, o in enumerate(output_tensors[0]):
                    o.copy_(staging[r * inp.numel():(r + 1) * inp.numel()].view_as(o))
        return self._submit([req], output_tensors, finish, what="gather")

    def scatter(self, output_tensors, input_tensors, opts=None):
        root = opts.rootRank if opts is not None else 0
        out = output_tensors[0]
        dense = _dense(out)
        flat = torch.cat([t.reshape(-1) for t in input_tensors[0]]) if self.rank() == root else None
        dtype, count = _wire(dense)
        req = self._call("scatter", flat, dense, count, dtype, root=root, keep=(flat, dense))
        return self._submit([req], output_tensors, None if dense is out else (lambda: out.copy_(dense)),
                            what="scatter")

    def barrier(self, opts=None):
        self._check_open()
        return self._submit([self.comm._raw_call("barrier", 0, 0, 0, _conflux.UINT8)], [], what="barrier")

    # ---- coalescing (torch 2.x's _coalescing_manager with a device)
    def _start_coalescing(self, device=None):
        if self._coalescing is not None:
            raise Error("conflux backend: _start_coalescing called twice without _end_coalescing", _INVALID_USAGE)
        self._coalescing = []

    def _end_coalescing(self, device=None):
        if self._coalescing is None:
            raise Error("conflux backend: _end_coalescing without _start_coalescing", _INVALID_USAGE)
        works, self._coalescing = self._coalescing, None
        return _all_of(works, [], "coalesced operations")

    # ---- point-to-point
    def send(self, tensors, dst, tag=0):
        self._check_open()
        work = self._p2p.send(tensors[0], dst, tag)
        if self._coalescing is not None:
            self._coalescing.append(work)
        return work

    def recv(self, tensors, src, tag=0):
        self._check_open()
        work = self._p2p.recv(tensors[0], src, tag)
        if self._coalescing is not None:
            self._coalescing.append(work)
        return work

    def recv_anysource(self, tensors, tag=0):
        self._check_open()
        return self._p2p.recv(tensors[0], _ANY, tag)

    # Tags below any a user passes carry the monitored barrier's messages,
    # one pair per call (as gloo's per-call tags), so a late arrival from an
    # earlier call cannot satisfy a later one.
    _MB_TAG_BASE = -0x4D42_0000

    def monitored_barrier(self, opts=None, wait_all_ranks=False):
        """gloo's monitored barrier, with gloo's messages: rank 0 waits for
        every other rank to arrive within the timeout, then releases them. A
        rank that does not arrive is named (every such rank with
        wait_all_ranks); rank 0 running out of time says so."""
        self._check_open()
        # torch 1.13 passes the timeout itself, torch 2.x BarrierOptions.
        timeout = opts if isinstance(opts, datetime.timedelta) else getattr(opts, "timeout", None)
        seconds = timeout.total_seconds() if isinstance(timeout, datetime.timedelta) else self._timeout_s
        ms = int(round(seconds * 1000)) if seconds is not None else 0
        self._mb_calls = getattr(self, "_mb_calls", 0) + 1
        arrive = self._MB_TAG_BASE - 2 * self._mb_calls
        release = arrive - 1
        token = torch.zeros(1, dtype=torch.uint8)

        def wait(work, left):
            work.wait(datetime.timedelta(seconds=max(left, 0.0)) if left is not None else None)

        if self.rank() != 0:
            try:
                self._p2p.send(token, 0, arrive).wait()
                wait(self._p2p.recv(torch.zeros(1, dtype=torch.uint8), 0, release), seconds)
            except Error:
                raise Error(f"Rank {self.rank()} successfully reached monitoredBarrier, but received errors while "
                            "waiting for send/recv from rank 0. Please check rank 0 logs for faulty rank.",
                            _TIMEOUT) from None
            return _completed_work([], "monitored_barrier")
        start = time.monotonic()
        works = {r: self._p2p.recv(torch.zeros(1, dtype=torch.uint8), r, arrive) for r in range(1, self.size())}
        processed, failed = [], []
        for r, work in works.items():
            left = None if seconds is None else seconds - (time.monotonic() - start)
            if not wait_all_ranks and left is not None and left <= 0:
                info = (f"Successfully processed ranks: {', '.join(map(str, processed))}" if processed
                        else "No ranks successfully processed in monitoredBarrier.")
                raise Error(f"Rank 0 timed out in monitoredBarrier after {ms} ms.\n{info}", _TIMEOUT)
            try:
                wait(work, seconds if wait_all_ranks else left)
                processed.append(r)
            except Error:
                if not wait_all_ranks:
                    raise Error(f"[Rank 0]: Rank {r} failed to pass monitoredBarrier in {ms} ms", _TIMEOUT) from None
                failed.append(r)
        if failed:
            raise Error(f"[Rank 0]: Ranks {', '.join(map(str, failed))} failed to pass monitoredBarrier in {ms} ms",
                        _TIMEOUT)
        for r in range(1, self.size()):
            self._p2p.send(token, r, release).wait()
        return _completed_work([], "monitored_barrier")

    # ---- methods torch may call that this class does not know
    def __getattr__(self, name):
        # Only reached for names neither this class nor torch's base defines.
        if name.startswith("__") or name.startswith("_conflux"):
            raise AttributeError(name)
        raise _UnknownApi(f"conflux backend: torch {_torch_version()} asked the process group for "
                          f"'{name}', which this version of conflux does not implement")


class _UnknownApi(AttributeError, Error):
    """An attribute torch asked for that the backend does not define. An
    AttributeError, so hasattr() still answers False."""

    def __init__(self, message):
        AttributeError.__init__(self, message)
        Error.__init__(self, message, _INVALID_USAGE)

    def __str__(self):
        return Error.__str__(self)


# Words in the names of the communication methods of c10d's ProcessGroup.
_COMM_WORDS = ("reduce", "gather", "scatter", "broadcast", "send", "recv", "barrier", "alltoall", "all_to_all",
               "coalesc")


def _install_unknown_api_stubs(cls, base_names):
    """Give cls a stub for every communication method of torch's base class
    that it does not define: the base's C++ version would fail deep in c10d
    ("no backend for device type cpu"), the stub fails with conflux.Error
    naming the torch version and the method. Returns the names stubbed."""
    stubbed = []
    for name in base_names:
        if name.startswith("__") or name in cls.__dict__:
            continue
        if not any(w in name.lower() for w in _COMM_WORDS):
            continue

        def stub(self, *args, _name=name, **kwargs):
            raise Error(f"conflux backend: torch {_torch_version()} called ProcessGroup.{_name}, "
                        "which this version of conflux does not implement", _INVALID_USAGE)
        stub.__name__ = name
        setattr(cls, name, stub)
        stubbed.append(name)
    return stubbed


_install_unknown_api_stubs(ProcessGroupConflux, dir(dist.ProcessGroup))


# ---- registration ----------------------------------------------------------------

def _create(store, rank, size, timeout):
    return ProcessGroupConflux(store, rank, size, timeout)


def register():
    """Register the "conflux" backend with torch.distributed (idempotent).

    Passes devices=["cpu"] where this torch's register_backend takes a
    devices argument (torch 2.x), found by inspecting its signature."""
    backend = dist.Backend
    if "CONFLUX" in getattr(backend, "_plugins", {}):
        return
    register_backend = getattr(backend, "register_backend", None)
    if register_backend is None:
        raise Error(f"conflux backend: torch {_torch_version()} has no torch.distributed.Backend.register_backend, "
                    "so the backend cannot be registered", _INVALID_USAGE)
    try:
        params = inspect.signature(register_backend).parameters
    except (TypeError, ValueError):
        params = {}
    if "devices" in params:
        register_backend("conflux", _create, devices=["cpu"])
    else:
        register_backend("conflux", _create)


def _autoload():
    """Entry point ("torch.backends", loaded by torch 2.5+ at import torch):
    registers the backend, so init_process_group("conflux") needs no import."""
    register()


register()
