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


def both(fn, make, what, only_rank=None, gloo_fn=None):
    """Run fn(group, inputs...) on fresh copies for each backend; compare
    outputs (only on only_rank where other ranks' outputs are unspecified)."""
    outs = []
    for g in (cfx, gloo):
        args = make()
        (gloo_fn if g is gloo and gloo_fn else fn)(g, *args)
        outs.append([t for a in args for t in (a if isinstance(a, list) else [a])])
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

print(f"rank {rank}/{n}: {checks} checks passed, conflux matches gloo")
dist.destroy_process_group()
