"""Python containers in staged loops (issue 12): lists appended to become list buffers, list
and dict entries and attributes become loop state (Note [Containers in staged loops] in
tracer/effects.py); what cannot be staged unrolls with a warning or is refused, never a
silent difference from Python (Note [Python effects in staged code])."""
from __future__ import annotations

import dataclasses
import inspect
import warnings

import numpy as np
import pytest

import llgrad
from llgrad.runtime.errors import DynamicPathWarning, LLGradError, UnsupportedError
from llgrad.tracer.effects import TracePrintWarning
from llgrad.tracer.tracing import UnrollWarning
from tests.fd import numerical_grad_tree

RNG = np.random.default_rng(12)


def _check(fn, *args, wrt=0, unrolls=False):
    """Value as plain Python gives it, gradient as central differences; no loop unrolled."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore" if unrolls else "error", UnrollWarning)
        d = llgrad.differentiate(fn, wrt=wrt)
        value, grad = d.value_and_grad(*args)
    assert value == pytest.approx(fn(*args), rel=1e-11)
    wrts = wrt if isinstance(wrt, tuple) else (wrt,)
    grads = grad if isinstance(wrt, tuple) else (grad,)
    for k, g in zip(wrts, grads):
        want = numerical_grad_tree(fn, args, k)
        for a, b in zip(_leaves(g), _leaves(want)):
            np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-8)
    return d


def _leaves(tree):
    from llgrad.runtime import pytree
    return pytree.tree_leaves(tree)


def _ops(d, *args, which="forward"):
    fn = getattr(d.inspect(*args)._c, which)
    counts: dict = {}
    for op in fn.walk():
        counts[op.prim.name] = counts.get(op.prim.name, 0) + 1
    return counts


# ---- the programs of issue 12 (tests/corpus in branch `corpus`) --------------------------
def rnn_list_append(W, U, V, xs, ys):
    """A tanh RNN collecting its per-step predictions in a list, then np.stack."""
    h = np.zeros((xs.shape[1], W.shape[0]))
    preds = []
    for t in range(xs.shape[0]):
        h = np.tanh(h @ W + xs[t] @ U)
        preds.append(h @ V)
    return np.mean((np.stack(preds) - ys) ** 2)


def _rnn_args(T, H=6, B=3, D=2, O=2):
    r = np.random.default_rng(T)
    return (0.3 * r.standard_normal((H, H)), 0.3 * r.standard_normal((D, H)),
            0.3 * r.standard_normal((H, O)), r.standard_normal((T, B, D)),
            r.standard_normal((T, B, O)))


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_two_layers(layers, xs):
    """A two-layer LSTM written with lists of per-layer states updated by index."""
    T, B, _ = xs.shape
    H = layers[0][1].shape[0]
    hidden = [np.zeros((B, H)) for _ in layers]
    cell = [np.zeros((B, H)) for _ in layers]
    for t in range(T):
        inp = xs[t]
        for i, (Wx, Wh, b) in enumerate(layers):
            gates = inp @ Wx + hidden[i] @ Wh + b
            ingate = _sigmoid(gates[:, :H])
            forget = _sigmoid(gates[:, H:2 * H])
            change = np.tanh(gates[:, 2 * H:3 * H])
            outgate = _sigmoid(gates[:, 3 * H:])
            cell[i] = cell[i] * forget + ingate * change
            hidden[i] = outgate * np.tanh(cell[i])
            inp = hidden[i]
    return np.sum(hidden[-1] ** 2)


def _lstm_args(T, H=3, D=2):
    r = np.random.default_rng(T)
    layers = [(0.3 * r.standard_normal((D if k == 0 else H, 4 * H)),
               0.3 * r.standard_normal((H, 4 * H)), 0.1 * r.standard_normal(4 * H))
              for k in range(2)]
    return layers, r.standard_normal((T, 2, D))


def test_rnn_with_list_append(mode):
    _check(rnn_list_append, *_rnn_args(5), wrt=(0, 1, 2))


def test_lstm_with_lists_of_layer_states(mode):
    _check(lstm_two_layers, *_lstm_args(4), wrt=(0, 1))


@pytest.mark.parametrize("fn, make", [(rnn_list_append, _rnn_args),
                                      (lstm_two_layers, _lstm_args)],
                         ids=["rnn", "lstm"])
def test_one_loop_whatever_the_trip_count(fn, make, monkeypatch):
    """The IR holds one loop, not T copies of the body: the same ops at T = 5 and T = 40,
    forward and joint (np.stack of the buffer's rows is the buffer: no concatenate)."""
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    d = llgrad.differentiate(fn)
    for which in ("forward", "joint"):
        small, big = _ops(d, *make(5), which=which), _ops(d, *make(40), which=which)
        assert small == big, which
    assert small.get("concatenate", 0) == 0
    assert _ops(d, *make(5))["for_loop"] == 1


# ---- what a loop may do with a list or dict ------------------------------------------------
def append_then_reduce(x):
    outs = []
    for i in range(x.shape[0]):
        outs.append(np.sin(x[i]) * x)
    total = sum(outs) + np.array(outs)[1]
    for o in outs:  # iterating over the list after the loop
        total = total + o ** 2
    return np.sum(total) + np.sum(np.concatenate(outs)) + len(outs) + np.sum(outs[-1])


def append_records(x):
    pairs = []
    h = x * 0.0
    for t in range(1, x.shape[0], 2):  # a range with a start and a step
        h = np.tanh(h + x[t])
        pairs.append((h, np.sum(h) * x[t - 1]))
    return np.sum(np.stack([p[0] for p in pairs])) + sum(p[1] for p in pairs)


def append_rows_of_array(x):
    outs = []
    for row in x:  # rows of a traced array
        outs.append(np.exp(row) * 0.5)
    return np.sum(np.stack(outs) ** 2)


def carries_last_item(x):
    hs = [x[0] * 0.0]
    for i in range(x.shape[0]):
        hs.append(np.tanh(hs[-1] * 0.9 + x[i]))
    return np.sum(np.stack(hs) ** 2)


def nested_lists(x):
    rows = []
    for i in range(x.shape[0]):
        row = []
        for j in range(x.shape[1]):
            row.append(np.sin(x[i, j]) * x[i, 0])
        rows.append(np.stack(row))
    return np.sum(np.stack(rows) ** 2)


def dict_entries(x):
    d = {"h": x * 0.0, "steps": 0}
    for i in range(4):
        d["h"] = np.sin(d["h"] + x)
        d["steps"] += 1
        d["last"] = d["h"] * 2.0  # a key first set in the body
    return np.sum(d["h"] * d["last"]) * d["steps"]


@dataclasses.dataclass
class Model:
    h: np.ndarray
    n: int = 0


def _step(m, x):
    m.h = np.tanh(m.h + x)  # an attribute set in a helper
    m.n += 1


def attributes_in_a_helper(x):
    m = Model(x * 0.0)
    for i in range(3):
        _step(m, x[i])
    return np.sum(m.h) * m.n


def counter_in_a_list(x):
    count = [0]
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] ** 2
        count[0] += 1
    return s * count[0]


def appends_python_numbers(x):
    flags = []
    s = 0.0
    for i in range(x.shape[0]):
        s = s + np.sin(x[i])
        flags.append(1)
        list.append(flags, 2)  # not announced by converted code: found by the snapshot
    if flags != [1, 2] * x.shape[0] or type(flags[0]) is not int:
        raise TypeError("the list should hold the Python ints Python appends")
    return s * len(flags) + sum(flags)


X = RNG.standard_normal(5)
M = RNG.standard_normal((3, 4))


@pytest.mark.parametrize("fn, args", [
    (append_then_reduce, (X,)), (append_records, (X,)), (append_rows_of_array, (M,)),
    (carries_last_item, (X,)), (nested_lists, (M,)), (dict_entries, (X,)),
    (attributes_in_a_helper, (X,)), (counter_in_a_list, (X,)),
    (appends_python_numbers, (X,)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_containers_changed_by_staged_loops(fn, args, mode):
    d = _check(fn, *args)
    assert d.inspect(*args).path == "staged"
    ops = _ops(d, *args)
    assert ops.get("for_loop", 0) >= 1, ops


def test_list_buffers_keep_the_callers_list_unchanged(mode):
    """A list from outside the function gets the loop's items as Python does (after the call
    it holds the traced run's items, not poisoned or extra ones)."""
    def f(x, log):
        for i in range(3):
            log.append(x[i] * 2.0)
        return np.sum(np.stack(log))
    log = []
    with pytest.raises(UnsupportedError, match="changes its argument `log`"):
        llgrad.differentiate(f)(X, log)


# ---- what cannot be staged: unrolled with a reason, or refused ---------------------------
def reads_back_by_a_slice(x):  # (hs[-2] alone is carried: test_list_loops.py)
    hs = [x[0], x[1]]
    for i in range(x.shape[0]):
        hs.append(np.tanh(sum(hs[-2:]) + x[i]))
    return np.sum(np.stack(hs))


def reads_the_length(x):
    hs = []
    for i in range(x.shape[0]):
        hs.append(x[i] * len(hs))
    return np.sum(np.stack(hs))


def pops(x):
    stack = [1.0, 2.0, 3.0, 4.0, 5.0]
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] * stack.pop()
    return s


def changes_an_array_in_place(x):
    buf = np.ones(3)
    s = 0.0
    for i in range(x.shape[0]):
        s = s + np.sum(buf) * x[i]
        buf.fill(2.0)  # a numpy array that existed before the body
    return s


def appends_in_a_while(x):
    outs = []
    i = 0
    while i < x.shape[0]:
        outs.append(x[i] ** 2)
        i += 1
    return np.sum(np.stack(outs))


def appends_on_even_steps(x):
    evens = []
    h = x[0] * 0.0
    for i in range(x.shape[0]):
        h = np.sin(h + x[i])
        if i % 2 == 0:  # traced while the loop is staged, a Python bool once unrolled
            evens.append(h)
    return np.sum(np.stack(evens))


@pytest.mark.parametrize("fn, why", [
    (appends_on_even_steps, r"`.append\(\)` changes a list in place inside a branch of the "
                            r"traced `if` at .*, which a traced branch cannot do"),
    (reads_back_by_a_slice, r"reads the list `hs` it appends to \(at .*test_staged_containers.py"),
    (reads_the_length, r"reads the list `hs` it appends to"),
    (pops, r"removes items from the list `stack` \(`.pop\(\)` at .*test_staged_containers"),
    (changes_an_array_in_place, r"changes a numpy array in place \(`.fill\(\)` at"),
    (appends_in_a_while, r"appends to the list `outs` and its trip count is not static"),
], ids=lambda v: getattr(v, "__name__", ""))
def test_loops_that_cannot_be_staged_unroll_with_the_reason(fn, why, mode):
    d = llgrad.differentiate(fn)
    with pytest.warns(UnrollWarning, match=why):
        value, grad = d.value_and_grad(X)
    assert value == pytest.approx(fn(X), rel=1e-12)
    np.testing.assert_allclose(grad, numerical_grad_tree(fn, (X,), 0), rtol=1e-6, atol=1e-8)


def pops_with_traced_trip_count(x):
    stack = [1.0, 2.0, 3.0, 4.0, 5.0]
    s = 0.0
    for i in range(np.sum(x > 0)):
        s = s + x[i] * stack.pop()
    return s


def replaces_with_traced_trip_count(x):
    last = [x[0], x[1]]
    for i in range(np.sum(x > 0)):
        last.pop()  # the list keeps its length: its entries are loop state
        last.insert(0, x[i] * 2.0)
    return np.sum(np.stack(last))


def test_unstageable_loop_with_traced_trip_count_is_refused():
    with pytest.raises(LLGradError, match=r"removes items from the list `stack`.* trip count "
                                          r"is traced"):
        llgrad.differentiate(pops_with_traced_trip_count)(np.ones(4))


def test_a_list_that_keeps_its_length_is_loop_state(mode):
    x = np.array([0.5, 1.5, -2.0, 0.7])
    d = _check(replaces_with_traced_trip_count, x)
    assert _ops(d, x).get("while_loop", 0) + _ops(d, x).get("for_loop", 0) == 1


# ---- traced branches: in-place changes are refused, print warns ---------------------------
def appends_in_a_branch(x):
    flags = []
    s = np.sum(x)
    if s > 0:
        flags.append(1.0)
    return s * len(flags)


def fills_in_a_branch(x):
    a = np.ones(3)
    if np.sum(x) > 0:
        a.fill(0.0)
    return np.sum(x * a)


def loop_appends_in_a_branch(x):
    outs = []
    if np.sum(x) > 0:
        for i in range(3):
            outs.append(x[i])
    return len(outs) * np.sum(x)


def list_made_in_the_branch(x):
    s = np.sum(x)
    if s > 0:
        tmp = []
        tmp.append(s * 2.0)  # made in the branch: fine
        y = tmp[0]
    else:
        y = s
    return y


def test_in_place_changes_in_traced_branches_are_refused():
    with pytest.raises(UnsupportedError, match=r"`.fill\(\)` changes a numpy array in "
                       r"place") as info:
        llgrad.differentiate(fills_in_a_branch)(X)
    assert "a.fill(0.0)" in str(info.value)


@pytest.mark.parametrize("fn, match, line", [
    (appends_in_a_branch, r"`.append\(\)` on a list under the traced condition of the `if` "
                          r"at .*the list's length or items would depend on the traced condition",
     "flags.append(1.0)"),
    (loop_appends_in_a_branch, r"a change to a list that existed before it \(its length or "
                               r"keys\) under the traced condition", "if np.sum(x) > 0:"),
], ids=lambda v: getattr(v, "__name__", "") if callable(v) else "")
def test_lists_growing_in_traced_branches_take_the_dynamic_path(fn, match, line):
    # as a boolean mask's result: Note [Boolean masks of data-dependent length]
    with pytest.warns(DynamicPathWarning, match=match) as record:
        _check(fn, X)
        _check(fn, -X)
    lines, first = inspect.getsourcelines(fn)
    want = first + next(i for i, text in enumerate(lines) if line in text)
    assert (record[0].filename, record[0].lineno) == (__file__, want)


def test_a_list_made_inside_a_branch_may_change(mode):
    _check(list_made_in_the_branch, X)


def prints_in_a_loop(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i]
        print("partial sum", s)
    return s


def test_print_in_a_staged_loop_warns_once(capsys):
    with pytest.warns(TracePrintWarning, match=r"print\(\) in the staged loop at .* runs "
                                               r"once, while tracing") as rec:
        assert llgrad.differentiate(prints_in_a_loop)(X) == pytest.approx(np.sum(X))
    assert len([w for w in rec if w.category is TracePrintWarning]) == 1
    assert rec[0].filename.endswith("test_staged_containers.py")


# ---- no peeled iterations (issue 13) -------------------------------------------------------
def nest1(x):
    acc = 0.0
    for i in range(x.shape[0]):
        acc = acc + np.sin(x[i]) * x[i]
    return acc


def nest3(x):
    acc = 0.0
    for i in range(x.shape[0]):
        for j in range(x.shape[1]):
            for k in range(x.shape[2]):
                acc = acc + np.sin(x[i, j, k]) * x[i, j, k]
    return acc


def while_sum(x):
    acc = 0.0
    i = 0
    while i < x.shape[0]:
        acc = acc + np.cos(x[i])
        i += 1
    return acc


def test_nests_are_staged_without_peeling(monkeypatch):
    """Each level is one loop op holding the body once: the op counts of a 3-deep nest do not
    depend on the extents, and it has the 1-deep loop's body ops once."""
    monkeypatch.setenv("LLGRAD_DISABLE_JIT", "1")
    one = _ops(llgrad.differentiate(nest1), np.ones(4))
    d3 = llgrad.differentiate(nest3)
    three, bigger = _ops(d3, np.ones((2, 3, 4))), _ops(d3, np.ones((3, 4, 5)))
    assert three == bigger
    assert one["for_loop"] == 1 and three["for_loop"] == 3
    assert one["sin"] == three["sin"] == 1 and one["mul"] == three["mul"]
    assert _ops(llgrad.differentiate(while_sum), np.ones(4)) == \
        _ops(llgrad.differentiate(while_sum), np.ones(9))


@pytest.mark.parametrize("fn, shape", [(nest3, (2, 3, 2)), (while_sum, (5,))],
                         ids=["nest3", "while"])
def test_unpeeled_loops_values_and_gradients(fn, shape, mode):
    _check(fn, RNG.standard_normal(shape))


def gmm_loops(alphas, means, icf, x):
    """A Numba-style GMM objective (ADBench's C++ formulation) over points, components,
    dimensions and the triangular part."""
    n, d = x.shape
    k = alphas.shape[0]
    Qd = np.exp(icf[:, :d])
    sum_qs = np.empty(k)
    for j in range(k):
        sum_qs[j] = np.sum(icf[j, :d])
    main = np.empty(k)
    xc = np.empty(d)
    Qxc = np.empty(d)
    slse = 0.0
    for i in range(n):
        for j in range(k):
            for r in range(d):
                xc[r] = x[i, r] - means[j, r]
                Qxc[r] = Qd[j, r] * xc[r]
            pos = d
            for c in range(d):
                for r in range(c + 1, d):
                    Qxc[r] += icf[j, pos] * xc[c]
                    pos += 1
            sq = 0.0
            for r in range(d):
                sq += Qxc[r] * Qxc[r]
            main[j] = alphas[j] + sum_qs[j] - 0.5 * sq
        mx = np.max(main)
        slse += np.log(np.sum(np.exp(main - mx))) + mx
    return slse


def _gmm_args(n=4, k=2, d=3):
    r = np.random.default_rng(5)
    return (r.standard_normal(k), r.random((k, d)), r.standard_normal((k, d * (d + 1) // 2)),
            r.standard_normal((n, d)))


def test_gmm_with_loops_has_no_peeled_iteration(mode):
    d = _check(gmm_loops, *_gmm_args(), wrt=(0, 1, 2))
    ops = _ops(d, *_gmm_args())
    assert ops == _ops(d, *_gmm_args(n=7, k=3, d=4))  # the size does not change the code
    # one loop op per `for` of the source (7), and each exp/log of the source once
    assert ops["for_loop"] == 7 and ops["log"] == 1 and ops["exp"] == 2, ops


def test_np_empty_is_a_constant_of_zeros():
    """np.empty's uninitialised memory was a constant of the compiled code: the IR, its cache
    key and the constants CSE merges changed from trace to trace (gmm_loops' op count above
    was flaky)."""
    def f(x):
        buf = np.empty(3)
        for i in range(3):
            buf[i] = x[i] ** 2
        return np.sum(buf)
    texts = []
    for fill in (7.0, -3.0):
        np.full(3, fill)  # (numpy hands its memory to the next small array)
        ins = llgrad.differentiate(f).inspect(np.ones(3))
        texts.append(str(ins.forward_ir))
        consts = [op.params["value"] for op in ins._c.forward.walk() if op.name == "constant"
                  and np.shape(op.params["value"]) == (3,)]
        assert consts and all(not np.any(c) for c in consts), consts
    assert texts[0] == texts[1]


# ---- code without a source file (Note [Code without a source file]) -----------------------
_SRC = '''
import numpy as np
def rec(x):
    h = x * 0.0
    for t in range(4):
        h = np.tanh(h + x)
    return np.sum(h)
'''


def test_exec_without_source_warns_and_linecache_source_converts():
    import linecache
    ns: dict = {}
    exec(_SRC, ns)
    with pytest.warns(UserWarning, match=r"the source of rec is not available .* unrolled at "
                                         r"trace time.*linecache.cache\[name\]") as rec:
        d = llgrad.differentiate(ns["rec"])
        assert d(X) == pytest.approx(ns["rec"](X))
    assert rec[0].filename == __file__
    assert _ops(d, X).get("for_loop", 0) == 0  # unrolled
    name = "<llgrad-test-cell>"
    linecache.cache[name] = (len(_SRC), None, _SRC.splitlines(True), name)
    try:
        exec(compile(_SRC, name, "exec"), ns)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            d = llgrad.differentiate(ns["rec"])
            assert d(X) == pytest.approx(ns["rec"](X))
        assert _ops(d, X)["for_loop"] == 1
    finally:
        del linecache.cache[name]


def test_long_accumulation_chains_plan_without_recursion():
    """codegen/plan.py walks a chain of 3,000 gradient accumulations (an unrolled loop's
    backward) with a stack: it raised RecursionError."""
    from llgrad.codegen import lowerings  # noqa: F401  (registers the lowerings)
    from llgrad.codegen.plan import FunctionPlan
    from llgrad.runtime import ops
    from llgrad.runtime.ops.index import scatter_add_p
    from llgrad.runtime.prim import bind
    from llgrad.transform.builder import Builder
    b = Builder("chain")
    with b:
        x = b.param(((4,), np.float64), "x")
        acc = x
        for i in range(3000):
            g = ops.getitem(x, i % 4)
            acc = ops.add(acc, bind(scatter_add_p, g, key=(("i", i % 4),), shape=(4,)))
        b.fn.body.results = [acc]
    plan = FunctionPlan(b.fn)
    assert plan is not None
