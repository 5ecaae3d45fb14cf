"""`llgrad.special`: special functions, as `torch.special` (and scipy.special's names)."""
from __future__ import annotations

from llgrad.runtime.functions import logit
from llgrad.runtime.ops import (
    beta, betaln, digamma, erf, erfc, erfinv, exp2, expm1, gamma, log1p, log_expit, log_ndtr,
    log_softmax, logsumexp, ndtr, polygamma, sigmoid, sinc, softmax, xlog1py, xlogy,
)
from llgrad.runtime.ops import (
    betainc, binom, dawsn, erfcx, exprel, gammainc, gammaincc, i0, i0e, i1, i1e, jv, kv, kve,
    ndtri,
)
from llgrad.runtime.ops import lgamma as gammaln
from llgrad.runtime.ops import round  # noqa: A004

expit = sigmoid
psi = digamma

__all__ = ["expit", "logit", "log_expit", "erf", "erfc", "erfinv", "gamma", "gammaln", "beta",
           "betaln", "digamma", "psi", "polygamma", "xlogy", "xlog1py", "ndtr", "log_ndtr",
           "logsumexp", "softmax", "log_softmax", "sinc", "exp2", "expm1", "log1p", "round",
           "i0", "i0e", "i1", "i1e", "ndtri", "erfcx", "dawsn", "exprel", "gammainc",
           "gammaincc", "betainc", "kv", "kve", "jv", "binom"]
