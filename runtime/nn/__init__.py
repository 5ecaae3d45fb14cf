"""llgrad.nn: Module, Parameter, layers, losses, `functional` and `init`, as in torch.nn."""
from llgrad.runtime.nn import functional, init  # noqa: F401
from llgrad.runtime.nn.layers import (  # noqa: F401
    AvgPool2d, Dropout, Flatten, Identity, LeakyReLU, Linear, LogSoftmax, ModuleList, ReLU,
    Sequential, Sigmoid, Softmax, Tanh,
)
from llgrad.runtime.nn.loss import CrossEntropyLoss, MSELoss, NLLLoss  # noqa: F401
from llgrad.runtime.nn.module import Module  # noqa: F401
from llgrad.runtime.nn.parameter import Parameter  # noqa: F401
