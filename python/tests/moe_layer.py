"""conflux.MoE under `conflux run -n N`: dispatch bit-exact against a
reference built from every rank's (regenerated) tokens, combine against the
weighted sum, bfloat16 through uint16 arrays, torch autograd gradients
against their closed forms, a rank without tokens, and bad input raising
conflux.Error on every rank."""
import sys

import numpy as np

import conflux

E, K, H = 8, 3, 24


def routing(rank, ntokens):
    rng = np.random.default_rng(100 + rank)
    tokens = rng.standard_normal((ntokens, H)).astype(np.float32)
    idx = np.stack([rng.permutation(E)[:K] for _ in range(ntokens)]).astype(np.int32) if ntokens else \
        np.zeros((0, K), np.int32)
    w = rng.uniform(0.1, 1.0, (ntokens, K)).astype(np.float32)
    return tokens, idx, w


def ntokens_of(rank, size):
    return 0 if size > 2 and rank == size - 1 else 5 + 3 * rank  # the last of 3+ ranks has none


def expert_fn(e, rows):
    return rows * np.float32(e + 1)  # exact in float32 and bf16 for these values' magnitudes


def layer(comm, dtype="float32", experts=E):
    """Experts dealt round-robin, so any rank count divides them."""
    return conflux.MoE(comm, experts, K, H, dtype=dtype, max_tokens_per_rank=64,
                       expert_to_rank=[e % comm.size for e in range(experts)])


def check(cond, what):
    if not cond:
        print("FAIL:", what, flush=True)
        sys.exit(1)


def reference_rows(comm, moe, convert=lambda x: x):
    rows = {e: [] for e in moe.local_experts}
    for s in range(comm.size):
        tokens, idx, _ = routing(s, ntokens_of(s, comm.size))
        for t in range(tokens.shape[0]):
            for e in idx[t]:
                if e in rows:
                    rows[e].append(convert(tokens[t]))
    return rows


def test_float32(comm):
    moe = layer(comm)
    tokens, idx, w = routing(comm.rank, ntokens_of(comm.rank, comm.size))
    d = moe.dispatch(tokens, idx, w)
    ref = reference_rows(comm, moe)
    for e, block in d.blocks():
        want = np.array(ref[e], np.float32).reshape(-1, H)
        check(block.shape == want.shape and np.array_equal(block, want), "float32 rows of expert %d" % e)
    out = np.concatenate([expert_fn(e, b) for e, b in d.blocks()]) if d.rows.shape[0] else d.rows.copy()
    y = moe.combine(d, out)
    want = np.zeros_like(tokens)
    for t in range(tokens.shape[0]):
        for j in range(K):
            want[t] += w[t, j] * expert_fn(idx[t, j], tokens[t])
    check(y.shape == tokens.shape and np.allclose(y, want, rtol=1e-6, atol=1e-6), "float32 combine")
    # A replay with new tokens follows the same routing.
    again = moe.replay(d, tokens * 2)
    check(np.array_equal(again, d.rows * 2), "replay")
    stats = d.stats()
    check(stats["committed_bytes"] <= 1.25 * max(stats["received_bytes"], 1) + 4096, "committed memory")


def test_bfloat16(comm):
    moe = layer(comm, "bfloat16")
    tokens, idx, w = routing(comm.rank, ntokens_of(comm.rank, comm.size))
    bits = (tokens.view(np.uint32) >> 16).astype(np.uint16)  # truncated to bf16: exact in both directions
    d = moe.dispatch(bits, idx, w)
    ref = reference_rows(comm, moe, lambda row: (row.view(np.uint32) >> 16).astype(np.uint16))
    for e, block in d.blocks():
        want = np.array(ref[e], np.uint16).reshape(-1, H)
        check(block.dtype == np.uint16 and np.array_equal(block, want), "bf16 rows of expert %d" % e)
    y = moe.combine(d, d.rows)  # identity experts
    as_float = (y.astype(np.uint32) << 16).view(np.float32)
    src = (bits.astype(np.uint32) << 16).view(np.float32)
    want = src * w.sum(axis=1, keepdims=True)
    check(np.allclose(as_float, want, rtol=1e-2, atol=1e-2), "bf16 combine")


def test_torch_autograd(comm):
    try:
        import torch
    except ImportError:
        print("torch not installed: autograd not tested")
        return
    moe = layer(comm)
    tokens, idx, w = routing(comm.rank, ntokens_of(comm.rank, comm.size))
    x = torch.tensor(tokens, requires_grad=True)
    wt = torch.tensor(w, requires_grad=True)
    d = moe.dispatch(x, torch.tensor(idx, dtype=torch.int64), wt)
    parts = [b * float(e + 1) for e, b in d.blocks()]
    out = torch.cat(parts) if parts else d.rows * 1.0
    y = moe.combine(d, out)
    g = torch.tensor(np.random.default_rng(7 + comm.rank).standard_normal(tokens.shape).astype(np.float32))
    (y * g).sum().backward()
    scale = (idx + 1).astype(np.float32)
    want_x = (w * scale).sum(axis=1, keepdims=True) * g.numpy()
    want_w = scale * (tokens * g.numpy()).sum(axis=1, keepdims=True)
    check(np.allclose(x.grad.numpy(), want_x, rtol=1e-5, atol=1e-5), "gradient of the tokens")
    check(np.allclose(wt.grad.numpy(), want_w, rtol=1e-5, atol=1e-5), "gradient of the weights")
    # bf16 tensors travel as their bits.
    moe16 = layer(comm, "bfloat16")
    xb = torch.tensor(tokens).to(torch.bfloat16)
    d16 = moe16.dispatch(xb, torch.tensor(idx), torch.tensor(w))
    check(d16.rows.dtype == torch.bfloat16, "bf16 tensor rows")
    y16 = moe16.combine(d16, d16.rows)
    check(torch.allclose(y16.float(), xb.float() * torch.tensor(w).sum(1, keepdim=True), rtol=2e-2, atol=2e-2),
          "bf16 tensor combine")


def test_bad_input(comm):
    moe = layer(comm)
    tokens, idx, w = routing(comm.rank, 4)
    bad = idx.copy()
    if comm.rank == 0:
        bad[2, 1] = E + 5
    try:
        moe.dispatch(tokens, bad, w)
        check(False, "an expert id out of range was accepted")
    except conflux.Error as e:
        check(comm.rank != 0 or "token 2" in str(e), "the error names the token: %s" % e)
    try:
        moe.dispatch(tokens[:, :H - 1].copy(), idx, w)
        check(False, "tokens of the wrong width were accepted")
    except conflux.Error as e:
        check("ntokens x hidden" in str(e), "shape error: %s" % e)
    try:
        layer(comm, experts=E + comm.rank % 2)
        check(comm.size == 1, "ranks disagreeing on the experts were accepted")
    except conflux.Error as e:
        check("differ" in str(e) or "disagree" in str(e) or "rank" in str(e), "mismatch error: %s" % e)


def main():
    comm = conflux.Comm.from_env()
    test_float32(comm)
    test_bfloat16(comm)
    test_torch_autograd(comm)
    test_bad_input(comm)
    comm.barrier()
    if comm.rank == 0:
        print("moe layer ok on %d ranks" % comm.size)


if __name__ == "__main__":
    main()
