"""Every stage of a compiled function, from Python: the traced graph, the optimised forward
IR, the forward+backward IR, the backward as readable numpy source, the head of the LLVM IR,
and a Graphviz picture of the IR. (From a shell: `python -m llgrad inspect FILE.py:FUNC`.)"""
import numpy as np

import llgrad


@llgrad.differentiate
def loss(w, x, y):
    z = x @ w
    err = np.where(z > 0, z - y, 0.1 * (z - y))   # a leaky residual
    return np.mean(err ** 2) + 0.01 * np.sum(w * w)


rng = np.random.default_rng(0)
w, x, y = rng.normal(size=3), rng.normal(size=(20, 3)), rng.normal(size=20)
ins = loss.inspect(w, x, y)

for title, text in [("graph (as traced)", ins.graph),
                    ("forward IR (optimised)", ins.forward_ir),
                    ("forward+backward IR", ins.backward_ir),
                    ("backward as Python source", ins.python_source)]:
    print(f"== {title} ==\n{text}\n")

print("== LLVM IR (first 12 lines) ==")
print("\n".join(str(ins.llvm_ir).splitlines()[:12]), "\n")
print("== stats ==")
print(ins.stats, "\n")

dot = ins.draw()                   # DOT text; ins.draw("loss.svg") renders with Graphviz
print(f"DOT picture of the backward IR: {len(dot.splitlines())} lines; path: {ins.path}")
