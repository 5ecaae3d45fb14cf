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


# ---- one library, one thread pool (Note [One BLAS, one thread pool]) ------------------------
def _numpy_has_openblas64() -> bool:
    return blas._numpy_openblas("dgemm") is not None


numpy_openblas = pytest.mark.skipif(not _numpy_has_openblas64(),
                                    reason="numpy does not bundle scipy-openblas64 here")


@numpy_openblas
def test_generated_code_calls_numpys_openblas():
    lib = blas.library()
    assert lib.name == "numpy's OpenBLAS" and lib.int_bits == 64
    assert blas.blas_address("dgemm") == blas._numpy_openblas("dgemm")
    assert blas.blas_address("dpotrf") == blas._numpy_openblas("dpotrf")


@numpy_openblas
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_compiled_matmul_is_numpys_bit_for_bit(dtype):
    import llgrad
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=(64, 80)).astype(dtype), rng.normal(size=(80, 72)).astype(dtype)
    f = llgrad.differentiate(lambda a, b: a @ b)
    assert "llgrad_ilp64_" in str(f.inspect(a, b).llvm_ir)
    np.testing.assert_array_equal(f(a, b), a @ b)  # the gemm call numpy makes


@numpy_openblas
def test_one_openblas_in_the_process(tmp_path):
    """Compiled gemm and LAPACK calls load no second OpenBLAS (numpy's is the only pool)."""
    import subprocess
    import sys
    script = tmp_path / "one_pool.py"
    script.write_text(
        "import numpy as np, llgrad\n"
        "def f(a):\n"
        "    k = a @ a.T + 64 * np.eye(64)\n"
        "    return np.sum(np.linalg.cholesky(k)) + np.linalg.slogdet(k)[1]\n"
        "a = np.random.default_rng(0).normal(size=(64, 64))\n"
        "print(llgrad.differentiate(f).grad(a).shape)\n"
        "print(sorted({l.split('/')[-1] for l in open('/proc/self/maps') if 'openblas' in l}))\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=120, check=True).stdout.splitlines()
    assert out[0] == "(64, 64)"
    (lib,) = eval(out[1])
    assert lib.startswith("libscipy_openblas64_")


def test_scipy_lp64_library_still_works(monkeypatch):
    """Where numpy's library is missing or incomplete, scipy's (32-bit integers) serves every
    routine: gemm and LAPACK results as numpy's."""
    import llgrad
    lp64 = blas.Library("scipy's OpenBLAS", 32, blas._scipy_routine)
    if not lp64.complete():
        pytest.skip("scipy's BLAS/LAPACK is missing")
    monkeypatch.setattr(blas, "library", lambda: lp64)
    blas.blas_address.cache_clear()
    try:
        def f(a, b):
            k = a @ a.T + 40 * np.eye(40)
            w, v = np.linalg.eigh(k)
            return np.linalg.cholesky(k), np.linalg.solve(k, b), w, np.linalg.svd(a)[1]
        rng = np.random.default_rng(4)
        a, b = rng.normal(size=(40, 40)), rng.normal(size=(40, 3))
        d = llgrad.differentiate(f)
        assert "llgrad_lp64_dpotrf" in d.inspect(a, b).llvm_ir
        for got, want in zip(d(a, b), f(a, b)):
            np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    finally:
        blas.blas_address.cache_clear()


def test_cached_code_needs_its_interface(monkeypatch):
    """Object code compiled against one integer width is not linked to the other library."""
    monkeypatch.setattr(blas, "_scipy_routine", lambda name: None)
    with pytest.raises(RuntimeError, match="calls dgemm .lp64., which is not available"):
        blas.register_symbols("declare void @llgrad_lp64_dgemm(ptr)")
