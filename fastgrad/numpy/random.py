"""Random arrays (``fastgrad.np.random``), float32 unless ``dtype`` is given. Not recorded."""

import threading

import numpy as _np

from fastgrad._core._array import _wrap
from fastgrad._api._creation import default_float as _default_float
from fastgrad.context import check_device

_state = threading.local()
_seed = [None]


def _rng():
    # One generator per thread: threads draw independent streams, and seed() reseeds the
    # calling thread's generator deterministically.
    rng = getattr(_state, "rng", None)
    if rng is None:
        rng = _state.rng = _np.random.default_rng(_seed[0])
    return rng


def seed(seed=None, ctx=None):
    """Seed the generator of the calling thread (and the default for new threads)."""
    _seed[0] = seed
    _state.rng = _np.random.default_rng(seed)


def _size(size, shape, out=None):
    if size is None and shape is None and out is not None:
        return tuple(out.shape)          # uniform(low, high, out=arr) fills arr
    return shape if size is None else size


def _float(dtype, out=None):
    # float32, or float64 after npx.set_np(dtype=True) (MXNet's default float type); the
    # dtype of ``out`` when one is given
    if dtype is None and out is not None:
        return out.dtype
    return _default_float() if dtype is None else dtype


def _into(out, values):
    """The samples as a new array, or written into ``out`` (MXNet's ``out=``) and ``out``."""
    if out is None:
        return _wrap(values)
    if tuple(out.shape) != values.shape:
        raise ValueError("np.random: out has shape %s, the samples have shape %s"
                         % (tuple(out.shape), values.shape))
    out[...] = values
    return out


def uniform(low=0.0, high=1.0, size=None, dtype=None, ctx=None, out=None, shape=None):
    """Samples from the uniform distribution on ``[low, high)``."""
    check_device(ctx)
    return _into(out, _np.asarray(_rng().uniform(low, high, _size(size, shape, out)),
                                  dtype=_float(dtype, out)))


def normal(loc=0.0, scale=1.0, size=None, dtype=None, ctx=None, out=None, shape=None):
    """Samples from the normal distribution."""
    check_device(ctx)
    return _into(out, _np.asarray(_rng().normal(loc, scale, _size(size, shape, out)),
                                  dtype=_float(dtype, out)))


def randn(*size, dtype=None):
    return normal(size=size, dtype=dtype)


def rand(*size, dtype=None):
    return uniform(size=size, dtype=dtype)


def randint(low, high=None, size=None, dtype=None, ctx=None, out=None):
    """Random integers from ``[low, high)`` (int64 unless ``dtype`` is given)."""
    check_device(ctx)
    if dtype is None:
        dtype = _np.int64 if out is None else out.dtype
    return _into(out, _np.asarray(_rng().integers(low, high, _size(size, None, out)),
                                  dtype=dtype))


def choice(a, size=None, replace=True, p=None, ctx=None, out=None):
    a = _np.asarray(a)
    return _wrap(_np.asarray(_rng().choice(a, size, replace=replace, p=p)))


def shuffle(x):
    """Shuffle the first axis of ``x`` in place."""
    perm = _rng().permutation(x.shape[0])
    x[...] = _np.asarray(x)[perm]


def permutation(x):
    if isinstance(x, int):
        return _wrap(_rng().permutation(x))
    return _wrap(_rng().permutation(_np.asarray(x)))


def bernoulli(prob=0.5, size=None, dtype=None):
    return _wrap((_rng().random(size) < prob).astype(_float(dtype)))
