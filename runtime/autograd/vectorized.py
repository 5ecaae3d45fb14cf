"""jacobian(vectorize=True): all rows of a Jacobian from one batched backward, where that is
provably the same as one backward per row (Note [Vectorized jacobian]); `BATCHED.on` is set
while the function runs on the batched inputs.
"""
from __future__ import annotations

import threading
import warnings

import numpy as np

# Note [Vectorized jacobian]
# vectorize=True runs `func` once more on inputs with a leading batch dimension of size N (the
# total number of output elements: copies of each input, as fresh leaves) and then makes ONE
# backward pass with a batch of one-hot grad_outputs (row k of the batch selects output element
# k), so gradient k of the batched inputs is row k of the Jacobian. That is only right when
# `func` treats the leading dimension as a batch (examples never mix), so before trusting it we
#  1. check every node of the batched graph: each primitive's `batch` rule (declared with it:
#     reductions and transposes that leave axis 0 alone, reshapes that keep it, matmul with a
#     batched left operand, ...) or, for elementwise ops, that their batched operands keep
#     axis 0 aligned; custom Functions and any other op reject;
#  2. check every batch slice of the batched outputs equals the unbatched outputs (this catches
#     mixing through detached values or Python control flow on concretised values).
# When a check fails (or the batched call raises) we fall back to one backward per row, with a
# warning naming the op, as PyTorch does when vmap lacks a batching rule. Residual risk: a
# function whose Python control flow depends on a batch-mixing concrete value yet returns equal
# values on both paths with different gradients would pass check 2.
BATCHED = threading.local()


def _shape(x, node):
    from llgrad.runtime.autograd.graph import SAME_AS_OUT, ShapeOnly
    if hasattr(x, "_data"):  # a saved input tensor (Note [Saved inputs])
        return x._data.shape
    if x is SAME_AS_OUT:
        return node.out_meta[0][0]
    if isinstance(x, ShapeOnly):
        return x.shape
    return np.shape(x)


def _uniform(x) -> bool:
    """An unbatched operand of the batch's shape is fine if the backward does not read it
    (ShapeOnly) or it is the same for every example (e.g. a ones cotangent)."""
    from llgrad.runtime.autograd.graph import ShapeOnly
    if isinstance(x, ShapeOnly):
        return True
    d = x._data if hasattr(x, "_data") else np.asarray(x)
    return bool(np.all(d == d[:1]))


def _elementwise_ok(b, shapes, outs, params, inputs):
    nd = len(outs[0])
    return all((len(s) == nd) if bk else (len(s) < nd or s[0] == 1 or _uniform(x))
               for bk, s, x in zip(b, shapes, inputs))


def _batch_safe(node, batched, n):
    """Whether `node` keeps batch examples apart; returns (ok, its outputs are batched)."""
    from llgrad.runtime.autograd.graph import AccumulateGrad, PrimNode
    if isinstance(node, AccumulateGrad):
        return True, id(node.variable) in batched
    flags = [nxt is not None and _batched_node(nxt, batched, n) for nxt, _ in node.next_functions]
    if not any(flags):
        return True, False
    if not isinstance(node, PrimNode):
        return False, True
    b = [False] * len(node.inputs)
    for pos, f in zip(node.edges, flags):
        b[pos] = f
    shapes = [_shape(x, node) for x in node.inputs]
    outs = [m[0] for m in node.out_meta]
    if any(not o or o[0] != n for o in outs) or any(bk and (not s or s[0] != n)
                                                    for bk, s in zip(b, shapes)):
        return False, True
    prim = node.prim
    if prim.family == "elementwise":
        return _elementwise_ok(b, shapes, outs, node.params, node.inputs), True
    return bool(prim.batch is not None and prim.batch(b, shapes, outs, node.params)), True


def _batched_node(node, batched, n):
    memo = batched["memo"]
    if node not in memo:
        ok, is_b = _batch_safe(node, batched, n)
        if not ok:
            raise _Unbatchable(node)
        memo[node] = is_b
    return memo[node]


class _Unbatchable(Exception):
    pass


def _check_batched_graph(outputs, leaves, n):
    import sys
    batched = {id(t): True for t in leaves if t.grad_fn is None}
    batched["memo"] = {t.grad_fn: True for t in leaves if t.grad_fn is not None}
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 20000))
    try:
        for o in outputs:
            if o.grad_fn is not None:
                _batched_node(o.grad_fn, batched, n)
    except _Unbatchable as e:
        node = e.args[0]
        return f"{node.name()}" + (f" (created at {node.loc})" if node.loc else "")
    finally:
        sys.setrecursionlimit(limit)
    return None


def _same_values(batched, single):
    # batched kernels (gemm vs gemv) may round differently: allow a few ulps
    tol = 64 * np.finfo(single.dtype).eps if single.dtype.kind == "f" else 0
    scale = float(np.max(np.abs(single), initial=0.0)) if single.size else 0.0
    return bool(np.allclose(batched, np.broadcast_to(single, batched.shape), rtol=tol,
                            atol=tol * scale, equal_nan=True))


def vectorized_jacobian(func, inputs, outputs, create_graph):
    """See Note [Vectorized jacobian]. Returns the Jacobian tuples, or None to fall back."""
    from llgrad.runtime import ops
    from llgrad.runtime.autograd import grad
    from llgrad.runtime.tensor import Tensor
    numels = [o.numel() for o in outputs]
    n = sum(numels)
    if n == 0 or not any(o.requires_grad for o in outputs):
        return None
    if create_graph and any(i.grad_fn is not None for i in inputs):
        # batched copies that stay connected to the caller's graph (their nodes are the
        # batch sources for the check)
        leaves = tuple(ops.broadcast_to(ops.unsqueeze(i, 0), (n,) + tuple(i.shape)) * 1
                       for i in inputs)
    else:
        leaves = tuple(Tensor._wrap(np.ascontiguousarray(
            np.broadcast_to(i._data, (n,) + i._data.shape))).requires_grad_(i.requires_grad)
            for i in inputs)
    reason = None
    prev = getattr(BATCHED, "on", False)
    BATCHED.on = True
    try:
        bouts = func(*leaves)
    except Exception as e:  # func is not batch-polymorphic
        reason = f"calling the function on batched inputs raised {type(e).__name__}: {e}"
    finally:
        BATCHED.on = prev
    if reason is None:
        bouts = bouts if isinstance(bouts, tuple) else (bouts,)
        if len(bouts) != len(outputs) or any(
                not isinstance(b, Tensor) or tuple(b.shape) != (n,) + tuple(o.shape)
                for b, o in zip(bouts, outputs)):
            reason = "the function does not treat a leading dimension as a batch"
        elif any(not _same_values(b._data, o._data) for b, o in zip(bouts, outputs)):
            reason = "batch examples mix (outputs of the batched call differ per example)"
        else:
            bad = _check_batched_graph(bouts, leaves, n)
            if bad is not None:
                reason = f"{bad} has no batching rule or mixes the batch dimension"
    if reason is not None:
        warnings.warn(f"jacobian(vectorize=True): falling back to one backward per row: "
                      f"{reason}.", UserWarning, stacklevel=3)
        return None
    # one-hot rows: row k of the batch selects element k of the concatenated flat outputs
    eye = np.eye(n)
    gos, start = [], 0
    for b, o, m in zip(bouts, outputs, numels):
        gos.append(Tensor._wrap(eye[:, start:start + m].reshape(b.shape).astype(b._data.dtype)))
        start += m
    diff = [k for k, leaf in enumerate(leaves) if leaf.requires_grad]
    pairs = [(b, g) for b, g in zip(bouts, gos) if b.requires_grad]
    gs = grad(tuple(p[0] for p in pairs), tuple(leaves[k] for k in diff),
              tuple(p[1] for p in pairs), allow_unused=True, create_graph=create_graph)
    per_input = [None] * len(inputs)
    for k, g in zip(diff, gs):
        per_input[k] = g
    jac = []
    for o, m, off in zip(outputs, numels, np.cumsum([0] + numels[:-1])):
        row = []
        for g, inp in zip(per_input, inputs):
            shape = tuple(o.shape) + tuple(inp.shape)
            if g is None:
                row.append(Tensor._wrap(np.zeros(shape, inp._data.dtype)))
            else:
                row.append(ops.reshape(g[int(off):int(off) + m], shape))
        jac.append(tuple(row))
    return tuple(jac)
