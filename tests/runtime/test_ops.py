"""Every primitive and ops function, driven by OP_DB/FUNC_DB (tests/opinfo.py): values against
numpy in float32 and float64, gradients against central differences in float64, second
derivatives through create_graph; plus dtype promotion, Python operators and indexing."""
from __future__ import annotations

import numpy as np
import pytest
from fd import TOL, assert_close, numerical_vjp
from opinfo import FUNC_DB, OP_DB, Sample

import llgrad as lg
from llgrad.runtime.errors import DTypeError
from llgrad.runtime.tensor import Tensor

SPECS = [s for s in OP_DB + FUNC_DB if not s.structural]
DIFF = [s for s in SPECS if not s.nondiff and s.order >= 1]
DIFF2 = [s for s in SPECS if not s.nondiff and s.order >= 2]


def _ids(s):
    return s.name


def _tensors(sample: Sample, requires_grad=(), dtype=None):
    return [lg.tensor(a, requires_grad=i in requires_grad) if isinstance(a, np.ndarray) else a
            for i, a in enumerate(sample.args)]


def _outs(out):
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _wrt(spec, sample):
    if spec.wrt is not None:
        return spec.wrt
    return tuple(i for i, a in enumerate(sample.args)
                 if isinstance(a, np.ndarray) and a.dtype.kind == "f")


def _skip(spec, test):
    if test in spec.skips:
        pytest.skip(spec.skips[test])


# ---- values -------------------------------------------------------------------------------
@pytest.mark.parametrize("spec", SPECS, ids=_ids)
def test_value_matches_numpy(spec, float_dtype, rng):
    """Value and dtype equal numpy's on the same inputs: float32 stays float32."""
    _skip(spec, "value")
    if float_dtype not in [np.dtype(d) for d in spec.dtypes]:
        pytest.skip(f"{spec.name} is not defined for {float_dtype}")
    rtol, atol = spec.tol.get(float_dtype, TOL[float_dtype])
    for sample in spec.make_samples(rng, float_dtype):
        got = _outs(spec.op(*_tensors(sample), **sample.kwargs))
        want = _outs(spec.ref(*sample.args, **sample.kwargs))
        assert len(got) == len(want)
        for g, w in zip(got, want):
            w = np.asarray(w)
            assert isinstance(g, Tensor), f"{sample!r}: {type(g)}"
            assert g.dtype == w.dtype, f"{spec.name}({sample!r}): dtype {g.dtype}, numpy {w.dtype}"
            assert_close(g.detach().numpy(), w, rtol, atol, f"{spec.name}({sample!r})")


@pytest.mark.parametrize("spec", [s for s in SPECS if s.nondiff], ids=_ids)
def test_nondiff_outputs_carry_no_gradient(spec, rng):
    for sample in spec.make_samples(rng, np.float64):
        wrt = _wrt(spec, sample)
        out = _outs(spec.op(*_tensors(sample, wrt), **sample.kwargs))
        for o in out:
            assert not o.requires_grad and o.grad_fn is None and o.is_leaf


# ---- gradients ----------------------------------------------------------------------------
def _vjp(spec, sample, wrt, cotangents, create_graph=False):
    ts = _tensors(sample, wrt)
    outs = _outs(spec.op(*ts, **sample.kwargs))
    outs_g = [(o, v) for o, v in zip(outs, cotangents) if o.requires_grad]
    grads = lg.autograd.grad([o for o, _ in outs_g], [ts[i] for i in wrt],
                             [lg.tensor(v) for _, v in outs_g], create_graph=create_graph,
                             allow_unused=True)
    return ts, grads


def _ref_sum(spec, sample, cotangents):
    def f(*args):
        outs = _outs(spec.ref(*args, **sample.kwargs))
        return np.concatenate([np.asarray(o, np.float64).ravel() for o in outs])
    v = np.concatenate([np.ravel(c) for c in cotangents])
    return f, v


@pytest.mark.parametrize("spec", DIFF, ids=_ids)
def test_gradient_matches_finite_differences(spec, rng):
    """The vector-Jacobian product for a random cotangent equals central differences of numpy;
    gradients have the input's shape (broadcasting reduced) and dtype."""
    _skip(spec, "grad")
    for sample in spec.make_samples(rng, np.float64):
        wrt = _wrt(spec, sample)
        outs = _outs(spec.ref(*sample.args, **sample.kwargs))
        cot = [rng.standard_normal(np.shape(o)) for o in outs]
        ts, grads = _vjp(spec, sample, wrt, cot)
        f, v = _ref_sum(spec, sample, cot)
        expected = numerical_vjp(f, sample.args, v, wrt, eps=spec.fd_eps)
        for i, g, e in zip(wrt, grads, expected):
            if g is None:
                assert not np.any(e), f"no gradient for arg {i} of {spec.name}({sample!r})"
                continue
            assert g.shape == ts[i].shape and g.dtype == ts[i].dtype, (spec.name, sample)
            assert_close(g.numpy(), e, *spec.fd_tol, f"d{spec.name}/darg{i} at {sample!r}")


@pytest.mark.parametrize("spec", DIFF2, ids=_ids)
def test_second_derivative_matches_finite_differences(spec, rng):
    """grad(create_graph=True) is differentiable: the VJP of the gradient equals central
    differences of the (first-order) gradient."""
    _skip(spec, "gradgrad")
    for sample in spec.make_samples(rng, np.float64):
        wrt = _wrt(spec, sample)
        outs = _outs(spec.ref(*sample.args, **sample.kwargs))
        cot = [rng.standard_normal(np.shape(o)) for o in outs]
        ws = [rng.standard_normal(np.shape(sample.args[i])) for i in wrt]
        ts, grads = _vjp(spec, sample, wrt, cot, create_graph=True)
        live = [(g, w) for g, w in zip(grads, ws) if g is not None and g.requires_grad]
        if not live:
            continue  # gradient independent of the inputs (linear op): nothing to check
        total = sum((g * lg.tensor(w)).sum() for g, w in live)
        gg = lg.autograd.grad(total, [ts[i] for i in wrt], allow_unused=True)

        def first(*args):
            s = Sample(args, sample.kwargs)
            _, g1 = _vjp(spec, s, wrt, cot)
            return np.concatenate([(np.zeros(np.shape(args[i])) if g is None else g.numpy())
                                   .ravel() for i, g in zip(wrt, g1)])
        v = np.concatenate([w.ravel() for w in ws])
        expected = numerical_vjp(first, sample.args, v, wrt, eps=1e-5)
        for i, g, e in zip(wrt, gg, expected):
            g = np.zeros_like(e) if g is None else g.detach().numpy()
            assert_close(g, e, 1e-5, 1e-6, f"d2{spec.name}/darg{i}2 at {sample!r}")


@pytest.mark.parametrize("spec", [s for s in DIFF if np.float32 in s.dtypes], ids=_ids)
def test_float32_gradients_stay_float32(spec, rng):
    for sample in spec.make_samples(rng, np.float32)[:2]:
        wrt = _wrt(spec, sample)
        outs = _outs(spec.ref(*sample.args, **sample.kwargs))
        cot = [np.ones(np.shape(o), np.asarray(o).dtype) for o in outs]
        ts, grads = _vjp(spec, sample, wrt, cot)
        for i, g in zip(wrt, grads):
            if g is not None:
                assert g.dtype == ts[i].dtype, f"{spec.name}: grad {g.dtype} for {ts[i].dtype}"


@pytest.mark.parametrize("spec", [s for s in OP_DB if s.op is not None and s.name in (
    "add", "sub", "mul", "div", "neg", "pow", "exp", "log", "sin", "cos", "tanh", "sqrt", "abs",
    "maximum", "minimum", "where", "lt", "eq", "logical_and")], ids=_ids)
def test_numpy_functions_dispatch_to_llgrad(spec, rng):
    """np.exp(t), np.add(t, s), ... on Tensors give Tensors (with a graph)."""
    sample = spec.make_samples(rng, np.float64)[0]
    ts = _tensors(sample, _wrt(spec, sample) if not spec.nondiff else ())
    out = spec.ref(*ts, **sample.kwargs)
    assert isinstance(out, Tensor)
    assert_close(out.detach().numpy(), spec.ref(*sample.args), 1e-12, 1e-12, spec.name)
    assert out.requires_grad == (not spec.nondiff)


# ---- float32 arithmetic is carried out in float32 -----------------------------------------
def test_float32_arithmetic_rounds_like_float32():
    x = lg.tensor([1.0]) + 1e-8
    assert x.dtype == lg.float32 and x.item() == 1.0  # 1e-8 is below float32's resolution
    y = lg.tensor([1.0], dtype=lg.float64) + 1e-8
    assert y.item() != 1.0
    a = np.float32(0.1)
    t = lg.tensor([0.1]) * lg.tensor([3.0])
    assert t.numpy()[0] == a * np.float32(3.0)


def test_float32_backward_is_float32():
    x = lg.tensor([0.5, 1.5], requires_grad=True)
    (x.exp() * 3 + x.sin() / 2).sum().backward()
    assert x.grad.dtype == lg.float32
    np.testing.assert_allclose(x.grad.numpy(), np.exp([0.5, 1.5]) * 3 + np.cos([0.5, 1.5]) / 2,
                               rtol=1e-6)


# ---- dtype promotion (PyTorch's rules) ----------------------------------------------------
F32, F64, I64, B = lg.float32, lg.float64, lg.int64, lg.bool


@pytest.mark.parametrize("a, b, expected", [
    (lg.tensor([1, 2]), 1.5, F32),                      # int tensor + float scalar -> default
    (lg.tensor([1, 2]), 2, I64),
    (lg.tensor([1.0]), 2, F32),                         # Python scalars are weak
    (lg.tensor([1.0]), 2.5, F32),
    (lg.tensor([1.0], dtype=lg.float64), 2.5, F64),
    (lg.tensor([1, 2]), lg.tensor([1.0]), F32),         # int + float tensors -> float32
    (lg.tensor([1, 2]), lg.tensor([1.0], dtype=lg.float64), F64),
    (lg.tensor([1.0]), lg.tensor([1.0], dtype=lg.float64), F64),
    (lg.tensor([True]), lg.tensor([2]), I64),
    (lg.tensor([True]), 1.5, F32),
    (lg.tensor([True]), True, B),
    (lg.tensor([1.0]), np.float64(2.0), F32),           # numpy scalars are weak too
    (lg.tensor(2.0, dtype=lg.float64), lg.tensor([1.0]), F64),
], ids=lambda v: repr(v) if not isinstance(v, Tensor) else f"{v.dtype}{list(v.shape)}")
def test_promotion(a, b, expected):
    assert (a + b).dtype == expected
    assert (b + a).dtype == expected
    assert (a * b).dtype == expected


def test_true_division_of_ints_is_float32():
    assert (lg.tensor([1, 2]) / 2).dtype == F32
    assert (lg.tensor([1, 2]) / lg.tensor([2, 4])).dtype == F32
    np.testing.assert_array_equal((lg.tensor([1, 2]) / 2).numpy(), [0.5, 1.0])


def test_float_functions_of_ints_are_float32():
    for fn in (lg.exp, lg.sqrt, lg.sin, lg.sigmoid, lg.mean):
        assert fn(lg.tensor([1, 2])).dtype == F32, fn


def test_clamp_bounds_take_part_in_promotion():
    # PyTorch >= 1.13 (pytorch#77035): the bounds given promote; a missing one does not
    t = lg.tensor([1, 2, 3]).clamp(min=1.5)
    assert t.dtype == F32 and t.tolist() == [1.5, 2.0, 3.0]
    t = lg.tensor([1, 5]).clamp(max=3)  # one integer bound on ints (was an OverflowError)
    assert t.dtype == I64 and t.tolist() == [1, 3]
    assert lg.tensor([1.0]).clamp(0, lg.tensor(0.5, dtype=lg.float64)).dtype == F64


def test_bitwise_operators_on_integers_are_refused():
    # PyTorch computes & | ~ bitwise on integers (5 & 3 == 1); llgrad computed a logical and
    with pytest.raises(DTypeError, match=r"the operator & on int64: llgrad supports & on "
                       r"booleans only"):
        lg.tensor([5]) & 3
    with pytest.raises(DTypeError, match=r"operator \| on float32"):
        lg.tensor([True]) | lg.tensor([1.0])
    with pytest.raises(DTypeError, match="operator ~ on int64"):
        ~lg.tensor([1])
    assert (lg.tensor([True, False]) & True).tolist() == [True, False]


def test_sum_of_bool_and_int_is_int64():
    assert lg.tensor([True, False, True]).sum().dtype == I64
    assert lg.tensor([True, False, True]).sum().item() == 2


def test_comparisons_give_bool():
    assert (lg.tensor([1.0, 2.0]) > 1.5).dtype == B
    assert (lg.tensor([1, 2]) == 1).tolist() == [True, False]


def test_default_dtypes_of_factories():
    assert lg.tensor([1.0, 2.0]).dtype == F32
    assert lg.tensor(1.0).dtype == F32
    assert lg.tensor([1, 2]).dtype == I64
    assert lg.tensor([True]).dtype == B
    assert lg.tensor(np.array([1.0])).dtype == F64  # numpy arrays keep their dtype
    assert lg.zeros(2).dtype == lg.ones(2, 3).dtype == lg.rand(2).dtype == F32
    assert lg.arange(3).dtype == I64 and lg.arange(0.0, 1.0, 0.5).dtype == F32
    assert lg.tensor([1.0], dtype=lg.float64).dtype == F64
    assert lg.full((2,), 1.0).dtype == F32 and lg.full((2,), 1).dtype == I64


# ---- Python operators, reflected forms ----------------------------------------------------
_OPERATORS = [
    ("add", lambda a, b: a + b), ("sub", lambda a, b: a - b), ("mul", lambda a, b: a * b),
    ("truediv", lambda a, b: a / b), ("pow", lambda a, b: a ** b),
]


@pytest.mark.parametrize("name, fn", _OPERATORS, ids=[n for n, _ in _OPERATORS])
@pytest.mark.parametrize("scalar", [2, 1.5, np.float64(1.5)], ids=["int", "float", "np64"])
def test_operators_with_scalars_and_reflected(name, fn, scalar):
    x = np.array([0.5, 1.25, 2.0])
    t = lg.tensor(x, requires_grad=True)
    for out, ref in [(fn(t, scalar), fn(x, scalar)), (fn(scalar, t), fn(scalar, x))]:
        assert isinstance(out, Tensor) and out.dtype == F64 and out.requires_grad
        np.testing.assert_allclose(out.detach().numpy(), ref, rtol=1e-12)


def test_reflected_operators_with_numpy_arrays_give_tensors():
    t = lg.tensor([1.0, 2.0], requires_grad=True)
    a = np.array([3.0, 4.0], dtype=np.float32)
    for out in (a + t, a - t, a * t, a / t, a ** t, a @ t):
        assert isinstance(out, Tensor) and out.requires_grad, type(out)
    np.testing.assert_allclose((a - t).detach().numpy(), [2.0, 2.0])
    np.testing.assert_allclose((a @ t).item(), 11.0)


def test_unary_operators():
    t = lg.tensor([-1.5, 2.0], requires_grad=True)
    assert (-t).tolist() == [1.5, -2.0] and (-t).grad_fn.name() == "NegBackward0"
    assert (+t) is t
    assert abs(t).tolist() == [1.5, 2.0] and abs(t).grad_fn.name() == "AbsBackward0"
    m = lg.tensor([True, False])
    assert (~m).tolist() == [False, True]
    assert (m & lg.tensor([True, True])).tolist() == [True, False]
    assert (m | lg.tensor([False, True])).tolist() == [True, True]


@pytest.mark.parametrize("op, ref", [("<", np.less), ("<=", np.less_equal), (">", np.greater),
                                     (">=", np.greater_equal), ("==", np.equal),
                                     ("!=", np.not_equal)])
def test_comparison_operators_with_scalars(op, ref):
    x = np.array([1.0, 2.0, 3.0])
    t = lg.tensor(x, requires_grad=True)
    out = eval(f"t {op} 2")
    assert out.dtype == B and not out.requires_grad
    assert out.tolist() == ref(x, 2).tolist()
    rev = eval(f"2 {op} t")
    assert rev.tolist() == ref(2, x).tolist()


def test_matmul_operator_and_methods():
    a = lg.randn(3, 4, requires_grad=True)
    b = lg.randn(4, 2, requires_grad=True)
    c = a @ b
    assert c.grad_fn.name() == "MmBackward0" or c.grad_fn.name().endswith("Backward0")
    np.testing.assert_allclose(c.detach().numpy(), a.detach().numpy() @ b.detach().numpy(),
                               rtol=1e-5)
    assert a.mm(b).shape == a.matmul(b).shape == (3, 2)


# ---- broadcasting reduces gradients to the input shapes -----------------------------------
@pytest.mark.parametrize("sa, sb", [((3, 4), (4,)), ((3, 1), (1, 4)), ((), (2, 3)),
                                    ((2, 1, 4), (3, 1)), ((1,), (5,))])
def test_broadcast_gradients_are_reduced(sa, sb, rng):
    a = lg.tensor(rng.standard_normal(sa), requires_grad=True)
    b = lg.tensor(rng.standard_normal(sb), requires_grad=True)
    (a * b + a - b).sum().backward()
    assert a.grad.shape == tuple(sa) and b.grad.shape == tuple(sb)
    out_shape = np.broadcast_shapes(sa, sb)
    bb = np.broadcast_to(b.detach().numpy(), out_shape)
    aa = np.broadcast_to(a.detach().numpy(), out_shape)
    ga = (bb + 1).sum(axis=tuple(range(len(out_shape) - len(sa)))) if len(out_shape) > len(sa) \
        else bb + 1
    np.testing.assert_allclose(a.grad.numpy(), np.sum(ga, axis=tuple(
        i for i, d in enumerate(sa) if d == 1 and np.shape(ga)[i] != 1), keepdims=True).reshape(sa))
    assert np.isclose(b.grad.numpy().sum(), (aa - 1).sum())


# ---- indexing -------------------------------------------------------------------------------
def test_getitem_grad_accumulates_repeated_indices():
    x = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    x[lg.tensor([0, 2, 0, 0])].sum().backward()
    assert x.grad.tolist() == [3.0, 0.0, 1.0]


def test_getitem_with_tensor_index_and_bool_tensor_mask():
    x = lg.tensor([[1.0, -2.0], [3.0, -4.0]], requires_grad=True)
    y = x[x > 0]
    assert y.tolist() == [1.0, 3.0] and y.grad_fn.name() == "IndexBackward0"
    y.sum().backward()
    assert x.grad.tolist() == [[1.0, 0.0], [1.0, 0.0]]
    assert x[lg.tensor(1)].tolist() == [3.0, -4.0]


def test_getitem_basic_forms():
    x = lg.arange(24).reshape(2, 3, 4)
    n = np.arange(24).reshape(2, 3, 4)
    for key in [0, -1, (1, 2), (slice(None), 1), (Ellipsis, 0), (None, 0, Ellipsis),
                (0, slice(None, None, -1)), (slice(1, None), None, slice(0, 3, 2))]:
        np.testing.assert_array_equal(x[key].numpy(), n[key], err_msg=repr(key))


def test_setitem_functional_gradients():
    x = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
    v = lg.tensor(5.0, requires_grad=True)
    y = x * 1
    y[1] = v * 2
    assert y.tolist() == [1.0, 10.0, 3.0]
    (y * lg.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert x.grad.tolist() == [1.0, 0.0, 3.0]
    assert v.grad.item() == 4.0


def test_setitem_mask_and_slices():
    y = lg.zeros(2, 3)
    y[:, 1] = 1.0
    y[y == 0] = 2.0
    y[0, lg.tensor([0, 2])] = lg.tensor([7.0, 8.0])
    assert y.tolist() == [[7.0, 1.0, 8.0], [2.0, 1.0, 2.0]]


# ---- special cases the generic tests cannot pick --------------------------------------------
def test_max_ties_split_gradient_evenly():
    x = lg.tensor([1.0, 3.0, 3.0], requires_grad=True)
    x.max().backward()
    assert x.grad.tolist() == [0.0, 0.5, 0.5]
    y = lg.tensor([2.0, 2.0], requires_grad=True)
    lg.maximum(y, lg.tensor([2.0, 1.0])).sum().backward()
    assert y.grad.tolist() == [0.5, 1.0]


def test_prod_gradient_with_zeros():
    x = lg.tensor([2.0, 0.0, 3.0], requires_grad=True)
    x.prod().backward()
    assert x.grad.tolist() == [0.0, 6.0, 0.0]
    z = lg.tensor([0.0, 0.0, 3.0], requires_grad=True)
    z.prod().backward()
    assert z.grad.tolist() == [0.0, 0.0, 0.0]


def test_pow_gradient_at_zero_base_and_zero_exponent():
    x = lg.tensor([0.0, 2.0], requires_grad=True)
    (x ** 2).sum().backward()
    assert x.grad.tolist() == [0.0, 4.0]
    y = lg.tensor([0.0, 1.0], requires_grad=True)
    (y ** 0).sum().backward()
    assert y.grad.tolist() == [0.0, 0.0]
    e = lg.tensor([2.0], requires_grad=True)
    (lg.tensor([0.0]) ** e).sum().backward()
    assert e.grad.tolist() == [0.0]


def test_relu_and_abs_subgradient_at_zero_is_zero():
    x = lg.tensor([0.0], requires_grad=True)
    (x.relu() + abs(x)).sum().backward()
    assert x.grad.tolist() == [0.0]


def test_clamp_gradient_includes_bounds():
    x = lg.tensor([-1.0, -0.5, 0.0, 0.5, 1.0], requires_grad=True)
    x.clamp(-0.5, 0.5).sum().backward()
    assert x.grad.tolist() == [0.0, 1.0, 1.0, 1.0, 0.0]


def test_softmax_rows_sum_to_one_and_logsumexp_is_stable():
    x = lg.tensor([[1000.0, 1000.0], [-1000.0, 0.0]], dtype=lg.float64)
    np.testing.assert_allclose(x.softmax(dim=1).sum(1).numpy(), [1.0, 1.0])
    np.testing.assert_allclose(x.logsumexp(dim=1).numpy(), [1000.0 + np.log(2.0), 0.0])


def test_sigmoid_is_stable_for_large_inputs():
    x = lg.tensor([-1000.0, 1000.0], requires_grad=True)
    y = x.sigmoid()
    assert y.tolist() == [0.0, 1.0]
    y.sum().backward()
    assert x.grad.tolist() == [0.0, 0.0]


def test_split_and_chunk_gradients():
    x = lg.arange(6.0).requires_grad_()
    a, b = x.split([2, 4])
    (a.sum() * 2 + (b * b).sum()).backward()
    assert x.grad.tolist() == [2.0, 2.0, 4.0, 6.0, 8.0, 10.0]


def test_shape_errors_show_both_shapes():
    with pytest.raises(ValueError, match=r"\[3\] and \[4\]"):
        lg.ones(3) + lg.ones(4)
    with pytest.raises(ValueError, match=r"matmul: shapes \[2, 3\] and \[4, 5\]"):
        lg.ones(2, 3) @ lg.ones(4, 5)
    with pytest.raises(ValueError, match=r"cannot reshape"):
        lg.ones(6).reshape(4, 2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_where_selects_bits_exactly(dtype):
    # runtime/ops/elementwise.py _where_impl selects by bit masks: it must equal np.where bit
    # for bit (NaN, inf, -0.0), with y = +0.0 (a gradient's zeros: a path of its own) or not,
    # and with broadcast operands
    from llgrad.runtime.ops.elementwise import where_p
    x = np.array([[np.nan, -np.inf, -0.0, 1.5], [np.inf, -2.0, 0.0, np.nan]], dtype)
    c = np.array([[True, False, True, True], [False, True, True, False]])
    ints = np.int32 if dtype == np.float32 else np.int64
    for cond, a, b in [(c, x, np.zeros((), dtype)), (c, x, x[::-1]), (c, x, np.array(-0.0, dtype)),
                       (c[:1], x, np.zeros((), dtype)), (c, np.array(3.0, dtype), x),
                       (c[:, :1], x[0], np.zeros((2, 1), dtype))]:
        got = where_p.impl(cond, a, b)
        want = np.where(cond, a, b)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert (got.view(ints) == want.view(ints)).all()
