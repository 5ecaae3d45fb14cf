"""Lowerings of the LAPACK-backed primitives (runtime/ops/linalg_solve.py, linalg_spectral.py):
one routine call per matrix of a stack, in a loop over the batch (codegen/lapack.py).

Row-major buffers read column-major are transposes (Note [Calling LAPACK]): cholesky,
triangular_solve, solve, inv and slogdet work on the transpose with flipped flags; eigh, svd
and qr copy to column-major scratch and back, calling the routines exactly as numpy does, so
that eigenvectors and singular vectors come out as numpy's (the same algorithm on the same
numbers; an eigenvector's sign is otherwise arbitrary). numpy computes float32 matrices in
float64 and rounds the results; so do the lowerings of numpy's functions (triangular_solve,
scipy's, stays in float32 as scipy does). A positive INFO stops the kernel with numpy's
LinAlgError at the op's line (Note [Native errors]). Inputs are copied (LAPACK overwrites
them), so any strided layout is accepted.
"""
from __future__ import annotations

from contextlib import contextmanager

import numpy as np
from llvmlite import ir

from llgrad.runtime.errors import UnsupportedError
from llgrad.runtime.ops import linalg_solve as LS
from llgrad.runtime.ops import linalg_spectral as SP

from .. import elementwise as ew
from .. import lapack
from ..layout import Layout, contiguous_strides
from ..loops import I64, for_range, load, loop_nest, store
from ..registry import lowers
from .linalg import _transposed

F64 = np.dtype(np.float64)
_DT = {F64: "f64", np.dtype(np.float32): "f32"}
NOT_PD = "Matrix is not positive definite"
SINGULAR = "Singular matrix"


def _any(op, i, layout) -> bool:
    return True


def _check_dtype(op) -> None:
    dt = _DT.get(np.dtype(op.outputs[-1].aval.dtype))
    if dt is None or not lapack.available(dt):
        raise UnsupportedError(f"{op.prim.name} of {op.outputs[-1].aval.dtype} arrays is not "
                               "compiled (it needs scipy's LAPACK, and float32 or float64)", loc=op.loc, fix="cast to float64")


def _nb(shape) -> int:
    """The number of matrices in a stack of shape (..., r, c)."""
    return int(np.prod(shape[:-2], dtype=np.int64))


@contextmanager
def _each(ctx, nb: int):
    """Loop over the nb matrices of a stack; yields at(ptr, elems per matrix, dtype) -> the
    current matrix's pointer."""
    b = ctx.b
    index = [None]  # the loop's counter, once the loop is open (no loop for one matrix)

    def at(ptr, size, dtype=F64):
        if index[0] is None:
            return ptr
        return lapack.index(b, ptr, b.mul(index[0], ir.Constant(I64, size)), ew.memtype(dtype))

    if nb == 1:
        yield at
        return
    with for_range(b, 0, nb, name="mat") as i:
        index[0] = i
        yield at


def _colmajor(shape) -> tuple:
    """Strides that store a stack of (r, c) matrices column-major (batch axes row-major)."""
    *batch, r, c = shape
    return tuple(s * r * c for s in contiguous_strides(batch)) + (1, r)


def _copy(ctx, src: Layout, src_dtype, dst, dst_dtype, dst_strides=None) -> None:
    """Copy (and convert) the elements of layout `src` to `dst` (dense, or `dst_strides`)."""
    if src.size == 0:
        return
    operand = ew.Operand(ptr=ctx.offset_ptr(src), strides=src.strides, dtype=src_dtype)
    strides = contiguous_strides(src.shape) if dst_strides is None else dst_strides
    ew.emit_loops(ctx.b, src.shape, [operand], [(dst, dst_dtype, strides)],
                  lambda em, v: [em.cast(v[0], dst_dtype)])


def _from_colmajor(ctx, src, out) -> None:
    """Copy float64 scratch value `src`, holding out's matrices column-major, to `out`."""
    shape = tuple(out.aval.shape)
    _copy(ctx, Layout(src, shape, _colmajor(shape)), F64, ctx.out(out), out.aval.dtype)


def _work(op, out):
    """Scratch for the float64 result of a float32 output (numpy computes in float64)."""
    return [] if np.dtype(out.aval.dtype) == F64 else [(out.aval.shape, F64)]


def _f64(ctx, op, out, k):
    """(pointer, finish): where out's float64 result is computed, and what then rounds it
    into out: out itself (float64), or op's scratch buffer k (_work's, for float32)."""
    if np.dtype(out.aval.dtype) == F64:
        return ctx.out(out), lambda: None
    v, shape = ctx.plan.scratch[id(op)][k], tuple(out.aval.shape)
    return ctx.ptr(v), lambda: _copy(ctx, Layout(v, shape, contiguous_strides(shape)), F64,
                                     ctx.out(out), out.aval.dtype)


def _check(ctx, op, info: ir.Value, message: str) -> None:
    """Stop with numpy's `message` when the routine's INFO is positive."""
    value = lapack.load_int(ctx.b, info)
    ctx.fail_if(ctx.b.icmp_signed(">", value, ir.Constant(I64, 0)), "linalg", op, (message,),
                value)


def _nonempty(op, *dims) -> None:
    if 0 in dims:
        raise UnsupportedError(f"{op.prim.name} of an empty matrix is not compiled", loc=op.loc)


# ---- cholesky: potrf on the transpose (Acm = A^T, upper = A's lower) ---------------------------
@lowers(LS.cholesky_p, accepts=_any, scratch=lambda op: _work(op, op.outputs[0]))
def _lower_cholesky(ctx, op) -> None:
    a, out = op.inputs[0], op.outputs[0]
    _check_dtype(op)
    b, n = ctx.b, out.aval.shape[-1]
    if n == 0:
        return
    res, finish = _f64(ctx, op, out, 0)
    _copy(ctx, ctx.layout(a), a.aval.dtype, res, F64)
    info, zero = lapack.info_slot(b), ir.Constant(ew.memtype(F64), 0.0)
    with _each(ctx, _nb(out.aval.shape)) as at:
        p = at(res, n * n)
        lapack.emit_call(b, "f64", "potrf", "U", n, p, n, info)
        _check(ctx, op, info, NOT_PD)
        with for_range(b, 0, n - 1, name="row") as r:  # zero the strict upper triangle
            row = lapack.index(b, p, b.mul(r, ir.Constant(I64, n)), ew.memtype(F64))
            with for_range(b, b.add(r, ir.Constant(I64, 1)), n, name="col") as c:
                store(b, zero, row, c)
    finish()


# ---- triangular_solve: X^T op(A)^T = B^T, trsm from the right ----------------------------------
def _trsolve_accepts(op, i, layout) -> bool:
    return i == 1 or _transposed(layout)


@lowers(LS.triangular_solve_p, accepts=_trsolve_accepts)
def _lower_triangular_solve(ctx, op) -> None:
    a, rhs, out = op.inputs[0], op.inputs[1], op.outputs[0]
    _check_dtype(op)
    b, p, dtype = ctx.b, op.params, out.aval.dtype
    n, k = out.aval.shape[-2:]
    if n * k == 0:
        return
    _copy(ctx, ctx.layout(rhs), dtype, ctx.out(out), dtype)
    la = ctx.layout(a)
    flipped = not la.contiguous  # a transposed view: read column-major it is A itself
    uplo = "U" if p["lower"] != flipped else "L"
    transa = "T" if p["trans"] != flipped else "N"
    elem = ew.memtype(dtype)
    with _each(ctx, _nb(out.aval.shape)) as at:
        pa = at(ctx.offset_ptr(la), n * n, dtype)
        if not p["unit_diagonal"]:  # trsm does not check: a zero pivot is scipy's error
            with for_range(b, 0, n, name="diag") as j:
                d = load(b, pa, b.mul(j, ir.Constant(I64, n + 1)), elem)
                ctx.fail_if(b.fcmp_ordered("==", d, ir.Constant(elem, 0.0)), "linalg", op,
                            ("singular matrix: resolution failed at diagonal {}",), j)
        lapack.emit_call(b, _DT[np.dtype(dtype)], "trsm", "R", uplo, transa,
                         "U" if p["unit_diagonal"] else "N", k, n, 1.0, pa, n,
                         at(ctx.out(out), n * k, dtype), k)


# ---- solve and inv: LU of A^T, then X^T = B^T U^-1 L^-1 P^T ------------------------------------
def _lu_scratch(op):
    a = op.inputs[0].aval
    return [(a.shape, F64), ((max(a.shape[-1], 1),), lapack.int_dtype())]


def _lower_lu_solve(ctx, op, fill_rhs) -> None:
    """X = A^-1 B, with B written into X's float64 storage by fill_rhs(pointer)."""
    a, out = op.inputs[0], op.outputs[0]
    _check_dtype(op)
    b = ctx.b
    n, k = out.aval.shape[-2:]
    if n * k == 0:
        return
    lu, ipiv = ctx.scratch(op)[:2]
    x_all, finish = _f64(ctx, op, out, 2)
    _copy(ctx, ctx.layout(a), a.aval.dtype, lu, F64)
    fill_rhs(x_all)
    info, elem = lapack.info_slot(b), ew.memtype(F64)
    with _each(ctx, _nb(out.aval.shape)) as at:
        f = at(lu, n * n)
        lapack.emit_call(b, "f64", "getrf", n, n, f, n, ipiv, info)  # A^T = P L U
        _check(ctx, op, info, SINGULAR)
        x = at(x_all, n * k)
        lapack.emit_call(b, "f64", "trsm", "R", "U", "N", "N", k, n, 1.0, f, n, x, k)
        lapack.emit_call(b, "f64", "trsm", "R", "L", "N", "U", k, n, 1.0, f, n, x, k)
        # X^T P^T = X^T P_(n-1) ... P_0: swap rows j and ipiv[j] - 1 of X, j = n-1 down to 0
        with for_range(b, n - 1, -1, step=-1, name="pivot") as j:
            q = b.sub(lapack.load_int(b, ipiv, j), ir.Constant(I64, 1))
            with b.if_then(b.icmp_signed("!=", q, j)):
                with for_range(b, 0, k, name="swap") as c:
                    s1 = b.add(b.mul(j, ir.Constant(I64, k)), c)
                    s2 = b.add(b.mul(q, ir.Constant(I64, k)), c)
                    v1, v2 = load(b, x, s1, elem), load(b, x, s2, elem)
                    store(b, v2, x, s1)
                    store(b, v1, x, s2)
    finish()


@lowers(LS.solve_p, accepts=_any, scratch=lambda op: _lu_scratch(op) + _work(op, op.outputs[0]))
def _lower_solve(ctx, op) -> None:
    rhs = op.inputs[1]
    _lower_lu_solve(ctx, op, lambda x: _copy(ctx, ctx.layout(rhs), rhs.aval.dtype, x, F64))


@lowers(LS.inv_p, accepts=_any, scratch=lambda op: _lu_scratch(op) + _work(op, op.outputs[0]))
def _lower_inv(ctx, op) -> None:
    out = op.outputs[0]
    n = out.aval.shape[-1]

    def identity(x_all):
        ew.emit_loops(ctx.b, out.aval.shape, [ew.Operand(value=0.0)], [(x_all, F64)],
                      lambda em, v: v)
        one = ir.Constant(ew.memtype(F64), 1.0)
        with _each(ctx, _nb(out.aval.shape)) as at:
            x = at(x_all, n * n)
            with for_range(ctx.b, 0, n, name="eye") as j:
                store(ctx.b, one, x, ctx.b.mul(j, ir.Constant(I64, n + 1)))
    _lower_lu_solve(ctx, op, identity)


# ---- slogdet: LU, then numpy's sign and sum of log|u_jj| ---------------------------------------
@lowers(LS.slogdet_p, accepts=_any, scratch=_lu_scratch)
def _lower_slogdet(ctx, op) -> None:
    a, (sign, logdet) = op.inputs[0], op.outputs
    _check_dtype(op)
    b, n, dtype = ctx.b, a.aval.shape[-1], a.aval.dtype
    elem = ew.memtype(F64)
    one, zero = ir.Constant(elem, 1.0), ir.Constant(elem, 0.0)
    lu, ipiv = ctx.scratch(op)
    _copy(ctx, ctx.layout(a), dtype, lu, F64)
    info = lapack.info_slot(b)
    log = b.module.declare_intrinsic("llvm.log", [elem])
    with b.goto_entry_block():
        acc_sign, acc_log = b.alloca(elem), b.alloca(elem)
    em = ew.Emitter(b, 1)
    with for_range(b, 0, _nb(a.aval.shape), name="mat") as i:
        f = lapack.index(b, lu, b.mul(i, ir.Constant(I64, n * n)), elem)
        if n:
            lapack.emit_call(b, "f64", "getrf", n, n, f, n, ipiv, info)
        b.store(one, acc_sign)
        b.store(zero, acc_log)
        with for_range(b, 0, n, name="pivot") as j:  # numpy: the pivots' parity, then each u_jj
            moved = b.icmp_signed("!=", lapack.load_int(b, ipiv, j), b.add(j, ir.Constant(I64, 1)))
            s = b.load(acc_sign, typ=elem)
            b.store(b.select(moved, b.fneg(s), s), acc_sign)
        with for_range(b, 0, n, name="diag") as j:
            d = load(b, f, b.mul(j, ir.Constant(I64, n + 1)), elem)
            s = b.load(acc_sign, typ=elem)
            negative = b.fcmp_ordered("<", d, zero)
            b.store(b.select(negative, b.fneg(s), s), acc_sign)
            b.store(b.fadd(b.load(acc_log, typ=elem), b.call(log, [b.select(negative, b.fneg(d), d)])),
                    acc_log)
        singular = b.icmp_signed(">", lapack.load_int(b, info), ir.Constant(I64, 0))
        sv = b.select(singular, zero, b.load(acc_sign, typ=elem))
        lv = b.select(singular, ir.Constant(elem, -np.inf), b.load(acc_log, typ=elem))
        store(b, em.cast(sv, dtype), ctx.out(sign), i)
        store(b, em.cast(lv, dtype), ctx.out(logdet), i)


# ---- eigh: syevd on a column-major copy, as numpy calls it --------------------------------------
def _eigh_work(op):
    n = op.inputs[0].aval.shape[-1]
    return lapack.query_work("f64", "syevd", "V", "L", n, "a", max(n, 1), "w", "work", -1,
                             "iwork", -1, "info")


def _eigh_scratch(op):
    lwork, liwork = _eigh_work(op)
    return [(op.inputs[0].aval.shape, F64), ((lwork,), F64), ((liwork,), lapack.int_dtype())] \
        + _work(op, op.outputs[0])


@lowers(SP.eigh_p, accepts=_any, scratch=_eigh_scratch)
def _lower_eigh(ctx, op) -> None:
    a, (w, v) = op.inputs[0], op.outputs
    _check_dtype(op)
    b, n = ctx.b, a.aval.shape[-1]
    _nonempty(op, n)
    t, work, iwork = ctx.scratch(op)[:3]
    w_all, finish = _f64(ctx, op, w, 3)
    lwork, liwork = _eigh_work(op)
    _copy(ctx, ctx.layout(a), a.aval.dtype, t, F64, _colmajor(a.aval.shape))
    info = lapack.info_slot(b)
    with _each(ctx, _nb(a.aval.shape)) as at:
        lapack.emit_call(b, "f64", "syevd", "V", "L" if op.params["lower"] else "U", n,
                         at(t, n * n), n, at(w_all, n), work, lwork, iwork, liwork, info)
        _check(ctx, op, info, "Eigenvalues did not converge")
    finish()
    _from_colmajor(ctx, ctx.plan.scratch[id(op)][0], v)


# ---- svd: gesdd on a column-major copy, as numpy calls it ---------------------------------------
def _svd_dims(op):
    *_, m, n = op.inputs[0].aval.shape
    k = min(m, n)
    full = op.params["full_matrices"]
    return m, n, k, (m if full else k), (n if full else k), "A" if full else "S"


def _svd_work(op) -> int:
    m, n, _, _, kv, jobz = _svd_dims(op)
    return lapack.query_work("f64", "gesdd", jobz, m, n, "a", m, "s", "u", m, "vt", kv,
                             "work", -1, "iwork", "info")[0]


def _svd_scratch(op):
    a = op.inputs[0].aval
    m, n, k, ku, kv, _ = _svd_dims(op)
    nb = _nb(a.shape)
    return [(a.shape, F64), ((nb * m * ku,), F64), ((nb * kv * n,), F64),
            ((_svd_work(op),), F64), ((8 * max(k, 1),), lapack.int_dtype())] \
        + _work(op, op.outputs[1])


@lowers(SP.svd_p, accepts=_any, scratch=_svd_scratch)
def _lower_svd(ctx, op) -> None:
    a, (u, s, vh) = op.inputs[0], op.outputs
    _check_dtype(op)
    b = ctx.b
    m, n, k, ku, kv, jobz = _svd_dims(op)
    _nonempty(op, m, n)
    t, ut, vt, work, iwork = ctx.scratch(op)[:5]
    s_all, finish = _f64(ctx, op, s, 5)
    _copy(ctx, ctx.layout(a), a.aval.dtype, t, F64, _colmajor(a.aval.shape))
    info = lapack.info_slot(b)
    with _each(ctx, _nb(a.aval.shape)) as at:
        lapack.emit_call(b, "f64", "gesdd", jobz, m, n, at(t, m * n), m, at(s_all, k),
                         at(ut, m * ku), m, at(vt, kv * n), kv, work, _svd_work(op), iwork,
                         info)
        _check(ctx, op, info, "SVD did not converge")
    finish()
    scratch = ctx.plan.scratch[id(op)]
    _from_colmajor(ctx, scratch[1], u)
    _from_colmajor(ctx, scratch[2], vh)


# ---- qr: geqrf and orgqr on column-major copies, as numpy calls them ----------------------------
def _qr_dims(op):
    *_, m, n = op.inputs[0].aval.shape
    k = min(m, n)
    return m, n, k, (m if op.params["complete"] else k)


def _qr_work(op) -> int:
    m, n, k, mc = _qr_dims(op)
    return max(lapack.query_work("f64", "geqrf", m, n, "a", m, "tau", "work", -1, "info")[0],
               lapack.query_work("f64", "orgqr", m, mc, k, "a", m, "tau", "work", -1,
                                 "info")[0])


def _qr_scratch(op):
    a = op.inputs[0].aval
    m, _, k, mc = _qr_dims(op)
    return [(a.shape, F64), ((_nb(a.shape) * m * mc,), F64), ((max(k, 1),), F64),
            ((_qr_work(op),), F64)]


@lowers(SP.qr_p, accepts=_any, scratch=_qr_scratch)
def _lower_qr(ctx, op) -> None:
    a, (q, r) = op.inputs[0], op.outputs
    _check_dtype(op)
    b, dtype = ctx.b, a.aval.dtype
    m, n, k, mc = _qr_dims(op)
    _nonempty(op, m, n)
    t, qt, tau, work = ctx.scratch(op)
    lwork = _qr_work(op)
    elem, em = ew.memtype(F64), ew.Emitter(b, 1)
    _copy(ctx, ctx.layout(a), dtype, t, F64, _colmajor(a.aval.shape))
    info = lapack.info_slot(b)
    with _each(ctx, _nb(a.aval.shape)) as at:
        ta, qa, ra = at(t, m * n), at(qt, m * mc), at(ctx.out(r), mc * n, dtype)
        lapack.emit_call(b, "f64", "geqrf", m, n, ta, m, tau, work, lwork, info)
        with loop_nest(b, (mc, n), name="r") as (i, j):  # R = triu of the top rows
            x = load(b, ta, b.add(i, b.mul(j, ir.Constant(I64, m))), elem)
            x = b.select(b.icmp_signed(">", i, j), ir.Constant(elem, 0.0), x)
            store(b, em.cast(x, dtype), ra, b.add(b.mul(i, ir.Constant(I64, n)), j))
        with for_range(b, 0, m * min(mc, n), name="q.init") as e:  # Q starts as A's columns
            store(b, load(b, ta, e, elem), qa, e)
        with for_range(b, m * min(mc, n), m * mc, name="q.zero") as e:  # (complete, m > n)
            store(b, ir.Constant(elem, 0.0), qa, e)
        lapack.emit_call(b, "f64", "orgqr", m, mc, k, qa, m, tau, work, lwork, info)
    _from_colmajor(ctx, ctx.plan.scratch[id(op)][1], q)
