"""Shared helpers for codegen tests: build a kernel from an emitter and call it on arrays."""
from __future__ import annotations

import itertools
from collections.abc import Callable

import pytest
from llvmlite import ir

from llgrad.codegen import abi, jit

_names = itertools.count()


def build_kernel(n_buffers: int, emit: Callable[..., None], noalias: bool = True) -> abi.Kernel:
    """Compile `emit(builder, *buffer_ptrs)` as a kernel of `n_buffers` buffers."""
    name = f"test_kernel_{next(_names)}"
    module = ir.Module(name=name)
    with abi.define_kernel(module, name, n_buffers, noalias=noalias) as (builder, ptrs):
        emit(builder, *ptrs)
    address = jit.compile_module(str(module), [name])[name]
    return abi.Kernel(address, n_buffers, name)


@pytest.fixture
def kernel() -> Callable[..., abi.Kernel]:
    return build_kernel

