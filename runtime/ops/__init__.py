"""The ops API: every array operation, on eager Tensors, IR values and traced values alike.

VJP rules are written only with these functions, so one rule serves eager mode, higher-order
gradients and the compiler's AD. Each primitive is declared once in its family module.
"""
from llgrad.runtime.ops.elementwise import (  # noqa: F401
    abs, add, astype, clip, copy, cos, div, eq, exp, expm1, floor, floor_divide, ge, gt, le, log,
    log1p, logical_and, logical_not, logical_or, lt, maximum, minimum, mul, ne, neg, pow, relu,
    remainder, rsqrt, sigmoid, sign, sin, sqrt, square, stop_gradient, sub, tan, tanh, where,
)
from llgrad.runtime.ops.index import getitem, index_add, setitem, slice_axis  # noqa: F401
from llgrad.runtime.ops.linalg import addmm, affine, dot, matmul, outer  # noqa: F401
from llgrad.runtime.ops.loss import (  # noqa: F401
    binary_cross_entropy, binary_cross_entropy_with_logits, huber_loss, mse_loss, nll_loss,
    smooth_l1_loss,
)
from llgrad.runtime.ops.reduce import (  # noqa: F401
    amax, amin, argmax, argmin, log_softmax, logsumexp, mean, norm, prod, reduce_prod, reduce_sum,
    softmax, std, sum, var, vector_norm,
)
from llgrad.runtime.ops.shape import (  # noqa: F401
    broadcast_to, concatenate, expand, flatten, movedim, ravel, repeat, reshape, split, squeeze,
    stack, sum_to, swapaxes, transpose, unsqueeze,
)
from llgrad.runtime.ops.special import (  # noqa: F401
    beta, betaln, digamma, erf, erfc, erfinv, gamma, lgamma, log_expit, log_ndtr, logit, ndtr,
    polygamma, trigamma, xlog1py, xlogy,
)
from llgrad.runtime.ops.special_scipy import (  # noqa: F401
    betainc, binom, dawsn, erfcx, exprel, gammainc, gammaincc, i0, i0e, i1, i1e, jv, kv, kve,
    ndtri,
)
from llgrad.runtime.ops.ufuncs import (  # noqa: F401
    arccos, arccosh, arcsin, arcsinh, arctan, arctan2, arctanh, cbrt, ceil, copysign, cosh,
    deg2rad, divmod, exp2, fmod, heaviside, hypot, isfinite, isinf, isnan, log2, log10, logaddexp,
    logaddexp2, nan_to_num, positive, rad2deg, reciprocal, rint, round, signbit, sinc, sinh,
    trunc,
)
from llgrad.runtime.ops import control  # noqa: F401,E402  (registers IR structural prims)

# ---- numpy scans, sorting, structural and contraction functions (issue 11, branch npshape) ----
from llgrad.runtime.ops.scan import (  # noqa: F401,E402
    cummax, cummin, cumprod, cumsum, iir, linrec, logcumsumexp,
)
from llgrad.runtime.ops.sort import (  # noqa: F401,E402
    argsort, median, nanmedian, nanpercentile, nanquantile, percentile, quantile, sort,
)
from llgrad.runtime.ops.gather import take, take_along_axis  # noqa: F401,E402
from llgrad.runtime.ops.gather import repeat as repeat_interleave  # noqa: F401,E402
from llgrad.runtime.ops.structure import (  # noqa: F401,E402
    diag, diagonal, flip, pad, roll, torch_pad, trace, tril, triu,
)
from llgrad.runtime.ops.einsum import cross, einsum, inner, kron, tensordot, vdot  # noqa: F401,E402
from llgrad.runtime.ops.stats import (  # noqa: F401,E402
    average, count_nonzero, diff, nanmean, nansum, ptp,
)
from llgrad.runtime.ops.arrays import meshgrid, moveaxis, tile  # noqa: F401,E402

# ---- linear algebra (issue 11, branch linalg) ----------------------------------------------------
from llgrad.runtime.ops.linalg_solve import (  # noqa: F401,E402
    cholesky, cholesky_solve, det, inv, matrix_power, slogdet, solve, solve_triangular,
    triangular_solve,
)
from llgrad.runtime.ops.linalg_spectral import (  # noqa: F401,E402
    eigh, eigvalsh, matrix_norm, pinv, qr, svd, svdvals,
)

# ---- neural-network layers (issue 15, branch eager15b) ---------------------------------------
from llgrad.runtime.ops.activation import (  # noqa: F401,E402
    elu, gelu, hardtanh, leaky_relu, silu, softplus,
)
from llgrad.runtime.ops.conv import conv, conv_transpose  # noqa: F401,E402
from llgrad.runtime.ops import normalization, pool  # noqa: F401,E402  (their primitives)
from llgrad.runtime.ops.embedding import embedding  # noqa: F401,E402
from llgrad.runtime.ops.rnn import gru_layer, lstm_layer, rnn_layer  # noqa: F401,E402

# ---- PyTorch's gather/scatter family along a dimension (issue 15) -------------------------------
from llgrad.runtime.ops.torch_index import (  # noqa: F401,E402
    gather_dim, index_add_dim, index_select, scatter_add_dim, scatter_dim, topk,
)
