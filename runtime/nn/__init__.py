"""llgrad.nn: Module, Parameter, layers, losses, `functional`, `init` and `utils`, as torch.nn."""
from llgrad.runtime.nn import functional, init, utils  # noqa: F401
from llgrad.runtime.nn.activation import (  # noqa: F401
    CELU, ELU, GELU, SELU, Hardtanh, LeakyReLU, LogSigmoid, LogSoftmax, ReLU, ReLU6, Sigmoid,
    SiLU, Softmax, Softplus, Tanh,
)
from llgrad.runtime.nn.attention import MultiheadAttention  # noqa: F401
from llgrad.runtime.nn.container import ModuleDict, ModuleList, Sequential  # noqa: F401
from llgrad.runtime.nn.conv import (  # noqa: F401
    AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, Conv1d, Conv2d, ConvTranspose1d,
    ConvTranspose2d, MaxPool1d, MaxPool2d,
)
from llgrad.runtime.nn.layers import Dropout, Flatten, Identity, Linear  # noqa: F401
from llgrad.runtime.nn.loss import (  # noqa: F401
    BCELoss, BCEWithLogitsLoss, CrossEntropyLoss, HuberLoss, KLDivLoss, L1Loss, MSELoss, NLLLoss,
    SmoothL1Loss,
)
from llgrad.runtime.nn.module import Module  # noqa: F401
from llgrad.runtime.nn.normalization import (  # noqa: F401
    BatchNorm1d, BatchNorm2d, Embedding, GroupNorm, LayerNorm,
)
from llgrad.runtime.nn.parameter import Parameter  # noqa: F401
from llgrad.runtime.nn.rnn import GRU, LSTM, RNN, GRUCell, LSTMCell, RNNCell, RNNBase  # noqa: F401
