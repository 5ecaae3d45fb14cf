import ctypes
import threading

import pytest

from llgrad.codegen import jit

TWICE = "define i64 @{name}(i64 %x) {{\n  %y = add i64 %x, %x\n  ret i64 %y\n}}\n"


def test_compile_and_call():
    addr = jit.compile_module(TWICE.format(name="jit_twice"), ["jit_twice"])["jit_twice"]
    assert ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(addr)(21) == 42


def test_optimized_ir_and_assembly_are_inspectable():
    src = TWICE.format(name="jit_inspect")
    opt = jit.optimized_ir(src)
    assert "shl i64 %x, 1" in opt and jit.get_jit().target.triple in opt
    assert "jit_inspect:" in jit.assembly(src)


def test_host_target():
    j = jit.get_jit()
    assert j.target.cpu and j.target.features
    assert jit.has_host_features() is True
    assert jit.has_host_features("no-such-feature") is False


def test_bad_ir_raises_jit_error():
    with pytest.raises(jit.JitError, match="LLVM rejected"):
        jit.compile_module("define i64 @f( {", ["f"])


def test_missing_symbol_raises():
    with pytest.raises(jit.JitError, match="not found"):
        jit.compile_module(TWICE.format(name="jit_present"), ["jit_absent"])


def test_concurrent_compiles():
    results, errors = {}, []

    def work(i):
        try:
            name = f"jit_thread_{i}"
            results[i] = jit.compile_module(TWICE.format(name=name), [name])[name]
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for addr in results.values():
        assert ctypes.CFUNCTYPE(ctypes.c_int64, ctypes.c_int64)(addr)(5) == 10
