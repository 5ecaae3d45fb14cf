"""The benchmark workloads, one module per family.

* :mod:`.eager`  -- ``eager_overhead``, ``mlp_step`` (issue 2; ``mlp_step`` also issue 4)
* :mod:`.arrays` -- ``elementwise``, ``gmm`` (issue 4)
* :mod:`.loops`  -- ``recurrence``, ``lorenz_rk4``, ``newton``, ``rnn`` (issue 5)
* :mod:`.numba_style` -- ``gmm_loops``, ``stencil``: nested scalar loops as Numba users write
  them (issue 13)
* :mod:`.linalg` -- ``gp_nlml`` (issue 11)
* :mod:`.startup` -- ``cold_start``: process start to first gradient, cold vs warm cache (issue 6)
* :mod:`.calls` -- ``scale_1e4``, ``scale_1e6``, ``scale_f32_1e6``, ``two_results``: calls
  returning arrays, beside numpy
* :mod:`.nn` -- ``cnn_step``, ``lstm_step``: eager training steps of small networks (issue 15)

``ALL`` lists every workload in the order ``python -m benchmarks.run`` runs them.
"""

from . import arrays, calls, eager, linalg, loops, nn, numba_style, startup

ALL = (eager.WORKLOADS + arrays.WORKLOADS + loops.WORKLOADS + numba_style.WORKLOADS
       + linalg.WORKLOADS + startup.WORKLOADS + calls.WORKLOADS + nn.WORKLOADS)
BY_NAME = {w.name: w for w in ALL + linalg.EXTRA}  # EXTRA: --only, not in the default run
