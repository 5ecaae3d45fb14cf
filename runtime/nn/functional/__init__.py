"""`llgrad.nn.functional`: stateless layers and losses, as `torch.nn.functional`: activations,
linear, dropout, embedding, convolutions and pooling, normalisation, losses.

Written with the ops API (and the layer primitives of runtime/ops), so they differentiate like
any op, to any order, and each builds the graph nodes PyTorch's would.
"""
from llgrad.runtime.nn.functional.activation import *  # noqa: F401,F403
from llgrad.runtime.nn.functional.basic import *  # noqa: F401,F403
from llgrad.runtime.nn.functional.conv import *  # noqa: F401,F403
from llgrad.runtime.nn.functional.loss import *  # noqa: F401,F403
from llgrad.runtime.nn.functional.norm import *  # noqa: F401,F403
