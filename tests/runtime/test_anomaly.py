"""Anomaly mode: forward traceback of the failing node (user frames only), NaN checks,
thread-local switch, nothing recorded while off."""
from __future__ import annotations

import threading

import pytest

import llgrad as lg
from llgrad.autograd import Function


class MyFunc(Function):
    @staticmethod
    def forward(ctx, inp):
        return inp.clone()

    @staticmethod
    def backward(ctx, gO):
        raise RuntimeError("Some error in backward")


def test_backward_error_prints_forward_traceback(capsys):
    with lg.autograd.detect_anomaly():
        out = MyFunc.apply(lg.rand(10, 10, requires_grad=True)).sum()  # the forward line
        with pytest.raises(RuntimeError, match="Some error in backward") as info:
            out.backward()
    err = capsys.readouterr().err
    assert "Error detected in MyFuncBackward. Traceback of forward call that caused the " \
           "error:" in err
    assert "out = MyFunc.apply(lg.rand(10, 10, requires_grad=True)).sum()" in err
    assert __file__ in err and "runtime/autograd" not in err  # llgrad frames filtered
    notes = "".join(getattr(info.value, "__notes__", []))
    assert "MyFunc.apply" in notes


@pytest.mark.filterwarnings("ignore:invalid value encountered")
def test_nan_check():
    x = lg.tensor([-1.0, 1.0], requires_grad=True)
    with lg.autograd.detect_anomaly():
        y = lg.sqrt(x).sum()
        with pytest.raises(RuntimeError, match=r"Function 'SqrtBackward0' returned nan values "
                                               r"in its 0th output\."):
            y.backward()
    with lg.autograd.detect_anomaly(check_nan=False):
        lg.sqrt(x).sum().backward()  # no error: NaN checks off
    lg.sqrt(x).sum().backward()       # anomaly off: no error


def test_no_trace_recorded_when_off(capsys):
    out = MyFunc.apply(lg.rand(2, requires_grad=True)).sum()
    assert out.grad_fn._trace is None
    with pytest.raises(RuntimeError, match="Some error in backward"):
        out.backward()
    assert "Traceback of forward call" not in capsys.readouterr().err


def test_set_detect_anomaly_and_thread_local():
    assert not lg.autograd.is_anomaly_enabled()
    lg.autograd.set_detect_anomaly(True)
    try:
        assert lg.autograd.is_anomaly_enabled()
        seen = []
        t = threading.Thread(target=lambda: seen.append(lg.autograd.is_anomaly_enabled()))
        t.start()
        t.join()
        assert seen == [False]
    finally:
        lg.autograd.set_detect_anomaly(False)
    with lg.autograd.set_detect_anomaly(True):
        assert lg.autograd.is_anomaly_enabled()
    assert not lg.autograd.is_anomaly_enabled()


def test_decorator():
    @lg.autograd.detect_anomaly()
    def f():
        return lg.autograd.is_anomaly_enabled()

    assert f() and not lg.autograd.is_anomaly_enabled()
