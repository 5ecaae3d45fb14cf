"""llgrad.optim: Optimizer, SGD, Adam, AdamW, RMSprop, Adagrad and `lr_scheduler`, as
torch.optim."""
from llgrad.runtime.optim import adam, lr_scheduler, optimizer, rmsprop, sgd  # noqa: F401
from llgrad.runtime.optim.adam import Adam, AdamW  # noqa: F401
from llgrad.runtime.optim.optimizer import Optimizer  # noqa: F401
from llgrad.runtime.optim.rmsprop import Adagrad, RMSprop  # noqa: F401
from llgrad.runtime.optim.sgd import SGD  # noqa: F401
