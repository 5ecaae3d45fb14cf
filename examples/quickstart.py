"""llgrad in 20 lines: eager autograd (PyTorch semantics) and a compiled gradient."""
import numpy as np

import llgrad as lg

# Eager: tensors remember how they were made; backward() fills .grad.
a = lg.tensor([1.0, 2.0, 3.0], requires_grad=True)
b = (a.exp() * a).sum()
b.backward()
print("eager    grad:", a.grad)   # (1 + a) * exp(a)


# Compiled: a plain numpy function, differentiated and compiled to native code.
@lg.differentiate
def f(x):
    return np.sum(np.exp(x) * x)


x = np.array([1.0, 2.0, 3.0])
print("compiled grad:", f.grad(x))
print("agree:", np.allclose(f.grad(x), a.grad.numpy()))
