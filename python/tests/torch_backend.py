"""Every op of the conflux torch.distributed backend, compared with torch's
own gloo backend on the same inputs in the same job: the default group is
conflux, a second group over the same ranks is gloo.
Run under a launcher: conflux run -n N python3 torch_backend.py"""
import datetime
import sys

import torch
import torch.distributed as dist

import conflux.torch  # noqa: F401  (registers the backend)

dist.init_process_group("conflux")
rank, n = dist.get_rank(), dist.get_world_size()
cfx = dist.group.WORLD
gloo = dist.new_group(backend="gloo")
assert dist.get_backend(cfx) == "conflux", dist.get_backend(cfx)
checks = 0


def same(a, b, what):
    global checks
    a, b = (a if isinstance(a, (list, tuple)) else [a]), (b if isinstance(b, (list, tuple)) else [b])
    for x, y in zip(a, b):
        if not torch.equal(x, y):
            sys.exit(f"rank {rank}: {what}: conflux {x.flatten()[:6]} gloo {y.flatten()[:6]}")
    checks += 1


def _tensors(x):
    if isinstance(x, (list, tuple)):
        for y in x:
            yield from _tensors(y)
    else:
        yield x


def both(fn, make, what, only_rank=None, gloo_fn=None):
    """Run fn(group, inputs...) on fresh copies for each backend; compare
    outputs (only on only_rank where other ranks' outputs are unspecified)."""
    outs = []
    for g in (cfx, gloo):
        args = make()
        (gloo_fn if g is gloo and gloo_fn else fn)(g, *args)
        outs.append(list(_tensors(args)))
    if only_rank is not None and rank != only_rank:
        return
    same(outs[0], outs[1], what)


def data(shape, dtype, salt=0):
    g = torch.Generator().manual_seed(rank * 131 + salt)
    return torch.randint(1, 5, shape, generator=g).to(dtype)


# gloo in torch 1.13 lacks some ops; its reference there is built from ops it has.
def ag_ref(g, o, i):
    parts = [torch.empty_like(i) for _ in range(n)]
    dist.all_gather(parts, i, group=g)
    o.copy_(torch.cat(parts))


def rs_ref(g, o, i):
    flat = torch.cat(i) if isinstance(i, list) else i.clone()
    dist.all_reduce(flat, group=g)
    o.copy_(flat[rank * o.numel():(rank + 1) * o.numel()])


def a2a_ref(g, o, i):
    flat_out = torch.empty(sum(t.numel() for t in o))
    dist.all_to_all_single(flat_out, torch.cat(i), [t.numel() for t in o], [t.numel() for t in i], group=g)
    torch.cat(o)  # shapes only
    at = 0
    for t in o:
        t.copy_(flat_out[at:at + t.numel()])
        at += t.numel()


def contiguous_ref(g, t):
    # gloo 1.13 reduces a strided view's underlying storage range: give it a copy.
    col = t[:, 1].contiguous()
    dist.all_reduce(col, group=g)
    t[:, 1].copy_(col)


def float32_ref(g, t):
    f = t.float()
    dist.all_reduce(f, group=g)
    t.copy_(f)


dtypes = (torch.float32, torch.float64, torch.int64)
for dt in dtypes:
    for numel in (1, 1000 * n + 8 * n):
        # Every reduction on one type; SUM is enough to cover the others.
        ops = (dist.ReduceOp.SUM, dist.ReduceOp.PRODUCT, dist.ReduceOp.MIN, dist.ReduceOp.MAX)
        for op in ops if dt == torch.float32 else ops[:1]:
            both(lambda g, t: dist.all_reduce(t, op, group=g), lambda: [data([numel], dt)], f"all_reduce {op} {dt}")
            both(lambda g, t: dist.reduce(t, 1 % n, op, group=g), lambda: [data([numel], dt)], f"reduce {op} {dt}",
                 only_rank=1 % n)
        both(lambda g, t: dist.broadcast(t, n - 1, group=g), lambda: [data([numel], dt)], f"broadcast {dt}")
        both(lambda g, o, i: dist.all_gather(o, i, group=g),
             lambda: [[torch.zeros(numel, dtype=dt) for _ in range(n)], data([numel], dt)], f"all_gather {dt}")
        both(lambda g, o, i: dist._all_gather_base(o, i, group=g),
             lambda: [torch.zeros(numel * n, dtype=dt), data([numel], dt)], f"_all_gather_base {dt}",
             gloo_fn=ag_ref)
        both(lambda g, o, i: dist.reduce_scatter(o, i, group=g),
             lambda: [torch.zeros(numel, dtype=dt), [data([numel], dt, s) for s in range(n)]], f"reduce_scatter {dt}",
             gloo_fn=rs_ref)
        both(lambda g, o, i: dist._reduce_scatter_base(o, i, group=g),
             lambda: [torch.zeros(numel, dtype=dt), data([numel * n], dt)], f"_reduce_scatter_base {dt}",
             gloo_fn=rs_ref)
        both(lambda g, o, i: dist.all_to_all_single(o, i, group=g),
             lambda: [torch.zeros(numel * n, dtype=dt), data([numel * n], dt)], f"all_to_all_single {dt}")
        both(lambda g, o, i: dist.gather(i, o if rank == 0 else None, dst=0, group=g),
             lambda: [[torch.zeros(numel, dtype=dt) for _ in range(n)] if rank == 0 else [], data([numel], dt)],
             f"gather {dt}")
        both(lambda g, o, i: dist.scatter(o, i if rank == n - 1 else None, src=n - 1, group=g),
             lambda: [torch.zeros(numel, dtype=dt), [data([numel], dt, s) for s in range(n)] if rank == n - 1 else []],
             f"scatter {dt}")

# Uneven all_to_all_single: rank r sends (r + j + 1) rows of 3 to rank j.
in_splits = [rank + j + 1 for j in range(n)]
out_splits = [j + rank + 1 for j in range(n)]
both(lambda g, o, i: dist.all_to_all_single(o, i, out_splits, in_splits, group=g),
     lambda: [torch.zeros(sum(out_splits), 3), data([sum(in_splits), 3], torch.float32)], "all_to_all_single uneven")
# List all_to_all with uneven tensors.
both(lambda g, o, i: dist.all_to_all(o, i, group=g),
     lambda: [[torch.zeros(j + rank + 1) for j in range(n)], [data([rank + j + 1], torch.float32, j) for j in range(n)]],
     "all_to_all", gloo_fn=a2a_ref)
# Coalesced allreduce and a non-contiguous tensor.
both(lambda g, a, b: dist.all_reduce_coalesced([a, b], group=g),
     lambda: [data([17], torch.float32), data([5, 3], torch.float32, 1)], "all_reduce_coalesced")
both(lambda g, t: dist.all_reduce(t[:, 1], group=g), lambda: [data([6, 4], torch.float64)], "all_reduce non-contiguous",
     gloo_fn=contiguous_ref)
both(lambda g, t: dist.all_reduce(t, group=g), lambda: [data([33], torch.bfloat16)], "all_reduce bfloat16",
     gloo_fn=float32_ref)  # gloo has no bfloat16; small integers are exact in both

# send/recv: a ring with isend/irecv, then blocking pairs.
right, left = (rank + 1) % n, (rank - 1) % n
for g in (cfx, gloo):
    got = torch.zeros(4)
    if rank % 2 == 0:
        dist.send(torch.full((4,), float(rank)), right, group=g)
        dist.recv(got, left, group=g)
    else:
        dist.recv(got, left, group=g)
        dist.send(torch.full((4,), float(rank)), right, group=g)
    same(got, torch.full((4,), float(left)), "send/recv ring")
reqs = [dist.isend(torch.arange(5.0) + rank, right), dist.irecv(got5 := torch.zeros(5), left)]
for r in reqs:
    r.wait()
same(got5, torch.arange(5.0) + left, "isend/irecv")

# Async work: real state, future, exception.
t = torch.ones(1 << 20)
w = dist.all_reduce(t, async_op=True)
fut = w.get_future()
w.wait()
assert w.is_completed() and w.is_success() and w.exception() is None
same(fut.wait()[0], torch.full((1 << 20,), float(n)), "async all_reduce future")
same(t, torch.full((1 << 20,), float(n)), "async all_reduce")
dist.barrier()
dist.barrier(group=gloo)

# Errors surface as conflux.Error with the library's message.
try:
    dist.all_reduce(torch.zeros(3, dtype=torch.int16))
    sys.exit("int16 all_reduce should have raised")
except conflux.Error as e:
    assert e.code == int(conflux.Result.INVALID_ARGUMENT), e
    checks += 1

# A timeout is reported by Work.wait() (and the future) as conflux.Error
# TIMEOUT with the library's message; a group of its own keeps WORLD clean.
late = dist.new_group(backend="conflux", timeout=datetime.timedelta(seconds=0.5))
if rank == 0:
    w = dist.irecv(torch.zeros(4), 1, group=late)
    try:
        w.wait()
        sys.exit("recv with no sender should have timed out")
    except conflux.Error as e:
        assert e.code == int(conflux.Result.TIMEOUT) and "timed out" in e.message, e
        assert w.is_completed() and not w.is_success() and w.exception() is e
        checks += 1
dist.barrier()
late.comm.abort()

# ---- beyond the basic ops -------------------------------------------------

# all_gather_coalesced: output_lists[r][i] receives rank r's input i.
both(lambda g, o, a, b: dist.all_gather_coalesced(o, [a, b], group=g),
     lambda: [[[torch.zeros(3), torch.zeros(2, 2)] for _ in range(n)], data([3], torch.float32),
              data([2, 2], torch.float32, 1)], "all_gather_coalesced")
# AVG where this torch has it (gloo does not: its reference is SUM / n).
if hasattr(dist.ReduceOp, "AVG"):
    def avg_ref(g, t):
        dist.all_reduce(t, group=g)
        t.div_(n)
    both(lambda g, t: dist.all_reduce(t, dist.ReduceOp.AVG, group=g), lambda: [data([1000], torch.float64)],
         "all_reduce AVG", gloo_fn=avg_ref)
# PREMUL_SUM (FSDP's reduction): SUM of inputs times the factor. torch 2.x
# exposes the factor to Python backends; torch 1.13 does not, and says so.
if hasattr(dist, "_make_nccl_premul_sum"):
    premul = dist._make_nccl_premul_sum(0.25)
    try:
        t = data([100], torch.float32)
        expect = t.clone()
        dist.all_reduce(expect, group=gloo)
        dist.all_reduce(t, premul)
        same(t, expect * 0.25, "all_reduce PREMUL_SUM")
        if hasattr(dist, "reduce_scatter_tensor"):
            inp = data([8 * n], torch.float32, 3)
            out = torch.zeros(8)
            dist.reduce_scatter_tensor(out, inp, premul)
            ref = inp.clone()
            dist.all_reduce(ref, group=gloo)
            same(out, ref[rank * 8:(rank + 1) * 8] * 0.25, "reduce_scatter_tensor PREMUL_SUM")
    except conflux.Error as e:
        assert "PREMUL_SUM" in e.message and torch.__version__ in e.message, e
        checks += 1
# An op conflux has no reduction for fails naming it.
try:
    dist.all_reduce(torch.ones(4, dtype=torch.int32), dist.ReduceOp.BAND)
    sys.exit("BAND all_reduce should have raised")
except conflux.Error as e:
    assert "BAND" in e.message and e.code == int(conflux.Result.INVALID_ARGUMENT), e
    checks += 1
try:
    dist.all_reduce(torch.zeros(3, dtype=torch.int16))
    sys.exit("int16 all_reduce should have raised")
except conflux.Error as e:
    assert "torch.int16" in e.message, e
    checks += 1
# Types conflux does not reduce still move unchanged.
t = data([9], torch.int16) * (rank + 1)
dist.broadcast(t, 0)
same(t, torch.randint(1, 5, [9], generator=torch.Generator().manual_seed(0)).to(torch.int16), "broadcast int16")

# The newer names torch 2.x calls, where this torch has them.
if hasattr(dist, "all_gather_into_tensor"):
    both(lambda g, o, i: dist.all_gather_into_tensor(o, i, group=g),
         lambda: [torch.zeros(5 * n), data([5], torch.float32)], "all_gather_into_tensor", gloo_fn=ag_ref)
    both(lambda g, o, i: dist.reduce_scatter_tensor(o, i, group=g),
         lambda: [torch.zeros(5), data([5 * n], torch.float32)], "reduce_scatter_tensor", gloo_fn=rs_ref)
if hasattr(dist, "_coalescing_manager"):
    # Without a device, torch records the calls and issues one coalesced
    # call per kind (allgather_into_tensor_coalesced, ...); with one, it
    # brackets the calls with _start_coalescing/_end_coalescing.
    for device in (None, torch.device("cpu")):
        outs = [torch.zeros(3 * n), torch.zeros(2 * n)]
        ins = [data([3], torch.float32), data([2], torch.float32, 1)]
        with dist._coalescing_manager(group=cfx, device=device, async_ops=True) as cm:
            for o, i in zip(outs, ins):
                dist.all_gather_into_tensor(o, i)
        cm.wait()
        for o, i in zip(outs, ins):
            ref = torch.zeros_like(o)
            ag_ref(gloo, ref, i)
            same(o, ref, f"coalesced all_gather_into_tensor (device {device})")
        outs = [torch.zeros(3), torch.zeros(2)]
        ins = [data([3 * n], torch.float32), data([2 * n], torch.float32, 1)]
        with dist._coalescing_manager(group=cfx, device=device, async_ops=True) as cm:
            for o, i in zip(outs, ins):
                dist.reduce_scatter_tensor(o, i)
        cm.wait()
        for o, i in zip(outs, ins):
            ref = torch.zeros_like(o)
            rs_ref(gloo, ref, i)
            same(o, ref, f"coalesced reduce_scatter_tensor (device {device})")

# Object collectives ride on the tensor ones.
for g in (cfx, gloo):
    objs = [None] * n
    dist.all_gather_object(objs, {"rank": rank, "name": f"r{rank}"}, group=g)
    assert objs == [{"rank": r, "name": f"r{r}"} for r in range(n)], objs
    lst = [f"from {n - 1}", n - 1] if rank == n - 1 else [None, None]
    dist.broadcast_object_list(lst, src=n - 1, group=g)
    assert lst == [f"from {n - 1}", n - 1], lst
    gathered = [None] * n if rank == 0 else None
    dist.gather_object(("g", rank), gathered, dst=0, group=g)
    assert rank != 0 or gathered == [("g", r) for r in range(n)], gathered
    out = [None]
    dist.scatter_object_list(out, [("s", r) for r in range(n)] if rank == 0 else None, src=0, group=g)
    assert out == [("s", rank)], out
    checks += 1

# ---- point-to-point the way gloo allows it ----------------------------------

# Receive before send on both sides, large enough not to fit any buffer.
big = 3 << 20
sent = torch.arange(big, dtype=torch.float32) + rank
got = torch.zeros(big)
r = dist.irecv(got, left)
s_ = dist.isend(sent, right)
r.wait()
s_.wait()
same(got, torch.arange(big, dtype=torch.float32) + left, "irecv posted before isend, 12 MiB")
# batch_isend_irecv with receives first, including a message to itself.
ops, outs = [], {}
for peer in range(n):
    outs[peer] = torch.zeros(6)
    ops.append(dist.P2POp(dist.irecv, outs[peer], peer))
    ops.append(dist.P2POp(dist.isend, torch.full((6,), float(rank * 10 + peer)), peer))
for w in dist.batch_isend_irecv(ops):
    w.wait()
for peer in range(n):
    same(outs[peer], torch.full((6,), float(peer * 10 + rank)), f"batch_isend_irecv from {peer}")
# Tags: receives match by tag, not by arrival order.
if rank == 1:
    dist.send(torch.full((2,), 5.0), 0, tag=5)
    dist.send(torch.full((2,), 7.0), 0, tag=7)
elif rank == 0:
    t7, t5 = torch.zeros(2), torch.zeros(2)
    dist.recv(t7, 1, tag=7)
    dist.recv(t5, 1, tag=5)
    same([t7, t5], [torch.full((2,), 7.0), torch.full((2,), 5.0)], "recv by tag out of arrival order")
# Receive from any source: rank 0 hears from every other rank once, and
# learns who sent each message.
if rank == 0:
    senders = []
    for _ in range(n - 1):
        t = torch.zeros(4, dtype=torch.int64)
        src = dist.recv(t, tag=3)
        same(t, torch.full((4,), src * 100, dtype=torch.int64), f"recv from any source (got rank {src})")
        senders.append(src)
    assert sorted(senders) == list(range(1, n)), senders
    w = dist.irecv(torch.zeros(1))  # irecv from any source: completes after the send below
    dist.send(torch.ones(1), 1 % n if n > 1 else 0, tag=9)
else:
    dist.send(torch.full((4,), rank * 100, dtype=torch.int64), 0, tag=3)
    if rank == 1:
        dist.recv(torch.zeros(1), 0, tag=9)
        dist.send(torch.ones(1) * 42, 0)
if rank == 0:
    w.wait()
    assert w._source_rank() == 1, w._source_rank()
    checks += 1
# A recv whose size differs from the send fails naming both.
if rank == 1:
    dist.send(torch.zeros(3), 0, tag=11)
elif rank == 0:
    try:
        dist.recv(torch.zeros(4), 1, tag=11)
        sys.exit("a 16-byte recv of a 12-byte send should have raised")
    except conflux.Error as e:
        assert "16 bytes" in e.message and "12" in e.message, e
        checks += 1
dist.barrier()

# ---- groups, barriers, Work lifetime, lifecycle ------------------------------

# A subgroup of the even ranks.
evens = list(range(0, n, 2))
sub = dist.new_group(evens)
if rank in evens:
    t = torch.full((3,), float(rank))
    dist.all_reduce(t, group=sub)
    same(t, torch.full((3,), float(sum(evens))), "all_reduce on new_group(evens)")
    dist.barrier(group=sub)
# A Work whose handle is dropped still completes and keeps its tensor.
import gc  # noqa: E402
t = torch.ones(1 << 18)
dist.all_reduce(t, async_op=True)  # handle dropped at once
gc.collect()
dist.barrier()
same(t, torch.full((1 << 18,), float(n)), "all_reduce whose Work handle was dropped")
# monitored_barrier on the group itself (torch.distributed's function
# accepts gloo groups only): everyone arrives, then one rank stays away.
mb = dist.new_group(backend="conflux")
mb.monitored_barrier(datetime.timedelta(seconds=30))
if n > 1:
    if rank == 0:
        try:
            mb.monitored_barrier(datetime.timedelta(seconds=0.5))
            sys.exit("monitored_barrier without rank 1 should have raised")
        except conflux.Error as e:
            assert e.message.startswith("[Rank 0]: Rank 1 failed to pass monitoredBarrier in 500 ms"), e
            checks += 1
    dist.barrier()
# shutdown: later calls raise; abort: work in flight fails with ABORTED.
sd = dist.new_group(backend="conflux")
dist.all_reduce(torch.ones(2), group=sd)
sd.shutdown()
try:
    dist.all_reduce(torch.ones(2), group=sd)
    sys.exit("all_reduce after shutdown should have raised")
except conflux.Error as e:
    assert "shut down" in e.message, e
    checks += 1
ab = dist.new_group(backend="conflux")
if rank == 0 and n > 1:
    w = dist.irecv(torch.zeros(2), 1, group=ab, tag=77)  # nobody sends it
    ab.abort()
    try:
        w.wait()
        sys.exit("a recv in flight across abort() should have failed")
    except conflux.Error as e:
        assert e.code == int(conflux.Result.ABORTED), e
        checks += 1
dist.barrier()
# A method this conflux does not know fails naming torch's version and the
# method, whether torch's base class has it or not.
try:
    cfx.allgather_into_tensor_single_future(torch.zeros(1))
    sys.exit("an unknown method should have raised")
except AttributeError as e:
    assert isinstance(e, conflux.Error) and torch.__version__ in str(e) and "allgather_into_tensor_single_future" in str(e)
    assert not hasattr(cfx, "some_method_torch_might_add")
    checks += 1


class _NewerBase:
    def allreduce_single_async(self):
        pass


class _Probe(conflux.torch.ProcessGroupConflux):
    pass


assert conflux.torch._install_unknown_api_stubs(_Probe, dir(_NewerBase)) == ["allreduce_single_async"]
try:
    _Probe.allreduce_single_async(cfx)
    sys.exit("a stubbed method should have raised")
except conflux.Error as e:
    assert "ProcessGroup.allreduce_single_async" in e.message and torch.__version__ in e.message, e
    checks += 1
# Registered for the CPU where torch keeps a device list per backend.
caps = getattr(dist.Backend, "backend_capability", None)
if caps is not None:
    assert caps.get("conflux") == ["cpu"], caps.get("conflux")
    checks += 1

print(f"rank {rank}/{n}: {checks} checks passed, conflux matches gloo")
dist.destroy_process_group()
