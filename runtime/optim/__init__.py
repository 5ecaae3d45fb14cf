"""llgrad.optim: Optimizer, SGD, Adam, AdamW, as in torch.optim."""
from llgrad.runtime.optim import adam, optimizer, sgd  # noqa: F401
from llgrad.runtime.optim.adam import Adam, AdamW  # noqa: F401
from llgrad.runtime.optim.optimizer import Optimizer  # noqa: F401
from llgrad.runtime.optim.sgd import SGD  # noqa: F401
