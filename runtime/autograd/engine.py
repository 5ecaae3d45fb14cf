"""The backward engine: dependency-counted execution of the graph, in reverse creation order.

Each node runs once, after every consumer of its outputs has sent its gradient; gradients
for one output are summed. Hooks, retain_grad, anomaly checks and the profiler hook in here.
"""
from __future__ import annotations

import heapq

import numpy as np

from llgrad.runtime.autograd.graph import AccumulateGrad, Node, PrimNode
from llgrad.runtime.autograd.state import PROFILER, STATE
from llgrad.runtime.errors import AutogradError


def _root_edge(t):
    if t._grad_fn is not None:
        return t._grad_fn, t._output_nr
    if t._requires_grad:
        return t._accumulator(), 0
    return None


def _collect(roots):
    """Dependency counts: how many edges point at each node reachable from the roots; and
    whether every edge points at an older node (see _needed)."""
    deps = {}
    rootset = set(roots)
    stack = list(roots)
    pop, push = stack.pop, stack.append
    ordered = True
    while stack:
        n = pop()
        seq = n._seq
        for nxt, _ in n.next_functions:
            if nxt is None:
                continue
            c = deps.get(nxt)
            if c is None:
                deps[nxt] = 1
                if nxt not in rootset:
                    push(nxt)
                if nxt._seq >= seq:
                    ordered = False
            else:
                deps[nxt] = c + 1
    return deps, rootset, ordered


def _seq_of(n):
    return n._seq


# Note [Which nodes autograd.grad runs]
# grad(outputs, inputs) runs only the nodes from which some input's node is reachable (as
# PyTorch's exec_info). A node is made after the nodes its edges point at, so its sequence
# number is larger than theirs (_collect checks this for the graph at hand), and one pass over
# the nodes in increasing sequence order sees every node's successors before the node itself.
# A graph breaking that order (none that llgrad makes) takes a depth-first search instead.
def _needed(nodes, targets, ordered):
    """Nodes from which some target node is reachable (the ones worth running)."""
    if not ordered:
        return _needed_dfs(nodes, targets)
    needed = set(targets)
    add = needed.add
    for n in sorted(nodes, key=_seq_of):
        if n in needed:
            continue
        for nxt, _ in n.next_functions:
            if nxt in needed:
                add(n)
                break
    return needed


def _needed_dfs(nodes, targets):
    """_needed by a depth-first search, for any graph."""
    memo = {}
    for start in nodes:
        if start in memo:
            continue
        stack = [(start, iter(start.next_functions))]
        memo[start] = start in targets
        while stack:
            n, it = stack[-1]
            for nxt, _ in it:
                if nxt is None:
                    continue
                if nxt not in memo:
                    memo[nxt] = nxt in targets
                    stack.append((nxt, iter(nxt.next_functions)))
                    break
            else:
                stack.pop()
                if any(memo.get(nx, False) for nx, _ in n.next_functions if nx is not None):
                    memo[n] = True
    return {n for n, v in memo.items() if v}


def _accumulate(buf, i, g):
    cur = buf[i]
    buf[i] = g if cur is None else cur + g


def _call_hooks(hooks, g):
    for fn in list(hooks.values()):
        r = fn(g)
        if r is not None:
            g = r
    return g


def run_backward(tensors, grad_tensors, retain_graph, create_graph, inputs=None,
                 accumulate=True, allow_unused=False):
    """Run the graph backward from `tensors`. With `inputs`, return their gradients (grad
    mode, `accumulate=False`) or accumulate only into their `.grad` (backward(inputs=...))."""
    roots, root_grads = [], []
    for i, (t, g) in enumerate(zip(tensors, grad_tensors)):
        edge = _root_edge(t)
        if edge is None:
            raise AutogradError(f"element {i} of tensors does not require grad and does not "
                                f"have a grad_fn",
                                fix="call .requires_grad_() on the leaf tensors you want "
                                "gradients for, and compute outside no_grad()")
        roots.append(edge)
        root_grads.append(g)

    targets = None
    if inputs is not None:
        targets = {}
        for k, t in enumerate(inputs):
            edge = _root_edge(t) if (t._grad_fn is not None or t._requires_grad) else None
            if edge is None:
                raise AutogradError(f"One of the differentiated Tensors (input {k}) does not "
                                    f"require grad",
                                    fix="set requires_grad=True on it before the forward")
            targets.setdefault(edge, []).append(k)
    root_nodes = list(dict.fromkeys(n for n, _ in roots))
    deps, nodes, ordered = _collect(root_nodes)
    needed = None
    if targets is not None:
        target_nodes = {n for n, _ in targets}
        needed = _needed(nodes.union(deps), target_nodes, ordered)
    buffers = {}
    for (n, nr), g in zip(roots, root_grads):
        buf = buffers.get(n)
        if buf is None:
            buf = buffers[n] = [None] * n.n_outputs
        _accumulate(buf, nr, g)
    captured = [None] * (len(inputs) if inputs is not None else 0)
    ready = [(-n._seq, n) for n in root_nodes if deps.get(n, 0) == 0]  # sequence numbers
    heapq.heapify(ready)                                                # are unique
    heappop, heappush = heapq.heappop, heapq.heappush
    prof = PROFILER[0]
    state = STATE
    anomaly = state.anomaly
    prev_mode = state.grad_enabled
    state.grad_enabled = create_graph
    single = None  # the one node the last node made ready, kept out of the heap (chains)
    try:
        while True:
            if single is not None and not ready:
                node = single
            else:
                if single is not None:
                    heappush(ready, (-single._seq, single))
                if not ready:
                    break
                node = heappop(ready)[1]
            single = None
            grads = buffers.pop(node, None)
            if grads is None:
                grads = [None] * node.n_outputs
            if targets is not None and node not in needed:  # (its hooks do not run)
                _release_edges(node, [None] * len(node.next_functions), deps, buffers, ready)
                continue
            plain = node._x is None and prof is None and not anomaly
            if node._x is not None or (type(node) is AccumulateGrad and node.variable._hooks):
                grads = _pre(node, grads)
            if targets is not None:
                if node in target_nodes:
                    for nr in range(len(grads)):
                        for k in targets.get((node, nr), ()):
                            captured[k] = grads[nr]
                if not accumulate and type(node) is AccumulateGrad:
                    continue  # (a leaf: no edges)
            if len(grads) == 1:
                if grads[0] is None:
                    outs = [None] * len(node.next_functions)
                elif plain:
                    outs = node.apply(grads)  # the common case, without _execute's checks
                else:
                    outs = _execute(node, grads, prof)
            elif all(g is None for g in grads):
                outs = [None] * len(node.next_functions)
            else:
                outs = _execute(node, grads, prof)
            if not retain_graph:
                node.release()
            for (nxt, nr), g in zip(node.next_functions, outs):  # _release_edges, inlined
                if nxt is None:
                    continue
                if g is not None:
                    buf = buffers.get(nxt)
                    if buf is not None:
                        cur = buf[nr]
                        buf[nr] = g if cur is None else cur + g
                    elif nxt.n_outputs == 1:
                        buffers[nxt] = [g]
                    else:
                        buf = buffers[nxt] = [None] * nxt.n_outputs
                        buf[nr] = g
                d = deps[nxt] - 1
                deps[nxt] = d
                if d == 0:
                    if single is None:
                        single = nxt
                    else:
                        heappush(ready, (-nxt._seq, nxt))
            outs = grads = g = None  # hold no gradient between nodes (AccumulateGrad
            #                          takes a buffer nobody else holds instead of copying)
    finally:
        state.grad_enabled = prev_mode
    if inputs is None:
        return None
    for k, g in enumerate(captured):
        if g is None and not allow_unused and not accumulate:
            raise AutogradError(f"One of the differentiated Tensors (input {k}) appears to not "
                                f"have been used in the graph.",
                                fix="set allow_unused=True if this is the desired behavior")
    if accumulate:  # backward(inputs=...) on non-leaf inputs: accumulate into their .grad
        for t, g in zip(inputs, captured):
            if g is not None and t._grad_fn is not None:
                t._grad = g if t._grad is None else t._grad + g
        return None
    return tuple(captured)


def _pre(node, grads):
    x = node._x
    th = x.tensor_hooks if x is not None and not isinstance(node, AccumulateGrad) else None
    if th:
        for nr, hooks in th.items():
            if hooks and grads[nr] is not None:
                grads[nr] = _call_hooks(hooks, grads[nr])
    elif isinstance(node, AccumulateGrad) and node.variable._hooks and grads[0] is not None:
        grads[0] = _call_hooks(node.variable._hooks, grads[0])
    if x is not None and x.retain:
        for nr, ref in x.retain.items():
            t = ref()
            if t is not None and grads[nr] is not None:
                g = grads[nr]
                t._grad = (g.detach() if not STATE.grad_enabled else g) if t._grad is None \
                    else t._grad + g
    if x is not None and x.pre_hooks:
        for fn in list(x.pre_hooks.values()):
            r = fn(tuple(grads))
            if r is not None:
                grads = list(r)
    return grads


def _execute(node: Node, grads, prof):
    if prof is not None:
        prof.begin(node.name())
    try:
        _materialize(node, grads)
        outs = node.apply(grads)
    except Exception as e:
        if STATE.anomaly and node._trace:
            _report_forward_trace(node, e)
        raise
    finally:
        if prof is not None:
            prof.end()
    post = node._x.post_hooks if node._x is not None else None
    if post:
        for fn in list(post.values()):
            r = fn(tuple(outs), tuple(grads))
            if r is not None:
                outs = list(r)
    if STATE.anomaly and STATE.anomaly_check_nan:
        for i, g in enumerate(outs):
            if g is not None and np.isnan(g._data).any():
                err = AutogradError(f"Function '{node.name()}' returned nan values in its "
                                    f"{i}th output.",
                                    fix="the forward traceback printed above shows the op that "
                                    "created this node: check its inputs for values outside "
                                    "its domain (log/sqrt of <= 0, 0/0, inf - inf)")
                if node._trace:
                    _report_forward_trace(node, err)
                raise err
    return outs


def _materialize(node, grads):
    """Missing gradients of a multi-output node become zeros (materialize_grads)."""
    if len(grads) > 1 and any(g is None for g in grads):
        from llgrad.runtime.tensor import Tensor
        metas = node.out_meta if isinstance(node, PrimNode) else getattr(node, "out_meta", None)
        if metas is None or getattr(node, "materialize", True) is False:
            return
        for i, g in enumerate(grads):
            if g is None:
                grads[i] = Tensor._wrap(np.zeros(*metas[i]))


def _report_forward_trace(node, err):
    from llgrad.runtime.autograd.anomaly_mode import report_forward_trace
    report_forward_trace(node, err)


def _release_edges(node, outs, deps, buffers, ready):
    for (nxt, nr), g in zip(node.next_functions, outs):
        if nxt is None:
            continue
        if g is not None:
            buf = buffers.get(nxt)
            if buf is None:
                buf = buffers[nxt] = [None] * nxt.n_outputs
            _accumulate(buf, nr, g)
        d = deps[nxt] - 1
        deps[nxt] = d
        if d == 0:
            heapq.heappush(ready, (-nxt._seq, nxt))
