"""`@llgrad.differentiate` on methods: a Differentiable bound to an instance.

Note [Methods]
`@differentiate` on a method binds like a function (Differentiable.__get__): `m.loss(w)` calls
the function with `self` first. `self` is an argument like the others: a plain object is
static, keyed by a snapshot of its contents (Note [Static arguments] in tracer/signature.py),
so the arrays it holds are constants of the trace and assigning or mutating `self.W` traces
again at the next call (pass arrays that change at every step as arguments instead); a
dataclass or registered pytree `self` is traced, its arrays being leaves. `wrt` counts the
arguments after `self` (wrt=0 is the first of them), as `jax.jit(f, static_argnums=0)` users
write it; a name selects any parameter, `wrt="self"` included. A function becomes a method
when it is defined in a class body (Differentiable.__set_name__), so `Model.loss.grad(m, w)`
counts the same way, and a bound call (`m.loss`, or `llgrad.grad(m.loss)`) always does. A
bound Differentiable is made per attribute access, as Python's bound methods are; what it
compiles is cached on the function, keyed by `self`'s contents, so equal instances share it.
"""
from __future__ import annotations

from llgrad.tracer import signature as sig


class BoundDifferentiable:
    """A Differentiable bound to an instance (`m.loss`): the instance is passed as `self`."""

    __slots__ = ("__func__", "__self__")

    def __init__(self, func, obj):
        self.__func__, self.__self__ = func, obj

    def __call__(self, *args, **kwargs):
        return self.__func__._call((self.__self__,) + args, kwargs, True)

    def value_and_grad(self, *args, **kwargs):
        """(value, gradient w.r.t. `wrt`, counted after `self`)."""
        return self.__func__._value_and_grad((self.__self__,) + args, kwargs, True)

    def grad(self, *args, **kwargs):
        """The gradient w.r.t. `wrt` (counted after `self`)."""
        return self.__func__._grad_result(self.value_and_grad(*args, **kwargs))

    def inspect(self, *args, **kwargs):
        return self.__func__._inspect((self.__self__,) + args, kwargs, True)

    def __getattr__(self, name):
        return getattr(self.__func__, name)

    def _lg_static_key(self):  # as a static argument: the function and self's contents
        return ("bound", sig.Identity(self.__func__), sig.static_key(self.__self__))

    def __repr__(self) -> str:
        return f"<bound differentiable {self.__func__.__name__} of {self.__self__!r}>"


__all__ = ["BoundDifferentiable"]
