"""Grad modes: no_grad, enable_grad, set_grad_enabled, inference_mode as context managers and
decorators; thread locality."""
from __future__ import annotations

import threading

import llgrad as lg


def _x():
    return lg.tensor([1.0], requires_grad=True)


def test_no_grad_context():
    x = _x()
    with lg.no_grad():
        assert not lg.is_grad_enabled()
        y = x * 2
    assert lg.is_grad_enabled()
    assert not y.requires_grad and y.grad_fn is None


def test_no_grad_saves_nothing():
    x = _x()
    with lg.no_grad():
        y = x.exp()
    assert y.grad_fn is None  # no node, so nothing saved


def test_enable_grad_inside_no_grad():
    x = _x()
    with lg.no_grad():
        with lg.enable_grad():
            y = x * 2
        z = x * 2
    assert y.requires_grad and not z.requires_grad


def test_set_grad_enabled_function_and_context():
    x = _x()
    with lg.set_grad_enabled(False):
        assert not (x * 2).requires_grad
    assert lg.is_grad_enabled()
    lg.set_grad_enabled(False)
    try:
        assert not lg.is_grad_enabled() and not (x * 2).requires_grad
    finally:
        lg.set_grad_enabled(True)
    assert lg.is_grad_enabled()
    with lg.set_grad_enabled(True):
        assert (x * 2).requires_grad


def test_modes_as_decorators():
    x = _x()

    @lg.no_grad()
    def f(t):
        return t * 2

    @lg.no_grad
    def f2(t):
        return t * 2

    @lg.enable_grad()
    def g(t):
        return t * 2

    @lg.set_grad_enabled(False)
    def h(t):
        return t * 2

    @lg.inference_mode()
    def i(t):
        return t * 2

    @lg.enable_grad
    def g2(t):
        return t * 2

    @lg.inference_mode
    def i2(t):
        return t * 2

    assert lg.is_grad_enabled()  # decorating switches nothing
    assert not f(x).requires_grad and not f2(x).requires_grad and not h(x).requires_grad
    assert not i(x).requires_grad and not i2(x).requires_grad
    with lg.no_grad():
        assert g(x).requires_grad and g2(x).requires_grad
    assert f.__name__ == "f"


def test_decorated_generator():
    x = _x()

    @lg.no_grad()
    def gen():
        yield x * 2
        yield x * 3

    assert [t.requires_grad for t in gen()] == [False, False]


def test_inference_mode():
    x = _x()
    with lg.inference_mode():
        assert lg.autograd.grad_mode.is_inference_mode_enabled()
        y = x * 2
    assert not y.requires_grad
    with lg.inference_mode(False):
        assert (x * 2).requires_grad


def test_mode_restored_after_exception():
    try:
        with lg.no_grad():
            raise ValueError
    except ValueError:
        pass
    assert lg.is_grad_enabled()


def test_grad_mode_is_thread_local():
    seen = {}
    ready, done = threading.Event(), threading.Event()

    def worker():
        ready.wait()
        x = _x()
        seen["enabled"] = lg.is_grad_enabled()
        seen["requires_grad"] = (x * 2).requires_grad
        with lg.no_grad():
            seen["inner"] = lg.is_grad_enabled()
        done.set()

    t = threading.Thread(target=worker)
    t.start()
    with lg.no_grad():
        ready.set()
        done.wait(10)
        assert not lg.is_grad_enabled()
    t.join()
    assert seen == {"enabled": True, "requires_grad": True, "inner": False}
    assert lg.is_grad_enabled()


def test_backward_inside_no_grad_still_works():
    x = _x()
    y = (x * 3).sum()
    with lg.no_grad():
        y.backward()
    assert x.grad.tolist() == [3.0]
