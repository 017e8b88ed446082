"""``mx.random``: seeding and MXNet 1.x's samplers (NDArrays, float32), as ``mx.nd.random``."""

from fastgrad.ndarray.random import (seed, uniform, normal, randn, randint, poisson,  # noqa: F401
                                     exponential, gamma, negative_binomial,
                                     generalized_negative_binomial, multinomial, shuffle)

__all__ = ["seed", "uniform", "normal", "randn", "randint", "poisson", "exponential", "gamma",
           "negative_binomial", "generalized_negative_binomial", "multinomial", "shuffle"]
