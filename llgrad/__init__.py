"""llgrad: exact, fast gradients of ordinary Python numeric code.

Two faces: an eager runtime with PyTorch's autograd semantics (`llgrad.tensor`, `.backward()`,
`llgrad.autograd`, `llgrad.nn`, `llgrad.optim`) and a compiler (`llgrad.differentiate`).
This module only re-exports.
"""
from __future__ import annotations

import sys as _sys

from llgrad.runtime import autograd, ops as _ops
from llgrad.runtime.autograd import (  # noqa: F401
    enable_grad, inference_mode, is_grad_enabled, no_grad, set_grad_enabled,
)
from llgrad.runtime.aval import DType, bool_ as bool, float16, float32, float64, int32, int64  # noqa: F401,A001
from llgrad.runtime.creation import (  # noqa: F401
    arange, as_tensor, empty, eye, from_numpy, full, full_like, linspace, manual_seed, ones,
    ones_like, rand, rand_like, randint, randn, randn_like, tensor, zeros, zeros_like,
)
from llgrad.runtime import config, errors  # noqa: F401
from llgrad.runtime.errors import PerformanceWarning  # noqa: F401
from llgrad.runtime import nn, optim, utils  # noqa: F401
from llgrad import linalg, special  # noqa: F401
from llgrad.linalg import cholesky_solve  # noqa: F401  (torch.cholesky_solve)
from llgrad.runtime.tensor import Tensor  # noqa: F401
from llgrad.runtime.custom import custom_vjp, stop_gradient  # noqa: F401
from llgrad.runtime.pytree import register_pytree, tree_map  # noqa: F401
from llgrad.runtime.functions import *  # noqa: F401,F403
from llgrad.runtime.functions import __all__ as _fn_all

double, float, long = float64, float32, int64  # noqa: A001

# ---- random numbers with generators, save/load (issue 15) ---------------------------------------
from llgrad.runtime.creation import empty_like  # noqa: E402,F401
from llgrad.runtime.rng import (  # noqa: E402,F401
    Generator, bernoulli, default_generator, get_rng_state, initial_seed, multinomial, normal,
    randint_like, randperm, seed, set_rng_state,
)
from llgrad.runtime.serialization import load, save  # noqa: E402,F401


def _alias(name: str, module) -> None:
    """Expose a runtime package under the public name (llgrad.autograd -> runtime/autograd),
    registering its submodules too so no module is ever imported twice."""
    prefix = module.__name__
    for key, mod in list(_sys.modules.items()):
        if key == prefix or key.startswith(prefix + "."):
            _sys.modules[name + key[len(prefix):]] = mod


# forward_ad subclasses Tensor, so it loads once runtime has (not from autograd/__init__)
from llgrad.runtime.autograd import forward_ad as _forward_ad  # noqa: E402,F401
_alias("llgrad.autograd", autograd)
from llgrad.runtime.autograd import profiler  # noqa: E402,F401  (llgrad.profiler.profile)
_sys.modules["llgrad.profiler"] = profiler
_sys.modules["llgrad.config"] = config  # llgrad.config.update("log_compiles", True)
_alias("llgrad.nn", nn)
_alias("llgrad.optim", optim)
_alias("llgrad.utils", utils)

__version__ = "0.1.0"

_LAZY = {name: "llgrad.api" for name in ("differentiate", "grad", "value_and_grad",
                                          "jacobian", "hessian", "hvp", "jvp", "jacfwd",
                                          "jacrev", "vmap", "Differentiable")}
_LAZY["checkpoint"] = _LAZY["checkpointed"] = "llgrad.checkpointing"


def __getattr__(name: str):
    # The compiler (and llvmlite) load on first use, so `import llgrad` stays light; Dask
    # only when asked for (llgrad[distributed]).
    import importlib
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    if name == "distributed":
        return importlib.import_module("llgrad.distributed")
    raise AttributeError(f"module 'llgrad' has no attribute {name!r}")
