"""llgrad.runtime: the language (primitives, ops) and the eager autograd engine. Needs only
numpy; imports no other llgrad layer."""
from llgrad.runtime import ops  # noqa: F401
from llgrad.runtime.tensor import Tensor  # noqa: F401
