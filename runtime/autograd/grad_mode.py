"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode (thread local).

Each works as a context manager and as a decorator, as in PyTorch.
"""
from __future__ import annotations

import functools
import inspect

from llgrad.runtime.autograd.state import STATE


def is_grad_enabled() -> bool:
    """True when operations record the autograd graph (thread local)."""
    return STATE.grad_enabled


def is_inference_mode_enabled() -> bool:
    return STATE.inference


class _Mode:
    """Base: a context manager that also decorates functions and generators."""

    def __call__(self, fn):
        if inspect.isgeneratorfunction(fn):
            @functools.wraps(fn)
            def gen(*args, **kwargs):
                with self.clone():
                    yield from fn(*args, **kwargs)
            return gen

        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with self.clone():
                return fn(*args, **kwargs)
        return wrapper

    def clone(self):
        return type(self)()

    def __enter__(self):
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self._enabled()

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False


class _NoParamMode(_Mode):
    """A mode that may also decorate without parentheses (`@no_grad`), as in PyTorch."""

    def __new__(cls, orig_func=None):
        if orig_func is None:
            return super().__new__(cls)
        return cls()(orig_func)


class no_grad(_NoParamMode):
    """Disable graph recording (thread local): results have requires_grad=False.

    Example:
        >>> import llgrad as lg
        >>> x = lg.tensor([1.], requires_grad=True)
        >>> with lg.no_grad():
        ...     y = x * 2
        >>> y.requires_grad
        False
    """

    def __init__(self, orig_func=None):
        pass

    def _enabled(self):
        return False


class enable_grad(_NoParamMode):
    """Enable graph recording inside a no_grad region (thread local)."""

    def _enabled(self):
        return True


class set_grad_enabled(_Mode):
    """Set grad mode on (True) or off (False); works as a function, context manager or decorator.

    Calling it as a function switches the mode immediately (thread local).
    """

    def __init__(self, mode: bool):
        self.mode = bool(mode)
        self._prev = STATE.grad_enabled
        STATE.grad_enabled = self.mode

    def clone(self):
        return set_grad_enabled(self.mode)

    def __call__(self, fn):
        STATE.grad_enabled = self._prev  # used as a decorator: do not switch now
        return super().__call__(fn)

    def _enabled(self):
        return self.mode

    def __enter__(self):
        STATE.grad_enabled = self.mode

    def __exit__(self, *exc):
        STATE.grad_enabled = self._prev
        return False


class inference_mode(_Mode):
    """Like no_grad, for inference: no graph is recorded and no tensors are saved."""

    def __new__(cls, mode=True):
        if callable(mode):  # @inference_mode without parentheses
            return cls()(mode)
        return super().__new__(cls)

    def __init__(self, mode: bool = True):
        self.mode = mode

    def clone(self):
        return inference_mode(self.mode)

    def _enabled(self):
        return STATE.grad_enabled if not self.mode else False

    def __enter__(self):
        self._prev_inf = STATE.inference
        STATE.inference = self.mode
        super().__enter__()

    def __exit__(self, *exc):
        STATE.inference = self._prev_inf
        return super().__exit__(*exc)
