"""Corpus programs that integrate ODEs with scipy.integrate (see tests/corpus/programs.py),
written as the pharmacokinetics notebooks write them: a right-hand side with its parameters
in `args`, solve_ivp at the sampling times, a weighted least-squares misfit."""
from __future__ import annotations

import numpy as np
import scipy.integrate

from tests.corpus.registry import program

PK_TIMES = np.array([0.25, 0.5, 1.0, 2.0, 4.0, 6.0, 8.0, 12.0])


def two_compartment(t, y, ka, cl, v1, q, v2):
    """Oral dose: gut -> central <-> peripheral, cleared from the central compartment."""
    gut, central, peripheral = y
    c1, c2 = central / v1, peripheral / v2
    return [-ka * gut,
            ka * gut - cl * c1 - q * (c1 - c2),
            q * (c1 - c2)]


def _pk_args(rng):
    true = scipy.integrate.solve_ivp(two_compartment, (0.0, 12.0), [100.0, 0.0, 0.0],
                                     t_eval=PK_TIMES, args=(1.2, 4.0, 20.0, 2.0, 40.0),
                                     rtol=1e-8, atol=1e-10).y[1] / 20.0
    observed = true * np.exp(0.1 * rng.standard_normal(len(PK_TIMES)))
    return np.log([1.0, 3.5, 25.0, 1.5, 30.0]), observed


@program(_pk_args)
def pk_two_compartment_fit(log_theta, observed, dose=100.0):
    """A two-compartment oral-absorption model fitted to plasma concentrations on a log
    scale (proportional error), parameters on the log scale, solved with RK45."""
    ka, cl, v1, q, v2 = np.exp(log_theta)
    sol = scipy.integrate.solve_ivp(two_compartment, (0.0, 12.0), [dose, 0.0, 0.0],
                                    t_eval=PK_TIMES, args=(ka, cl, v1, q, v2),
                                    rtol=1e-6, atol=1e-8)
    conc = sol.y[1] / v1
    return 0.5 * np.sum((np.log(conc) - np.log(observed)) ** 2) + 0.01 * np.sum(log_theta ** 2)
