import numpy as np
import pytest

from llgrad.codegen import blas

SHAPES = [(1, 1, 1), (3, 5, 7), (7, 3, 5), (16, 16, 16), (33, 17, 65), (64, 1, 40), (2, 50, 1)]
NP = {"f64": np.float64, "f32": np.float32}
RTOL = {"f64": 1e-12, "f32": 2e-5}

needs_scipy = pytest.mark.skipif(not blas.blas_available(), reason="scipy's BLAS is missing")


def _operands(m, n, k, dtype, trans_a, trans_b):
    rng = np.random.default_rng(m * 10000 + n * 100 + k)
    a = rng.normal(size=(k, m) if trans_a else (m, k)).astype(NP[dtype])
    b = rng.normal(size=(n, k) if trans_b else (k, n)).astype(NP[dtype])
    expected = (a.T if trans_a else a).astype(np.float64) @ (b.T if trans_b else b)
    return a, b, expected


def _run(kernel, emitter, dtype, m, n, k, trans_a=False, trans_b=False, accumulate=False,
         **kw):
    a, b, expected = _operands(m, n, k, dtype, trans_a, trans_b)
    c0 = np.arange(m * n, dtype=NP[dtype]).reshape(m, n) if accumulate else \
        np.full((m, n), np.nan, NP[dtype])
    c = c0.copy()

    def emit(bld, pa, pb, pc):
        emitter(bld, dtype, pa, pb, pc, m, n, k, trans_a=trans_a, trans_b=trans_b,
                accumulate=accumulate, **kw)
    kernel(3, emit)(a, b, c)
    if accumulate:
        expected = expected + c0
    np.testing.assert_allclose(c, expected, rtol=RTOL[dtype], atol=RTOL[dtype] * k)


@needs_scipy
@pytest.mark.parametrize("dtype", ["f64", "f32"])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_gemm_matches_numpy(kernel, dtype, m, n, k):
    _run(kernel, blas.emit_gemm, dtype, m, n, k)


@pytest.mark.parametrize("dtype", ["f64", "f32"])
@pytest.mark.parametrize("m,n,k", SHAPES)
def test_loop_matmul_matches_numpy(kernel, dtype, m, n, k):
    _run(kernel, blas.emit_loop_matmul, dtype, m, n, k)


@pytest.mark.parametrize("emitter", [
    pytest.param(blas.emit_gemm, marks=needs_scipy, id="gemm"),
    pytest.param(blas.emit_loop_matmul, id="loops"),
])
@pytest.mark.parametrize("trans_a,trans_b,accumulate", [
    (True, False, False), (False, True, False), (True, True, False), (False, False, True),
    (True, True, True),
])
def test_transposes_and_accumulate(kernel, emitter, trans_a, trans_b, accumulate):
    _run(kernel, emitter, "f64", 5, 3, 4, trans_a, trans_b, accumulate)


@needs_scipy
def test_gemm_inline_address(kernel):
    _run(kernel, blas.emit_gemm, "f64", 4, 6, 5, inline_address=True)


@needs_scipy
def test_blas_address():
    assert blas.blas_address("dgemm") and blas.blas_address("sgemm")
    assert blas.blas_address("no_such_routine") is None


def test_emit_matmul_chooses(kernel):
    chosen = []

    def emitter(bld, dtype, *args, **kw):
        chosen.append(blas.emit_matmul(bld, dtype, *args, **kw))

    _run(kernel, emitter, "f64", 3, 4, 5)
    _run(kernel, emitter, "f64", 40, 40, 40)
    assert chosen[0] == "loops"
    assert chosen[1] == ("blas" if blas.blas_available() else "loops")


def test_without_scipy_matmul_falls_back_to_loops(kernel, monkeypatch):
    monkeypatch.setattr(blas, "blas_available", lambda dtype="f64": False)
    chosen = []

    def emitter(bld, dtype, *args, **kw):
        chosen.append(blas.emit_matmul(bld, dtype, *args, **kw))

    _run(kernel, emitter, "f64", 40, 40, 40)
    assert chosen == ["loops"]


def test_importing_codegen_does_not_import_scipy():
    import subprocess
    import sys

    code = ("import sys, llgrad.codegen.blas, llgrad.codegen.abi, llgrad.codegen.vmath; "
            "assert 'scipy' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
