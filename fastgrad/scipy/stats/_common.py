"""Shared pieces of the distributions: standardizing, supports, logs of probabilities."""

import math

import numpy as _onp

from fastgrad._api import _functions as F
from fastgrad._core._array import ndarray, unwrap, _wrap


def as_array(x, like=None):
    """A fastgrad array for ``x`` (numbers and integer arrays become float64). A Python number
    takes the floating dtype of the array ``like`` when given: it is weak, as in NumPy 2, and
    does not widen a float32 computation (Note [Weak scalars] in ``_bindings.py``)."""
    if type(x) in (int, float) and like is not None \
            and _onp.dtype(getattr(like, "dtype", _onp.float64)).kind == "f":
        return _wrap(_onp.asarray(x, dtype=like.dtype))
    if isinstance(x, ndarray):
        return x if x.dtype.kind in "fc" else F.astype(x, _onp.float64)
    data = _onp.asarray(x)
    return _wrap(data if data.dtype.kind == "f" else data.astype(_onp.float64))


def standardize(x, loc, scale):
    """``(x - loc) / scale`` and ``log(scale)`` (Python numbers stay numbers, so a float32
    ``x`` keeps its dtype)."""
    if isinstance(scale, (int, float)):
        return (as_array(x) - loc) / scale, math.log(scale)
    scale = as_array(scale)
    return (as_array(x) - loc) / scale, F.log(scale)


def inside(z, lo, hi=None):
    """The mask ``lo <= z (<= hi)`` as a NumPy constant, and ``z`` moved to a safe point
    (``safe``) outside it, so that the rules of the unused branch of ``where`` see finite
    values (a NaN times a zero gradient is still NaN)."""
    data = unwrap(z)
    mask = data >= lo if hi is None else (data >= lo) & (data <= hi)
    safe = lo + 0.5 if hi is None else (lo + hi) / 2.0
    return mask, F.where(mask, z, safe)


def log_or_neg_inf(p):
    """``log(p)``, ``-inf`` where ``p`` is 0."""
    mask = unwrap(p) > 0
    return F.where(mask, F.log(F.where(mask, p, 1.0)), -_onp.inf)
