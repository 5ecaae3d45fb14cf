"""Compiled code computes in the dtypes numpy does (NEP 50; Note [Two promotion rules] in
runtime/promotion.py): a table of expression templates x operand kinds (float32/float64/
int64/bool arrays, 0-d arrays, numpy scalars, Python numbers, the counter of a staged loop),
each compared with plain numpy for the result's dtype, its Python type (a Python number stays
one: `i * 0.1` is a Python float) and its value to a few ulps of that dtype, natively and in
the interpreter. What numpy refuses (or computes in float16/int8) llgrad refuses at its line.

Speed: the accepted cases go into a few generated functions (the counter cases into loop
bodies), traced once each for both modes; see DIRECT_CHUNKS for what runs natively.
"""
from __future__ import annotations

import importlib.util
import itertools
import math  # noqa: F401  (templates use math.*)
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime.aval import SUPPORTED
from llgrad.runtime.errors import LLGradError
from llgrad.tracer.tracing import UnrollWarning

MASK = np.array([True, False, True])
OPERANDS = {  # name -> value; every operand is an argument of the generated functions
    "f32": np.array([0.25, 0.7, 1.3], np.float32), "f64": np.array([0.25, 0.7, 1.3]),
    "i64": np.array([1, 2, 3]), "b": np.array([True, True, True]),
    "f32_0d": np.array(0.35, np.float32), "f64_0d": np.array(0.35), "i64_0d": np.array(2),
    "np_f32": np.float32(1.1), "np_f64": np.float64(1.1), "np_i64": np.int64(3),
    "np_b": np.bool_(True), "py_f": 1.1, "py_i": 3, "py_b": True,
}
COUNTER = "i"  # the counter of `for i in range(1, 3)`, staged; its last value is 2
BINARY = ["{a} + {b}", "{a} - {b}", "{a} * {b}", "{a} / {b}", "{a} // {b}", "{a} % {b}",
          "{a} ** {b}", "{a} < {b}", "{a} == {b}", "np.maximum({a}, {b})", "np.add({a}, {b})",
          "np.true_divide({a}, {b})", "np.power({a}, {b})", "np.where(MASK, {a}, {b})",
          "np.clip({a}, 0, {b})"]
UNARY = ["-{a}", "abs({a})", "np.sin({a})", "np.exp({a})", "np.sqrt({a})", "np.fabs({a})",
         "np.square({a})", "np.floor({a})", "np.sign({a})", "np.sum({a})", "np.mean({a})",
         "np.prod({a})", "np.max({a})", "np.var({a})", "np.logical_not({a})", "{a} * 0.1",
         "{a} + 1", "{a} / 3", "np.where(MASK, {a}, 0.5)", "np.where(MASK, 1.1, {a})",
         "math.sin({a})", "math.pow({a}, 2)", "np.stack([{a}, {a}])"]
ARGS = list(OPERANDS)
STATIC = {"np_i64", "np_b", "py_i", "py_b"}  # constants of the trace (the rest is traced)


def _cases(names, must=None):
    """Every template over `names` with a traced operand; with `must`, only the cases using
    that operand (expressions of constants alone are plain Python: nothing to compare)."""
    for t in BINARY:
        for a, b in itertools.product(names, repeat=2):
            if (must is None or must in (a, b)) and not {a, b} <= STATIC:
                yield t.format(a=a, b=b)
    for t in UNARY:
        for a in names:
            if (must is None or must == a) and a not in STATIC:
                yield t.format(a=a)


DIRECT = list(_cases(ARGS))
# numpy's `bool_array ** 2` takes np.square's int8 loop (ndarray.__pow__'s shortcut for the
# exponent 2); llgrad computes np.power's int64, the same numbers (README, Limitations).
COUNTED = [e for e in _cases(ARGS + [COUNTER], must=COUNTER) if e != "b ** i"]


def _reference(expr, counter=None):
    """numpy's result, or the exception numpy raises (float16/int8 results count as one)."""
    env = dict(OPERANDS, np=np, math=math, MASK=MASK, i=counter)
    try:
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = eval(expr, env)
    except Exception as e:  # noqa: BLE001 - any refusal by numpy/Python
        return None, e
    if np.asarray(r).dtype not in SUPPORTED:
        return None, TypeError(f"numpy computes this in {np.asarray(r).dtype}")
    return r, None


def _split(exprs, counter=None):
    ok, refused = [], []
    for e in exprs:
        r, err = _reference(e, counter)
        if err is None:
            ok.append((e, r))
        else:
            refused.append((e, err))
    return ok, refused


DIRECT_OK, DIRECT_REFUSED = _split(DIRECT)
COUNTED_OK, COUNTED_REFUSED = _split(COUNTED, counter=2)  # (numpy refuses none of these)
SIG = ", ".join(ARGS)
# LLVM's time grows faster than linearly with a function's size: the table is cut into
# chunks, each a sample across all templates (case k goes to chunk k % n). The interpreter
# runs every chunk, native code the first NATIVE of them (a quarter of the cases, the same
# primitives and dtype combinations).
DIRECT_CHUNKS = [DIRECT_OK[j::12] for j in range(12)]
COUNTED_CHUNKS = [COUNTED_OK[j::4] for j in range(4)]
NATIVE = {"direct": 3, "counted": 2}


def _program() -> str:
    lines = ["import math", "import numpy as np", "from tests.e2e.test_dtypes import MASK"]
    for j, chunk in enumerate(DIRECT_CHUNKS):
        lines += [f"def direct{j}({SIG}):", "    return ("]
        lines += [f"        {e}," for e, _ in chunk] + ["    )"]
    for j, chunk in enumerate(COUNTED_CHUNKS):
        lines += [f"def counted{j}(x, {SIG}):", "    t = x[0]", "    for i in range(1, 3):",
                  "        t = t + 1.0"]
        lines += [f"        r{k} = {e}" for k, (e, _) in enumerate(chunk)]
        lines += [f"    return (t, {', '.join(f'r{k}' for k in range(len(chunk)))})"]
    for k, (e, _) in enumerate(DIRECT_REFUSED):
        lines += [f"def refused{k}({SIG}):", f"    return {e}"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def program(tmp_path_factory):
    """The generated functions as a module with a source file (llgrad reads the source)."""
    path = tmp_path_factory.mktemp("dtypes") / "dtype_table.py"
    path.write_text(_program())
    spec = importlib.util.spec_from_file_location("dtype_table", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


_COMPILED: dict = {}


def _run(fn, *args):
    """The compiled call (one trace per function, shared by the interpreter and native runs);
    a loop that had to be unrolled would hide the staged counter, so it is an error."""
    d = _COMPILED.get(fn.__name__)
    if d is None:
        d = _COMPILED[fn.__name__] = llgrad.differentiate(fn)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnrollWarning)
        return d(*args)


def _expected_type(ref):
    """The Python type a compiled result has: numpy's, except that float64 scalars come back
    as Python floats and 0-d arrays as numpy scalars."""
    if isinstance(ref, np.ndarray):
        return np.ndarray if ref.ndim else (float if ref.dtype == np.float64 else ref.dtype.type)
    return float if type(ref) is np.float64 else type(ref)


def _compare(exprs, results, refs, where):
    bad = []
    for e, got, ref in zip(exprs, results, refs):
        dt = np.asarray(ref).dtype
        if np.asarray(got).dtype != dt or type(got) is not _expected_type(ref):
            bad.append(f"{e}: {type(got).__name__} {np.asarray(got).dtype}, numpy gives "
                       f"{type(ref).__name__} {dt}")
            continue
        tol = 8 * np.finfo(dt).eps if dt.kind == "f" else 0
        if not np.allclose(got, ref, rtol=tol, atol=tol, equal_nan=True):
            bad.append(f"{e}: {got!r} != numpy's {ref!r}")
    assert not bad, f"{where}: {len(bad)} of {len(exprs)} cases differ:\n" + "\n".join(bad)


def test_table_is_broad():
    """The table covers every operand kind with accepted and refused cases."""
    assert len(DIRECT_OK) > 2000 and len(COUNTED_OK) > 300 and len(DIRECT_REFUSED) > 30
    assert not COUNTED_REFUSED


def test_expressions_match_numpy(program, mode):
    chunks = DIRECT_CHUNKS[:NATIVE["direct"]] if mode == "native" else DIRECT_CHUNKS
    for j, chunk in enumerate(chunks):
        got = _run(getattr(program, f"direct{j}"), *OPERANDS.values())
        _compare([e for e, _ in chunk], got, [r for _, r in chunk], f"{mode}, chunk {j}")


def test_loop_counter_expressions_match_python(program, mode):
    """The counter of a staged loop is a Python int: `i * 0.1` is a Python float, so
    `x_f32 * (i * 0.1)` stays float32, while `np.sin(i)` is a numpy float64."""
    x = np.array([0.5, 1.0])
    chunks = COUNTED_CHUNKS[:NATIVE["counted"]] if mode == "native" else COUNTED_CHUNKS
    for j, chunk in enumerate(chunks):
        fn = getattr(program, f"counted{j}")
        got, ref = _run(fn, x, *OPERANDS.values()), fn(x, *OPERANDS.values())
        assert got[0] == ref[0] == 2.5
        _compare([e for e, _ in chunk], got[1:], list(ref[1:]), f"{mode}, chunk {j}")


def test_what_numpy_refuses_llgrad_refuses(program):
    """With an llgrad error at the user's line (a DTypeError naming numpy's rule), or the
    exception Python raises (math.sin of an array)."""
    missed = []
    for k, (e, numpy_error) in enumerate(DIRECT_REFUSED):
        try:
            with warnings.catch_warnings(), np.errstate(all="ignore"):
                warnings.simplefilter("ignore")
                llgrad.differentiate(getattr(program, f"refused{k}")).inspect(
                    *OPERANDS.values())
        except LLGradError as err:
            if err.loc is None or err.loc.function != f"refused{k}":
                missed.append(f"{e}: {err!r} does not name the user's line")
        except Exception as err:  # noqa: BLE001
            if type(err) is not type(numpy_error):
                missed.append(f"{e}: {err!r}, numpy raises {numpy_error!r}")
        else:
            missed.append(f"{e}: compiled, numpy refuses it ({numpy_error!r})")
    assert not missed, "\n".join(missed)


# ---- the issue's reproductions and the cases around them ----------------------------------
def counter_scaled(x):
    acc = 0.0
    for i in range(x.shape[0]):
        acc += x[i] * (i * 0.1)  # `i * 0.1` is a Python float: float64 precision, weak
    return acc


def sin_sum(x):
    return np.sum(np.sin(x))


def where_constants(x):
    return np.sum(np.where(x > 1, 1.1, 0.9) * x)


def rows_from_python_zero(x):
    acc = 0.0
    for row in x:  # staged at once: `acc` is a Python float carried into the loop
        acc = acc + row
    return acc


def python_float_carried(x):
    acc = 0.0
    for row in x:
        acc = acc + 0.1  # stays a Python float, so `acc * x[0]` keeps x's dtype
    return acc * x[0]


def count_rows(x):
    n = 0
    for row in x:
        n = n + 1
    return n * x[0] + n


def branch_number_or_element(x):
    acc = x[0] * 0.0
    for i in range(x.shape[0]):
        if x[i] > 0.5:  # float64 on both paths (was float32 on one: a counter times 0.1)
            y = i * 0.1
        else:
            y = x[i]
        acc = acc + y
    return acc


def counter_as_float(x):
    acc = x[0]
    for i in range(x.shape[0]):
        acc = acc + float(i) * x[i] + math.sin(i)  # no concretisation: the loop stays staged
    return acc


def counter_bools(x):
    acc = x[0] * 0
    for i in range(x.shape[0]):
        acc = acc + ((i > 0) + (i > 1)) * x[i]  # Python: bool + bool is an int
    return acc


def scalar_arguments(x, a, b, k):
    return np.sum(x * a) + x[0] * b + np.sum(x * k)


X32 = np.array([0.1, 0.7, 1.3], np.float32)
X64 = np.array([0.1, 0.7, 1.3])
XI = np.array([1, 2, 3])


@pytest.mark.parametrize("fn, args", [
    (counter_scaled, (X64,)), (counter_scaled, (X32,)), (sin_sum, (XI,)),
    (where_constants, (X64,)), (where_constants, (XI,)), (rows_from_python_zero, (X32,)),
    (python_float_carried, (X32,)), (count_rows, (X32,)), (branch_number_or_element, (X64,)),
    (branch_number_or_element, (X32,)), (counter_as_float, (X32,)), (counter_bools, (X64,)),
    (scalar_arguments, (X32, 0.1, np.float64(0.1), 3)),
    (scalar_arguments, (X64, np.float32(0.1), 0.1, True)),
], ids=lambda v: getattr(v, "__name__", None) or (str(np.asarray(v).dtype)
                                                   if isinstance(v, np.ndarray) else None))
def test_value_and_dtype_as_python(fn, args, mode):
    got = _run(fn, *args)
    _compare([fn.__name__], [got], [fn(*args)], mode)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_issue_repro_gradient_is_the_python_number(dtype, mode):
    """d/dx[i] of sum x[i] * (i * 0.1) is the Python float i * 0.1 (0.30000000000000004 at
    i = 3), in x's dtype; computed in float32 it was 0.30000001."""
    x = np.arange(1.0, 5.0).astype(dtype)
    g = llgrad.differentiate(counter_scaled).grad(x)
    assert g.dtype == dtype
    np.testing.assert_array_equal(g, np.array([i * 0.1 for i in range(4)], dtype))


def test_gradients_have_the_arguments_types():
    f = llgrad.differentiate(scalar_arguments, wrt=(0, 1, 2))
    for x, a, b in [(X32, 0.5, np.float32(0.5)), (X64, np.float64(0.5), 0.5)]:
        gx, ga, gb = f.grad(x, a, b, 2)
        assert type(gx) is np.ndarray and gx.dtype == x.dtype
        for g, arg in ((ga, a), (gb, b)):  # float64 scalars come back as Python floats
            assert type(g) is (float if np.asarray(arg).dtype == np.float64 else type(arg))
        np.testing.assert_allclose(ga, np.sum(x), rtol=1e-6)


def int_power(x):
    return np.sum(x ** -1)


def float_range(x, n):
    acc = x[0]
    for i in range(n):
        acc = acc + x[i]
    return acc


def counter_power(x):
    acc = x[0]
    for i in range(x.shape[0]):
        acc = acc + i ** (i - 1) * x[i]
    return acc


def bool_sin(x):
    return np.sum(np.sin(x > 1))


def bool_floordiv(x):
    return np.sum((x > 1) // (x > 2))


def invert_python_bool(x):
    acc = x[0]
    for i in range(x.shape[0]):
        acc = acc + (~(i > 1)) * x[i]
    return acc


def int_and(x):
    return np.sum(x & 1)


@pytest.mark.parametrize("fn, args, match", [
    (int_power, (XI,), "integers to negative integer powers are not allowed"),
    (float_range, (X64, 2.0), r"range\(\) bounds must be integers, got a traced f64\[\]"),
    (counter_power, (X64,), r"\*\* of two Python ints computed while tracing"),
    (bool_sin, (X64,), r"np.sin of bool computes in float16 \(numpy's rule\), which llgrad "
                       r"does not support"),
    (bool_floordiv, (X64,), r"np.floor_divide of bool, bool computes in int8"),
    (invert_python_bool, (X64,), r"the operator ~ on a Python bool"),
    (int_and, (XI,), r"the operator & on int64: llgrad supports & on booleans only"),
], ids=lambda v: getattr(v, "__name__", None))
def test_refused_with_the_users_line(fn, args, match):
    with pytest.raises(LLGradError, match=match) as info:
        llgrad.differentiate(fn)(*args)
    assert info.value.loc is not None and info.value.loc.function == fn.__name__
