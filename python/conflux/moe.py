"""Mixture-of-Experts token dispatch and combine over a conflux communicator.

    import conflux, numpy as np
    comm = conflux.Comm.from_env()
    moe = conflux.MoE(comm, num_experts=8, top_k=2, hidden=512)   # collective
    d = moe.dispatch(tokens, topk_idx, topk_weights)  # tokens (n, 512), idx/weights (n, 2)
    outs = [expert[e](block) for e, block in d.blocks()]          # this rank's experts
    y = moe.combine(d, np.concatenate(outs))          # (n, 512): weighted sum, in token order

Tokens and outputs are numpy arrays or CPU torch tensors. The element type
is the layer's `dtype` ("float32", "bfloat16" or "float16"); bfloat16 numpy
data is held in uint16 arrays. With torch tensors, dispatch and combine are
autograd functions: the gradient of dispatch is a combine with unit weights
(each token gets the sum of its rows' gradients), that of combine is a
replay of the dispatch scaled by the weights, and the weights get the dot
product of each row with its token's gradient. A MoE layer therefore trains
end to end (examples/moe_train.py).

The counts travel with the tokens inside each call: no rank needs to know
what it will receive, and receive memory is sized to what arrives.
"""

import types

from . import _conflux

_DTYPES = {"float32": _conflux.FLOAT32, "bfloat16": _conflux.BFLOAT16, "float16": _conflux.FLOAT16}


def _torch():
    try:
        import torch
    except ImportError:
        return None
    return torch


def _is_tensor(x):
    t = _torch()
    return t is not None and isinstance(x, t.Tensor)


def _np():
    import numpy
    return numpy


class _Array:
    """A numpy view of a numpy array or CPU tensor (bf16 tensors as int16
    bits), and how to make new arrays of the same kind."""

    def __init__(self, x, what):
        if _is_tensor(x):
            torch = _torch()
            if x.device.type != "cpu":
                raise ValueError("conflux.MoE: %s must be a CPU tensor, got %s" % (what, x.device))
            self.tensor = x.detach().contiguous()
            self.np = self.tensor.view(torch.int16).numpy() if x.dtype == torch.bfloat16 else self.tensor.numpy()
        else:
            self.tensor = None
            self.np = _np().ascontiguousarray(x)

    def empty(self, shape):
        """A new array of this kind and element type, and its numpy view."""
        if self.tensor is not None:
            torch = _torch()
            t = torch.empty(shape, dtype=self.tensor.dtype)
            return t, (t.view(torch.int16).numpy() if t.dtype == torch.bfloat16 else t.numpy())
        a = _np().empty(shape, dtype=self.np.dtype)
        return a, a


def _index(x):
    if _is_tensor(x):
        return x.detach().to(_torch().int32).contiguous().numpy()
    return _np().ascontiguousarray(x, dtype=_np().int32)


def _weights(x):
    if x is None:
        return None
    if _is_tensor(x):
        return x.detach().to(_torch().float32).contiguous().numpy()
    return _np().ascontiguousarray(x, dtype=_np().float32)


class Dispatched:
    """One dispatch: this rank's expert rows and the routing that combine,
    the backward pass and replays reuse.

    rows               (rows, hidden): the local experts' tokens, expert by
                       expert in ascending id; inside a block in order of
                       (source rank, token index on the source)
    experts            this rank's expert ids, ascending
    tokens_per_expert  rows of each of them
    offsets            where each block starts (rows; blocks may be padded
                       to the layer's expert_alignment)
    """

    def __init__(self, moe, handle, rows, weights):
        self.moe = moe
        self.handle = handle
        self.rows = rows
        self.weights = weights  # the tensor given to dispatch (combine's gradient reaches it)
        self.experts = list(moe.local_experts)
        self.tokens_per_expert = list(handle.tokens_per_expert)
        self.offsets = list(handle.block_offsets())

    def blocks(self):
        """(expert id, its rows) for each local expert, as views of `rows`."""
        for e, start, n in zip(self.experts, self.offsets, self.tokens_per_expert):
            yield e, self.rows[start:start + n]

    def stats(self):
        """Bytes this rank sent and received in this routing's calls, and the receive memory committed."""
        return self.handle.stats()

    @property
    def dropped(self):
        """Token-expert pairs the capacity policy dropped (0 when dropless)."""
        return self.handle.dropped()


class MoE:
    """A MoE layer's communication: creating it is collective, and every
    rank must pass the same configuration (a rank that differs is named).

    num_experts, top_k   experts, and experts per token
    hidden               elements per token row
    dtype                "float32", "bfloat16" or "float16"
    max_tokens_per_rank  the most tokens one dispatch may carry
    expert_to_rank       rank of each expert (None: blocked, expert e on
                         rank e // (num_experts // size)); experts may repeat
                         a rank, so hot experts can share one
    capacity_factor      0: dropless; else each expert takes at most
                         capacity_factor * tokens * top_k / num_experts rows,
                         and the rest are dropped and counted (Dispatched.dropped)
    expert_alignment     pad each expert's block to a multiple of this many rows
    timeout              seconds per dispatch/combine (0: the communicator's)
    host_partial_sums    across hosts, combine adds each host's weighted rows
                         there and sends one partial per (token, host) back:
                         0 exact j-order sum (default), 1 partials in float32,
                         2 partials rounded to dtype (fewest bytes); only
                         combine() with the dispatch weights uses them
    """

    def __init__(self, comm, num_experts, top_k, hidden, dtype="float32", max_tokens_per_rank=4096,
                 expert_to_rank=None, capacity_factor=0.0, expert_alignment=0, timeout=0.0,
                 host_partial_sums=0):
        if dtype not in _DTYPES:
            raise ValueError("conflux.MoE: dtype must be one of %s, got %r" % (", ".join(_DTYPES), dtype))
        self.num_experts, self.top_k, self.hidden, self.dtype = num_experts, top_k, hidden, dtype
        self._m = _conflux._Moe(comm, num_experts, top_k, hidden, _DTYPES[dtype], max_tokens_per_rank,
                                None if expert_to_rank is None else [int(r) for r in expert_to_rank],
                                float(capacity_factor), int(expert_alignment), float(timeout),
                                int(host_partial_sums))

    @property
    def local_experts(self):
        """This rank's expert ids, ascending."""
        return self._m.local_experts

    # -- the collectives on numpy views ------------------------------------
    def _dispatch(self, tokens, topk_idx, topk_weights):
        t = _Array(tokens, "tokens")
        n = t.np.shape[0] if t.np.ndim else 0
        idx = _index(topk_idx)
        w = _weights(topk_weights)
        h = self._m.dispatch(t.np, n, idx, w)
        rows, view = t.empty((h.rows, self.hidden))
        h.copy_rows(view)
        return h, rows

    def _combine(self, h, expert_out, weights=None, ones=False):
        e = _Array(expert_out, "expert_out")
        out, view = e.empty((h.ntokens, self.hidden))
        self._m.combine(h, e.np, view, _weights(weights), ones)
        return out

    def _replay(self, h, tokens, scale_by_weights):
        t = _Array(tokens, "tokens")
        out, view = t.empty((h.rows, self.hidden))
        self._m.dispatch_replay(h, t.np, view, scale_by_weights)
        return out

    def _gather_rows(self, h, expert_out):
        e = _Array(expert_out, "expert_out")
        out, view = e.empty((h.ntokens, self.top_k, self.hidden))
        self._m.gather_rows(h, e.np, view)
        return out

    # -- the user's calls ----------------------------------------------------
    def dispatch(self, tokens, topk_idx, topk_weights=None):
        """Send each token (tokens[t], hidden elements) to the ranks of its
        top-k experts (topk_idx[t, :]); topk_weights[t, :] are kept for
        combine. Collective. Returns a Dispatched."""
        if _is_tensor(tokens) and _torch().is_grad_enabled() and (
                tokens.requires_grad or (topk_weights is not None and _is_tensor(topk_weights)
                                         and topk_weights.requires_grad)):
            holder = []
            rows = _autograd().Dispatch.apply(tokens, self, topk_idx, topk_weights, holder)
            return Dispatched(self, holder[0], rows, topk_weights)
        h, rows = self._dispatch(tokens, topk_idx, topk_weights)
        return Dispatched(self, h, rows, topk_weights)

    def combine(self, dispatched, expert_out):
        """The experts' rows (expert_out, laid out as dispatched.rows) back
        to their tokens' ranks, each token's rows weighted by its dispatch
        weights and summed in float, in token order. Collective."""
        w = dispatched.weights
        if _is_tensor(expert_out) and _torch().is_grad_enabled() and (
                expert_out.requires_grad or (_is_tensor(w) and w.requires_grad)):
            return _autograd().Combine.apply(expert_out, w, self, dispatched.handle)
        return self._combine(dispatched.handle, expert_out)

    def replay(self, dispatched, tokens, scale_by_weights=False):
        """New rows along the same routing (no layout is recomputed):
        returns rows shaped as dispatched.rows. Collective."""
        return self._replay(dispatched.handle, tokens, scale_by_weights)

    def gather_rows(self, dispatched, expert_out):
        """Each token's expert rows back unreduced: (ntokens, top_k, hidden)."""
        return self._gather_rows(dispatched.handle, expert_out)


_AUTOGRAD = None


def _autograd():
    """torch.autograd.Function pair, made on first use (torch is optional)."""
    global _AUTOGRAD
    if _AUTOGRAD is not None:
        return _AUTOGRAD
    torch = _torch()

    class Dispatch(torch.autograd.Function):
        @staticmethod
        def forward(ctx, tokens, moe, topk_idx, topk_weights, holder):
            h, rows = moe._dispatch(tokens, topk_idx, topk_weights)
            holder.append(h)
            ctx.moe, ctx.handle = moe, h
            return rows

        @staticmethod
        def backward(ctx, grad_rows):
            # d(rows)/d(tokens): every row is a copy of its token, so a token's
            # gradient is the sum of its rows' gradients.
            g = None
            if ctx.needs_input_grad[0]:
                g = ctx.moe._combine(ctx.handle, grad_rows.contiguous(), ones=True)
            return g, None, None, None, None

    class Combine(torch.autograd.Function):
        @staticmethod
        def forward(ctx, expert_out, weights, moe, handle):
            ctx.moe, ctx.handle = moe, handle
            ctx.save_for_backward(expert_out)
            ctx.weights_shape = None if weights is None else weights.shape
            return moe._combine(handle, expert_out)

        @staticmethod
        def backward(ctx, grad_out):
            (expert_out,) = ctx.saved_tensors
            g = grad_out.contiguous()
            grad_expert = grad_weights = None
            if ctx.needs_input_grad[0]:
                grad_expert = ctx.moe._replay(ctx.handle, g, scale_by_weights=True)
            if ctx.weights_shape is not None and ctx.needs_input_grad[1]:
                rows = ctx.moe._gather_rows(ctx.handle, expert_out.detach())
                grad_weights = (rows.float() * g.float().unsqueeze(1)).sum(-1).reshape(ctx.weights_shape)
            return grad_expert, grad_weights, None, None

    _AUTOGRAD = types.SimpleNamespace(Dispatch=Dispatch, Combine=Combine)
    return _AUTOGRAD
