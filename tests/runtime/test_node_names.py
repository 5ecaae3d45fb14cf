"""Eager graphs have PyTorch's shape: one node per user-facing op, named as PyTorch names it
(`x.mean()` is MeanBackward0 over AccumulateGrad, not DivBackward0 over SumBackward1). The
composites behind them (mean, var, std, softmax, log_softmax, square, rsqrt, vector_norm,
mse_loss, nll_loss) are one eager node each and decompose for the compiler; their impl computes what the
decomposition computes, and compiled code agrees with eager."""
from __future__ import annotations

import numpy as np
import pytest

import llgrad as lg
from llgrad.runtime.prim import REGISTRY
from llgrad.runtime.tensor import Tensor

# (expression, PyTorch's grad_fn name, PyTorch's next_functions names). Checked against
# torch 2.13.0+cpu (torch prints AccumulateGrad as torch::autograd::AccumulateGrad).
CASES = [
    ("x.mean()", "MeanBackward0", ["AccumulateGrad"]),
    ("x.mean(1)", "MeanBackward1", ["AccumulateGrad"]),
    ("x.mean(1, keepdim=True)", "MeanBackward1", ["AccumulateGrad"]),
    ("x.var()", "VarBackward0", ["AccumulateGrad"]),
    ("x.var(1)", "VarBackward0", ["AccumulateGrad"]),
    ("x.var(correction=0)", "VarBackward0", ["AccumulateGrad"]),
    ("x.std()", "StdBackward0", ["AccumulateGrad"]),
    ("x.std(1)", "StdBackward0", ["AccumulateGrad"]),
    ("x.softmax(1)", "SoftmaxBackward0", ["AccumulateGrad"]),
    ("x.log_softmax(1)", "LogSoftmaxBackward0", ["AccumulateGrad"]),
    ("x.logsumexp(1)", "LogsumexpBackward0", ["AccumulateGrad"]),
    ("x.sum()", "SumBackward0", ["AccumulateGrad"]),
    ("x.sum(1)", "SumBackward1", ["AccumulateGrad"]),
    ("x.square()", "PowBackward0", ["AccumulateGrad"]),
    ("x.rsqrt()", "RsqrtBackward0", ["AccumulateGrad"]),
    ("x.norm()", "LinalgVectorNormBackward0", ["AccumulateGrad"]),
    ("x.norm(dim=1)", "LinalgVectorNormBackward0", ["AccumulateGrad"]),
    ("x.norm(p=1)", "LinalgVectorNormBackward0", ["AccumulateGrad"]),
    ("lg.norm(x)", "LinalgVectorNormBackward0", ["AccumulateGrad"]),
    ("lg.linalg.vector_norm(x)", "LinalgVectorNormBackward0", ["AccumulateGrad"]),
    ("lg.linalg.vector_norm(x, 1)", "LinalgVectorNormBackward0", ["AccumulateGrad"]),
    ("lg.linalg.vector_norm(x, float('inf'))", "LinalgVectorNormBackward0",
     ["AccumulateGrad"]),
    # Losses (torch 2.13 too): one node each; a target that needs no gradient is a None edge,
    # as in PyTorch; nll_loss's target and weight get no edge at all.
    ("lg.nn.functional.mse_loss(x, x.detach() * 2)", "MseLossBackward0",
     ["AccumulateGrad", None]),
    ("lg.nn.functional.mse_loss(x, x.detach() * 2, reduction='sum')", "MseLossBackward0",
     ["AccumulateGrad", None]),
    ("lg.nn.functional.mse_loss(x, x.detach() * 2, reduction='none')", "MseLossBackward0",
     ["AccumulateGrad", None]),
    ("lg.nn.functional.mse_loss(x, x * 2)", "MseLossBackward0",
     ["AccumulateGrad", "MulBackward0"]),
    ("lg.nn.functional.mse_loss(x, lg.tensor([1.0, 2.0, 3.0, 4.0], dtype=x.dtype))",
     "MseLossBackward0", ["AccumulateGrad", None]),
    ("lg.nn.MSELoss()(x, x.detach())", "MseLossBackward0", ["AccumulateGrad", None]),
    ("lg.nn.functional.nll_loss(x, lg.tensor([0, 1, 2]))", "NllLossBackward0",
     ["AccumulateGrad"]),
    ("lg.nn.functional.nll_loss(x, lg.tensor([0, 1, 2]), reduction='sum')", "NllLossBackward0",
     ["AccumulateGrad"]),
    ("lg.nn.functional.nll_loss(x, lg.tensor([0, 1, 2]), reduction='none')",
     "NllLossBackward0", ["AccumulateGrad"]),
    ("lg.nn.functional.nll_loss(x, lg.tensor([0, -100, 3]), "
     "weight=lg.tensor([1.0, 2.0, 3.0, 4.0], dtype=x.dtype))", "NllLossBackward0",
     ["AccumulateGrad"]),
    ("lg.nn.functional.nll_loss(x.log_softmax(1), lg.tensor([0, 1, 2]))", "NllLossBackward0",
     ["LogSoftmaxBackward0"]),
    ("lg.nn.NLLLoss()(x, lg.tensor([0, 1, 2]))", "NllLossBackward0", ["AccumulateGrad"]),
    ("lg.nn.functional.cross_entropy(x, lg.tensor([0, 1, 2]))", "NllLossBackward0",
     ["LogSoftmaxBackward0"]),
    ("lg.nn.functional.cross_entropy(x, lg.tensor([0, 1, 2]), reduction='none')",
     "NllLossBackward0", ["LogSoftmaxBackward0"]),
    ("lg.nn.functional.cross_entropy(x, lg.tensor([0, 1, 3]), ignore_index=3, "
     "reduction='sum')", "NllLossBackward0", ["LogSoftmaxBackward0"]),
    ("lg.nn.CrossEntropyLoss()(x, lg.tensor([0, 1, 2]))", "NllLossBackward0",
     ["LogSoftmaxBackward0"]),
    # scans, sorting and structure (torch 2.13 too)
    ("lg.cumsum(x, 1)", "CumsumBackward0", ["AccumulateGrad"]),
    ("x.cumprod(0)", "CumprodBackward0", ["AccumulateGrad"]),
    ("lg.cummax(x, 1).values", "CummaxBackward0", ["AccumulateGrad"]),
    ("x.cummin(0).values", "CumminBackward0", ["AccumulateGrad"]),
    ("lg.sort(x, 1).values", "SortBackward0", ["AccumulateGrad"]),
    ("x.sort(0, descending=True).values", "SortBackward0", ["AccumulateGrad"]),
    ("lg.flip(x, [0])", "FlipBackward0", ["AccumulateGrad"]),
    ("lg.roll(x, 1, 1)", "RollBackward0", ["AccumulateGrad"]),
    ("lg.tril(x)", "TrilBackward0", ["AccumulateGrad"]),
    ("x.triu(1)", "TriuBackward0", ["AccumulateGrad"]),
    ("lg.diagonal(x, 1)", "DiagonalBackward0", ["AccumulateGrad"]),
    ("lg.trace(x)", "TraceBackward0", ["AccumulateGrad"]),
    ("lg.nn.functional.pad(x, (1, 2))", "ConstantPadNdBackward0", ["AccumulateGrad"]),
    ("lg.take_along_dim(x, lg.tensor([[0], [1], [2]]), 1)", "GatherBackward0",
     ["AccumulateGrad"]),
    ("lg.cross(x, x * 2, dim=0)", "LinalgCrossBackward0", ["AccumulateGrad", "MulBackward0"]),
    # overloads: which operands are Python numbers (torch 2.13 too)
    ("x ** 2", "PowBackward0", ["AccumulateGrad"]),
    ("x ** x", "PowBackward1", ["AccumulateGrad", "AccumulateGrad"]),
    ("2 ** x", "PowBackward2", ["AccumulateGrad"]),
    ("x ** lg.tensor(2.0, dtype=x.dtype)", "PowBackward1", ["AccumulateGrad", None]),
    ("x % 2", "RemainderBackward0", ["AccumulateGrad"]),
    ("x % x", "RemainderBackward1", ["AccumulateGrad", "AccumulateGrad"]),
    ("x.fmod(2)", "FmodBackward0", ["AccumulateGrad"]),
    ("x.fmod(x)", "FmodBackward1", ["AccumulateGrad", "AccumulateGrad"]),
    ("x.log1p()", "Log1PBackward0", ["AccumulateGrad"]),
    ("x.prod()", "ProdBackward0", ["AccumulateGrad"]),
    ("x.prod(1)", "ProdBackward1", ["AccumulateGrad"]),
    # indexing and views: named after the method (torch 2.13 too)
    ("x[0]", "SelectBackward0", ["AccumulateGrad"]),
    ("x[:, 1]", "SelectBackward0", ["AccumulateGrad"]),
    ("x[1:]", "SliceBackward0", ["AccumulateGrad"]),
    ("x[None]", "UnsqueezeBackward0", ["AccumulateGrad"]),
    ("x[[0, 2]]", "IndexBackward0", ["AccumulateGrad"]),
    ("x.select(1, 0)", "SelectBackward0", ["AccumulateGrad"]),
    ("lg.select(x, 0, -1)", "SelectBackward0", ["AccumulateGrad"]),
    ("x.narrow(1, 1, 2)", "SliceBackward0", ["AccumulateGrad"]),
    ("x.t()", "TBackward0", ["AccumulateGrad"]),
    ("x.T", "PermuteBackward0", ["AccumulateGrad"]),
    ("x.mT", "TransposeBackward0", ["AccumulateGrad"]),
    ("x.transpose(0, 1)", "TransposeBackward0", ["AccumulateGrad"]),
    ("lg.transpose(x, 0, 1)", "TransposeBackward0", ["AccumulateGrad"]),
    ("x.swapaxes(0, 1)", "TransposeBackward0", ["AccumulateGrad"]),
    ("x.permute(1, 0)", "PermuteBackward0", ["AccumulateGrad"]),
    ("x.unsqueeze(0)", "UnsqueezeBackward0", ["AccumulateGrad"]),
    ("lg.unsqueeze(x, 1)", "UnsqueezeBackward0", ["AccumulateGrad"]),
    ("x.reshape(3, 1, 4).squeeze()", "SqueezeBackward0", ["ViewBackward0"]),
    ("lg.squeeze(x.reshape(3, 1, 4))", "SqueezeBackward0", ["ViewBackward0"]),
    ("x.reshape(3, 1, 4).squeeze(1)", "SqueezeBackward1", ["ViewBackward0"]),
    ("x.reshape(3, 1, 4).squeeze((1,))", "SqueezeBackward2", ["ViewBackward0"]),
    # gather/scatter along a dim, topk, addmm, F.linear (torch 2.13 too)
    ("x.topk(2).values", "TopkBackward0", ["AccumulateGrad"]),
    ("lg.topk(x, 2, 0).values", "TopkBackward0", ["AccumulateGrad"]),
    ("x.gather(1, lg.tensor([[0], [1], [2]]))", "GatherBackward0", ["AccumulateGrad"]),
    ("lg.gather(x, 0, lg.tensor([[2, 0, 1, 1]]))", "GatherBackward0", ["AccumulateGrad"]),
    ("x.scatter(1, lg.tensor([[0], [1], [2]]), x[:, :1] * 2)", "ScatterBackward0",
     ["AccumulateGrad", "MulBackward0"]),
    ("x.scatter(1, lg.tensor([[0], [1], [2]]), 1.5)", "ScatterBackward1", ["AccumulateGrad"]),
    ("lg.scatter(x, 1, lg.tensor([[0], [1], [2]]), value=1.5)", "ScatterBackward1",
     ["AccumulateGrad"]),
    ("x.scatter_add(1, lg.tensor([[0], [1], [2]]), x[:, :1] * 2)", "ScatterAddBackward0",
     ["AccumulateGrad", "MulBackward0"]),
    ("lg.scatter_add(x, 0, lg.tensor([[0, 1, 2, 0]]), x[:1] * 2)", "ScatterAddBackward0",
     ["AccumulateGrad", "MulBackward0"]),
    ("x.index_select(0, lg.tensor([0, 2]))", "IndexSelectBackward0", ["AccumulateGrad"]),
    ("lg.index_select(x, 1, lg.tensor([3]))", "IndexSelectBackward0", ["AccumulateGrad"]),
    ("lg.addmm(x[0], x.T, x)", "AddmmBackward0",
     ["SelectBackward0", "PermuteBackward0", "AccumulateGrad"]),
    ("lg.nn.functional.linear(x, x[:2], x[0, :2])", "AddmmBackward0",
     ["SliceBackward0", "AccumulateGrad", "TBackward0"]),
    ("lg.nn.functional.linear(x.reshape(2, 3, 2), x[:2, :2], x[0, :2])", "ViewBackward0",
     ["AddmmBackward0"]),
    ("lg.nn.functional.linear(x[0], x[:2], x[1, :2])", "ViewBackward0", ["AddmmBackward0"]),
    ("lg.nn.functional.linear(x, x[:2])", "MmBackward0", ["AccumulateGrad", "TBackward0"]),
    # functions PyTorch names after themselves where llgrad composes primitives (torch 2.13)
    ("1.0 - x", "RsubBackward1", ["AccumulateGrad"]),
    ("x.max()", "MaxBackward1", ["AccumulateGrad"]),
    ("lg.max(x)", "MaxBackward1", ["AccumulateGrad"]),
    ("x.max(1).values", "MaxBackward0", ["AccumulateGrad"]),
    ("x.min()", "MinBackward1", ["AccumulateGrad"]),
    ("lg.min(x, 0)[0]", "MinBackward0", ["AccumulateGrad"]),
    ("x.amax(1)", "AmaxBackward0", ["AccumulateGrad"]),
    ("x.chunk(2, 1)[1]", "SplitBackward0", ["AccumulateGrad"]),
    ("lg.chunk(x, 3)[0]", "SplitBackward0", ["AccumulateGrad"]),
    ("x.split(2, 1)[0]", "SplitBackward0", ["AccumulateGrad"]),
    ("lg.split(x, [1, 2])[1]", "SplitWithSizesBackward0", ["AccumulateGrad"]),
    ("x.unbind(1)[2]", "UnbindBackward0", ["AccumulateGrad"]),
    ("lg.unbind(x)[0]", "UnbindBackward0", ["AccumulateGrad"]),
    ("x.repeat(2, 1)", "RepeatBackward0", ["ExpandBackward0"]),
    ("x.reciprocal()", "ReciprocalBackward0", ["AccumulateGrad"]),
    ("lg.reciprocal(x)", "ReciprocalBackward0", ["AccumulateGrad"]),
    ("lg.bmm(x[None], x.T[None])", "BmmBackward0", ["UnsqueezeBackward0", "UnsqueezeBackward0"]),
    ("x[None].bmm(x.T[None])", "BmmBackward0", ["UnsqueezeBackward0", "UnsqueezeBackward0"]),
]


@pytest.mark.parametrize("expr,name,nexts", CASES, ids=[c[0] for c in CASES])
def test_grad_fn_names_match_pytorch(expr, name, nexts):
    x = lg.tensor(np.random.default_rng(0).random((3, 4)) + 0.5, requires_grad=True)
    y = eval(expr, {"lg": lg, "x": x})
    assert y.grad_fn.name() == type(y.grad_fn).__name__ == name
    assert isinstance(y.grad_fn, lg.autograd.graph.Node)
    assert f"<{name} object" in repr(y.grad_fn)
    assert [None if n is None else type(n).__name__ for n, _ in y.grad_fn.next_functions] == \
        [None if n is None else n.name() for n, _ in y.grad_fn.next_functions] == nexts
    assert all(i == 0 for _, i in y.grad_fn.next_functions)
    if nexts == ["AccumulateGrad"]:
        assert y.grad_fn.next_functions[0][0].variable is x


def test_stack_is_named_as_pytorch():
    # torch.stack is one node over its inputs; llgrad's is the concatenation of their views,
    # named StackBackward0 (its next_functions are the views' nodes, not the inputs')
    x = lg.ones(2, 3, requires_grad=True)
    for y in (lg.stack([x, x * 2]), lg.stack([x, x], dim=-1)):
        assert type(y.grad_fn).__name__ == y.grad_fn.name() == "StackBackward0"
    y = lg.stack([x, x * 2], 1)
    y.backward(lg.ones(2, 2, 3))
    assert x.grad.tolist() == [[3.0] * 3] * 2


def test_one_class_per_name():
    """Node classes are made once per PyTorch name and shared: by every node of a primitive,
    and by the primitives PyTorch names alike (square and pow are PowBackward0)."""
    from llgrad.runtime.autograd.graph import AccumulateGrad, Node, PrimNode
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    a, b, c = x.exp(), (x * 3).exp(), x.square()
    assert type(a.grad_fn) is type(b.grad_fn)
    assert type(c.grad_fn) is type((x ** 2).grad_fn) is not type(a.grad_fn)
    assert issubclass(type(a.grad_fn), PrimNode) and issubclass(PrimNode, Node)
    assert type(x.sum().grad_fn).__name__ == "SumBackward0"
    assert type(x.reshape(2, 1).sum(1).grad_fn).__name__ == "SumBackward1"
    acc = a.grad_fn.next_functions[0][0]
    assert type(acc) is AccumulateGrad and type(acc).__name__ == acc.name() == "AccumulateGrad"
    # a multi-result primitive's node is one too (torch 2.13: LinalgEighBackward0)
    m = lg.tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
    assert type(lg.linalg.eigh(m).eigenvalues.grad_fn).__name__ == "LinalgEighBackward0"


def test_masked_fill_is_named_as_pytorch():
    # torch 2.13: MaskedFillBackward0, whose only edge is x's (the mask needs no gradient)
    x = lg.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    for y in (x.masked_fill(x > 2, 0.0), lg.masked_fill(x, x > 2, 0.0)):
        assert type(y.grad_fn).__name__ == "MaskedFillBackward0"
        assert len(y.grad_fn.next_functions) == 1
        assert y.grad_fn.next_functions[0][0].variable is x
    y = x.clone()
    y.masked_fill_(y > 2, 0.0)
    assert y.tolist() == [[1.0, 2.0], [0.0, 0.0]]


def test_where_has_edges_for_its_operands_only():
    # torch 2.13: WhereBackward0 with one edge per operand, none for the condition; changing
    # the condition in place after the forward does not change the gradient
    x = lg.tensor([1.0, -2.0, 3.0], requires_grad=True)
    z = lg.tensor([5.0, 6.0, 7.0], requires_grad=True)
    for y in (lg.where(x > 0, x, z * 2), x.where(x > 0, z * 2)):
        assert [type(n).__name__ for n, _ in y.grad_fn.next_functions] == \
            ["AccumulateGrad", "MulBackward0"]
    c = x > 0
    y = lg.where(c, x, z)
    c.copy_(lg.tensor([False, True, False]))
    assert c.tolist() == [False, True, False]
    y.backward(lg.tensor([1.0, 10.0, 100.0]))
    assert x.grad.tolist() == [1.0, 0.0, 100.0] and z.grad.tolist() == [0.0, 10.0, 0.0]


# linear algebra (torch 2.13 too), on a square matrix `a`; (expression, name, next names,
# output numbers of the next edges)
LINALG = [
    ("lg.linalg.cholesky(a)", "LinalgCholeskyExBackward0", ["AccumulateGrad"], [0]),
    ("lg.linalg.inv(a)", "LinalgInvExBackward0", ["AccumulateGrad"], [0]),
    ("lg.linalg.solve(a, a * 2)", "LinalgSolveExBackward0", ["AccumulateGrad", "MulBackward0"],
     [0, 0]),
    ("lg.linalg.det(a)", "LinalgDetBackward0", ["AccumulateGrad"], [0]),
    ("lg.linalg.slogdet(a).logabsdet", "LinalgSlogdetBackward0", ["AccumulateGrad"], [0]),
    ("lg.linalg.eigh(a).eigenvalues", "LinalgEighBackward0", ["AccumulateGrad"], [0]),
    ("lg.linalg.eigh(a).eigenvectors", "LinalgEighBackward0", ["AccumulateGrad"], [0]),
    ("lg.linalg.eigvalsh(a)", "LinalgEighBackward0", ["AccumulateGrad"], [0]),
    ("lg.linalg.svd(a).S", "LinalgSvdBackward0", ["AccumulateGrad"], [0]),
    ("lg.linalg.svdvals(a)", "LinalgSvdBackward0", ["AccumulateGrad"], [0]),
    ("lg.linalg.qr(a).Q", "LinalgQrBackward0", ["AccumulateGrad"], [0]),
    ("lg.linalg.solve_triangular(a, a * 2, upper=False)", "LinalgSolveTriangularBackward0",
     ["AccumulateGrad", "MulBackward0"], [0, 0]),
    ("lg.cholesky_solve(a * 2, a)", "CholeskySolveBackward0",
     ["MulBackward0", "AccumulateGrad"], [0, 0]),
    ("lg.linalg.matrix_power(a, 3)", "MmBackward0", ["MmBackward0", "AccumulateGrad"], [0, 0]),
    ("lg.linalg.matrix_power(a, -2)", "MmBackward0",
     ["LinalgInvExBackward0", "LinalgInvExBackward0"], [0, 0]),
    ("lg.linalg.matrix_norm(a)", "LinalgVectorNormBackward0", ["AccumulateGrad"], [0]),
    # torch: SumBackward1 (a dim was given); a sum to 0-d is SumBackward0 here (_variant in
    # runtime/ops/reduce.py cannot tell)
    ("lg.linalg.matrix_norm(a, 'nuc')", "SumBackward0", ["LinalgSvdBackward0"], [1]),
    ("lg.linalg.matrix_norm(a, 2)", "AmaxBackward0", ["LinalgSvdBackward0"], [1]),
    ("lg.linalg.matrix_norm(a, -2)", "AminBackward0", ["LinalgSvdBackward0"], [1]),
    ("lg.linalg.matrix_norm(a, 1)", "AmaxBackward0", ["LinalgVectorNormBackward0"], [0]),
    ("lg.linalg.matrix_norm(a, float('inf'))", "AmaxBackward0", ["LinalgVectorNormBackward0"],
     [0]),
    ("lg.linalg.norm(a)", "LinalgVectorNormBackward0", ["AccumulateGrad"], [0]),
    ("lg.linalg.norm(a, 2)", "AmaxBackward0", ["LinalgSvdBackward0"], [1]),
]


@pytest.mark.parametrize("expr,name,nexts,nrs", LINALG, ids=[c[0] for c in LINALG])
def test_linalg_grad_fn_names_match_pytorch(expr, name, nexts, nrs):
    a = lg.tensor(np.random.default_rng(0).random((3, 3)) + 3 * np.eye(3), requires_grad=True)
    y = eval(expr, {"lg": lg, "a": a})
    assert y.grad_fn.name() == name
    assert [None if n is None else n.name() for n, _ in y.grad_fn.next_functions] == nexts
    assert [i for _, i in y.grad_fn.next_functions] == nrs


def test_diag_of_a_vector_is_diag_embed():
    v = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)  # torch 2.13: DiagEmbedBackward0
    y = lg.diag(v, 1)
    assert y.grad_fn.name() == "DiagEmbedBackward0"
    assert y.grad_fn.next_functions[0][0].variable is v


def test_cross_entropy_goes_through_log_softmax():
    # PyTorch: NllLossBackward0 -> LogSoftmaxBackward0 -> AccumulateGrad, nothing else.
    x = lg.tensor(np.random.default_rng(0).random((3, 4)), requires_grad=True)
    y = lg.nn.functional.cross_entropy(x, lg.tensor([0, 1, 2]))
    seen, todo = [], [y.grad_fn]
    while todo:
        n = todo.pop()
        seen.append(n.name())
        todo += [m for m, _ in n.next_functions if m is not None]
    assert seen == ["NllLossBackward0", "LogSoftmaxBackward0", "AccumulateGrad"]


def test_names_survive_backward():
    x = lg.tensor([1.0, 2.0], requires_grad=True)
    y = x.mean()
    y.backward()
    assert y.grad_fn.name() == "MeanBackward0"
    assert x.grad.tolist() == [0.5, 0.5]


COMPOSITES = ["mean", "var", "std", "softmax", "log_softmax", "square", "rsqrt", "vector_norm",
              "mse_loss", "nll_loss"]
PARAMS = {
    "mean": [{"axes": (0, 1), "keepdims": False}, {"axes": (1,), "keepdims": True}],
    "var": [{"axes": (0, 1), "correction": 1, "keepdims": False},
            {"axes": (0,), "correction": 0, "keepdims": True}],
    "softmax": [{"axes": (1,)}, {"axes": (0,)}],
    "square": [{}], "rsqrt": [{}],
    "vector_norm": [{"ord": o, "axes": a, "keepdims": False}
                    for o in (2.0, 1.0, 3.0, np.inf, -np.inf, 0.0) for a in ((0, 1), (1,))],
}
PARAMS["std"], PARAMS["log_softmax"] = PARAMS["var"], PARAMS["softmax"]
REDUCTIONS = ("mean", "sum", "none")


def _nll_args(x, target, weight):
    w = np.asarray(weight, x.dtype)
    return (x, np.asarray(target, np.int64), w), float(w.sum())


def _loss_calls(name, x):
    """(all inputs, params) of the losses' calls: targets (broadcast too), row weights (0 for
    an ignored row) and inputs of shape (N, C), (N, C, d) and (C,)."""
    if name == "mse_loss":
        return [((x, t), {"reduction": r}) for t in (x[::-1] * 0.5, x[0] * 0.5, x[0, 0])
                for r in REDUCTIONS]
    calls = []
    for args, total in (_nll_args(x, [0, 3, 1], [1.0, 0.0, 0.5]),
                        _nll_args(x.reshape(3, 2, 2), [0, 1, 1, 1, 0, 0], [1.0] * 6),
                        _nll_args(x[1], [2], [0.25])):
        calls += [(args, {"reduction": r, "total_weight": total}) for r in REDUCTIONS]
    return calls


@pytest.mark.parametrize("name", COMPOSITES)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_impl_computes_the_decomposition(name, dtype):
    """Eager (impl) and compiled (decompose) give the same numbers, bit for bit."""
    prim = REGISTRY[name]
    x = np.random.default_rng(1).random((3, 4)).astype(dtype) + 0.5
    calls = _loss_calls(name, x) if name in ("mse_loss", "nll_loss") else [
        ((x,), params) for params in PARAMS[name]]
    for args, params in calls:
        got = np.asarray(prim.impl(*args, **params))
        want = prim.decompose(*[lg.tensor(a) if a.dtype.kind == "f" else a for a in args],
                              **params).numpy()
        assert got.dtype == want.dtype == dtype and got.shape == want.shape, params
        np.testing.assert_array_equal(got, want, err_msg=f"{name}{params}")


# A compiled function using each op; the compiler sees the decomposition, eager the primitive.
FUNCS = {
    "mean": lambda x: np.mean(x, axis=1),
    "var": lambda x: np.var(x, axis=0, ddof=1),
    "std": lambda x: np.std(x),
    "softmax": lambda x: lg.softmax(x, 1),
    "log_softmax": lambda x: lg.log_softmax(x, 0),
    "square": lambda x: np.square(x),
    "rsqrt": lambda x: lg.rsqrt(x),
    "norm": lambda x: lg.linalg.vector_norm(x, 2, 1),
    "norm3": lambda x: lg.linalg.vector_norm(x, 3),
    "mse_loss": lambda x: lg.nn.functional.mse_loss(x, np.full((3, 4), 0.75)),
    "mse_loss_none": lambda x: lg.nn.functional.mse_loss(x, np.arange(4.0), reduction="none"),
    "nll_loss": lambda x: lg.nn.functional.nll_loss(x, np.array([0, 3, -100]),
                                                    weight=np.array([1.0, 2.0, 3.0, 4.0])),
    "nll_loss_none": lambda x: lg.nn.functional.nll_loss(x, np.array([2, 1, 0]),
                                                         reduction="none"),
    "cross_entropy": lambda x: lg.nn.functional.cross_entropy(x, np.array([1, 3, 0])),
}


@pytest.mark.parametrize("name", sorted(FUNCS))
def test_compiled_agrees_with_eager(name):
    fn = FUNCS[name]
    rng = np.random.default_rng(2)
    x = rng.random((3, 4)) + 0.5
    w = rng.standard_normal(np.shape(fn(lg.tensor(x)).numpy()))

    def loss(x):
        return np.sum(fn(x) * w)

    compiled = lg.differentiate(loss)
    value, grad = compiled.value_and_grad(x)
    t = lg.tensor(x, requires_grad=True)
    out = (fn(t) * lg.tensor(w)).sum()
    out.backward()
    np.testing.assert_allclose(value, out.item(), rtol=1e-12)
    np.testing.assert_allclose(grad, t.grad.numpy(), rtol=1e-10, atol=1e-12)
    assert isinstance(t.grad, Tensor)


def test_square_and_norm_follow_pytorch_semantics():
    # torch 2.13: bool.square() is int64; norm's default p='fro' is the 2-norm over all dims;
    # a tuple dim and ord=0 (the count of non-zeros) are vector norms too.
    assert lg.tensor([True, False]).square().tolist() == [1, 0]
    assert lg.tensor([True, False]).square().dtype == lg.int64
    x = lg.tensor([[1.0, 2.0], [3.0, 4.0]], dtype=lg.float64)
    assert x.norm().item() == pytest.approx(30 ** 0.5)
    assert lg.norm(x, dim=(0, 1)).item() == pytest.approx(30 ** 0.5)
    assert x.norm(p=1, dim=0, keepdim=True).tolist() == [[4.0, 6.0]]
    assert lg.linalg.vector_norm(x - 1, 0).item() == 3.0
    with pytest.raises(NotImplementedError, match="only vector norms"):
        x.norm(p="nuc")


@pytest.mark.parametrize("ord", [2.0, 3.0])
def test_norm_gradient_at_zero_is_zero_compiled_and_eager(ord):
    # PyTorch's norm_backward gives 0 where the norm is 0; the compiled decomposition must not
    # give 0 * inf = nan there, and nan inputs must still give nan.
    def loss(x, y):
        return lg.linalg.vector_norm(x, ord) + np.sum(y * y)

    f = lg.differentiate(loss, wrt=(0, 1))
    value, (gx, gy) = f.value_and_grad(np.zeros(3), np.ones(2))
    t = lg.tensor(np.zeros(3), requires_grad=True)
    lg.linalg.vector_norm(t, ord).backward()
    assert value == 2.0 and gx.tolist() == [0.0] * 3 == t.grad.tolist()
    assert gy.tolist() == [2.0, 2.0]
    assert np.isnan(f(np.array([np.nan, 1.0, 0.0]), np.ones(2)))
