"""conflux.MoE across hosts under `conflux run -n N`: ranks are split into
hosts of two (CONFLUX_HOSTID, set before the communicator exists), so
dispatch goes through one proxy per host. Each host_partial_sums mode
gives the j-order weighted sum within its rounding, and the modes that add
on the experts' hosts send fewer bytes over the network than the exact one."""
import os
import sys

import numpy as np

RANK = int(os.environ["RANK"])
os.environ["CONFLUX_HOSTID"] = "pyhost%d" % (RANK // 2)

import conflux  # noqa: E402  (the host identity must be set first)

E, K, H, T = 16, 4, 40, 12


def check(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def routing(rank):
    rng = np.random.default_rng(300 + rank)
    tokens = rng.standard_normal((T, H)).astype(np.float32)
    idx = np.stack([rng.permutation(E)[:K] for _ in range(T)]).astype(np.int32)
    w = rng.uniform(0.1, 1.0, (T, K)).astype(np.float32)
    return tokens, idx, w


def round_trip(comm, mode, dtype):
    moe = conflux.MoE(comm, E, K, H, dtype=dtype, max_tokens_per_rank=T,
                      expert_to_rank=[e % comm.size for e in range(E)], host_partial_sums=mode)
    tokens, idx, w = routing(comm.rank)
    as_bf16 = lambda x: (x.view(np.uint32) >> 16).astype(np.uint16)  # noqa: E731
    to_float = lambda b: (b.astype(np.uint32) << 16).view(np.float32)  # noqa: E731
    src = tokens if dtype == "float32" else as_bf16(tokens)
    d = moe.dispatch(src, idx, w)
    # Expert e scales its rows by e + 1; exact in both datatypes for these magnitudes.
    scaled = [(b if dtype == "float32" else to_float(b)) * np.float32(e + 1) for e, b in d.blocks()]
    out = np.concatenate(scaled) if scaled else np.zeros((0, H), np.float32)
    if dtype != "float32":
        out = as_bf16(out)
    y = moe.combine(d, out)
    y = y if dtype == "float32" else to_float(y)
    x = tokens if dtype == "float32" else to_float(as_bf16(tokens))
    want = np.zeros_like(x)
    for t in range(T):
        for j in range(K):
            want[t] += w[t, j] * np.float32(idx[t, j] + 1) * x[t]
    tol = 1e-5 if dtype == "float32" else 3e-2
    check(np.allclose(y, want, rtol=tol, atol=tol), "combine, host_partial_sums=%d, %s" % (mode, dtype))
    return d.stats()["network_bytes"]


def main():
    comm = conflux.Comm.from_env()
    for dtype in ("float32", "bfloat16"):
        sent = {mode: round_trip(comm, mode, dtype) for mode in (0, 1, 2)}
        total = {mode: comm.allreduce(np.array([sent[mode]], np.float64))[0] for mode in sent}
        if comm.size > 2:
            check(total[2] < total[0], "host sums send fewer network bytes (%s): %s" % (dtype, total))
    comm.barrier()
    if comm.rank == 0:
        print("moe across hosts ok on %d ranks" % comm.size)


if __name__ == "__main__":
    main()
