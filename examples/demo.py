"""llgrad's main job in one screen: compile a numpy function, print its value, its gradient
(checked against finite differences) and the generated backward IR."""
import numpy as np

import llgrad


@llgrad.differentiate
def loss(w, x, y):
    z = np.tanh(x @ w)
    return np.mean((z - y) ** 2) + 0.01 * np.sum(w * w)


rng = np.random.default_rng(0)
w, x, y = rng.normal(size=3), rng.normal(size=(8, 3)), rng.normal(size=8)

value, grad = loss.value_and_grad(w, x, y)
print(f"value    = {value:.6f}")
print(f"gradient = {grad}")

eps = 1e-6
fd = np.array([(loss(w + eps * e, x, y) - loss(w - eps * e, x, y)) / (2 * eps)
               for e in np.eye(3)])
print(f"finite differences agree: {np.allclose(grad, fd, rtol=1e-6, atol=1e-9)}")

print("\nbackward IR (forward and reverse sweep, optimised):")
print(loss.inspect(w, x, y).backward_ir)
