"""Random NDArrays (``fastgrad.nd.random``): ``uniform(low, high, shape=...)`` and friends."""

import numpy as _onp

from fastgrad._array import _wrap
from fastgrad.numpy import random as _r
from fastgrad.context import check_device


def _nd(a):
    # An NDArray, the class fastgrad.ndarray defines above this module and registers with
    # the array type (Note [Layers] in _layers.py).
    return _wrap(_onp.asarray(a)).as_nd_ndarray()


def uniform(low=0, high=1, shape=(), dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the uniform distribution on ``[low, high)`` (float32)."""
    check_device(ctx)
    return _nd(_r.uniform(low, high, size=shape, dtype=dtype))


def normal(loc=0, scale=1, shape=(), dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the normal distribution (float32)."""
    check_device(ctx)
    return _nd(_r.normal(loc, scale, size=shape, dtype=dtype))


def randint(low, high, shape=(), dtype=None, ctx=None, out=None, **kwargs):
    check_device(ctx)
    return _nd(_r.randint(low, high, size=shape, dtype=dtype or "int32"))


def seed(seed_state, ctx="all"):
    _r.seed(seed_state)
