"""Random NDArrays (``fastgrad.nd.random``, also ``mx.random``), with MXNet 1.x's rules.

Every sampler draws from ``fastgrad.np.random``'s generator, so ``mx.random.seed(n)`` makes
them all repeatable (MXNet's own streams are not reproduced). Note [Sampler shapes]: with
number parameters the result has shape ``shape`` (``(1,)`` when no shape is given, as NDArrays
have no 0-d form in MXNet 1.x); with NDArray parameters (all of one shape ``p``) it has shape
``p + shape``, ``prod(shape)`` draws per entry. Results are float32 unless ``dtype`` says
otherwise (``randint``: int32, ``multinomial``: int32); ``out=`` writes into an existing array.

>>> import fastgrad as mx
>>> mx.random.seed(0)
>>> mx.nd.random.poisson(mx.nd.array([1.0, 10.0]), shape=3).shape
(2, 3)
"""

import numbers

import numpy as _onp

from fastgrad._core._array import _wrap, ndarray as _array_type, unwrap
from fastgrad.numpy import random as _r
from fastgrad.context import check_device

__all__ = ["seed", "uniform", "normal", "randn", "randint", "poisson", "exponential", "gamma",
           "negative_binomial", "generalized_negative_binomial", "multinomial", "shuffle",
           "uniform_like", "normal_like", "gamma_like", "exponential_like", "poisson_like",
           "negative_binomial_like", "generalized_negative_binomial_like"]


def _nd(a):
    # An NDArray, the class fastgrad.ndarray defines above this module and the bootstrap
    # gives the array type (Note [Bootstrap] in _bootstrap.py).
    return _wrap(_onp.asarray(a)).as_nd_ndarray()


def _shape_tuple(shape):
    if shape is None:
        return ()
    if isinstance(shape, numbers.Integral):
        return (int(shape),)
    return tuple(int(s) for s in shape)


def _finish(values, dtype, out):
    result = _nd(values.astype(dtype, copy=False))
    if out is None:
        return result
    if tuple(out.shape) != result.shape:
        raise ValueError("random: out has shape %s, the samples have shape %s"
                         % (tuple(out.shape), result.shape))
    out[...] = result
    return out


def _sample(name, draw, params, shape, dtype, ctx, out, default_dtype="float32"):
    """Draw ``draw(generator, *params, size)`` with Note [Sampler shapes]."""
    check_device(ctx)
    arrays = [isinstance(p, (_array_type, _onp.ndarray)) for p in params]
    tail = _shape_tuple(shape)
    if any(arrays):
        if not all(arrays):
            raise TypeError("%s: distribution parameters must all have the same type (all "
                            "numbers or all NDArrays), got %s"
                            % (name, ", ".join(type(p).__name__ for p in params)))
        values = [_onp.asarray(unwrap(p), dtype=_onp.float64) for p in params]
        if any(v.shape != values[0].shape for v in values):
            raise ValueError("%s: the parameter arrays must have one shape, got %s"
                             % (name, ", ".join(str(v.shape) for v in values)))
        size = values[0].shape + tail
        values = [v.reshape(v.shape + (1,) * len(tail)) for v in values]
    else:
        for p in params:
            if not isinstance(p, numbers.Number):
                raise TypeError("%s: distribution parameters must be numbers or NDArrays, "
                                "not %s" % (name, type(p).__name__))
        values = [float(p) for p in params]
        size = (tail or (1,)) if out is None else tuple(out.shape)
    samples = draw(_r._rng(), *values, size)
    return _finish(_onp.asarray(samples), dtype or default_dtype, out)


def _like(name, draw, data, params, out):
    """A ``*_like`` sampler: number parameters, the shape and dtype of ``data``."""
    if data is None:
        raise TypeError("%s: give data, the array whose shape and dtype the samples take"
                        % name)
    data_values = _onp.asarray(unwrap(data))
    samples = draw(_r._rng(), *[float(p) for p in params], data_values.shape)
    return _finish(_onp.asarray(samples), data_values.dtype, out)


# The distributions, as (generator, *parameters, size) -> NumPy samples.
def _uniform(g, low, high, size):
    return g.uniform(low, high, size)


def _normal(g, loc, scale, size):
    return g.normal(loc, scale, size)


def _poisson(g, lam, size):
    return g.poisson(lam, size)


def _exponential_scale(g, scale, size):
    return g.exponential(scale, size)


def _exponential_rate(g, lam, size):
    return g.exponential(1.0 / _onp.asarray(lam), size)


def _gamma(g, alpha, beta, size):
    return g.gamma(alpha, beta, size)          # beta is the scale: mean alpha * beta


def _negative_binomial(g, k, p, size):
    return g.negative_binomial(k, p, size)     # failures before the k-th success


def _generalized_negative_binomial(g, mu, alpha, size):
    # mean mu, variance mu + alpha * mu**2: Poisson with a Gamma(1/alpha, alpha*mu) rate;
    # alpha = 0 is Poisson(mu)
    mu, alpha = _onp.broadcast_arrays(_onp.asarray(mu, dtype=float),
                                      _onp.asarray(alpha, dtype=float))
    mu, alpha = _onp.broadcast_to(mu, size), _onp.broadcast_to(alpha, size)
    rate = _onp.where(alpha > 0, g.gamma(1.0 / _onp.where(alpha > 0, alpha, 1.0),
                                         _onp.where(alpha > 0, alpha, 1.0) * mu, size), mu)
    return g.poisson(rate)


def uniform(low=0, high=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the uniform distribution on ``[low, high)``."""
    return _sample("uniform", _uniform, (low, high), shape, dtype, ctx, out)


def normal(loc=0, scale=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the normal distribution of mean ``loc`` and standard deviation
    ``scale``."""
    return _sample("normal", _normal, (loc, scale), shape, dtype, ctx, out)


def randn(*shape, loc=0, scale=1, dtype=None, ctx=None, out=None, **kwargs):
    """``normal(loc, scale, shape)`` with the shape given as arguments: ``randn(2, 3)``."""
    return normal(loc, scale, shape, dtype=dtype, ctx=ctx, out=out)


def randint(low, high, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Random integers from ``[low, high)`` (int32 unless ``dtype``)."""
    return _sample("randint", lambda g, lo, hi, size: g.integers(int(lo), int(hi), size),
                   (low, high), shape, dtype, ctx, out, default_dtype="int32")


def poisson(lam=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the Poisson distribution of rate ``lam`` (float32 counts)."""
    return _sample("poisson", _poisson, (lam,), shape, dtype, ctx, out)


def exponential(scale=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the exponential distribution of scale ``scale`` (mean ``scale``, rate
    ``1/scale``)."""
    return _sample("exponential", _exponential_scale, (scale,), shape, dtype, ctx, out)


def gamma(alpha=1, beta=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the gamma distribution of shape ``alpha`` and scale ``beta``."""
    return _sample("gamma", _gamma, (alpha, beta), shape, dtype, ctx, out)


def negative_binomial(k=1, p=1, shape=None, dtype=None, ctx=None, out=None, **kwargs):
    """Samples from the negative binomial distribution: failures before the ``k``-th success
    of trials that succeed with probability ``p``."""
    return _sample("negative_binomial", _negative_binomial, (k, p), shape, dtype, ctx, out)


def generalized_negative_binomial(mu=1, alpha=1, shape=None, dtype=None, ctx=None, out=None,
                                  **kwargs):
    """Samples from the negative binomial distribution of mean ``mu`` and dispersion
    ``alpha`` (variance ``mu + alpha * mu**2``)."""
    return _sample("generalized_negative_binomial", _generalized_negative_binomial,
                   (mu, alpha), shape, dtype, ctx, out)


def multinomial(data, shape=None, get_prob=False, out=None, dtype="int32", **kwargs):
    """Class indices drawn from the categorical distributions in the last axis of ``data``
    (probabilities summing to 1): shape ``data.shape[:-1] + shape`` (one draw each when no
    shape is given). With ``get_prob=True`` also returns the log-probabilities of the drawn
    classes, as ``[samples, log_probs]``."""
    probs = _onp.asarray(unwrap(data), dtype=_onp.float64)
    if probs.ndim == 0 or probs.shape[-1] == 0:
        raise ValueError("multinomial: data must have a last axis of class probabilities, "
                         "not shape %s" % (probs.shape,))
    tail = _shape_tuple(shape)
    batch = probs.shape[:-1]
    flat = probs.reshape(-1, probs.shape[-1])
    draws = max(int(_onp.prod(tail)), 1)
    cumulative = _onp.cumsum(flat, axis=1)
    u = _r._rng().random((flat.shape[0], draws)) * cumulative[:, -1:]
    picked = _onp.minimum((u[:, :, None] >= cumulative[:, None, :]).sum(axis=2),
                          flat.shape[1] - 1)
    out_shape = (batch + tail) or (1,)
    samples = _finish(picked.reshape(out_shape), dtype, out)
    if not get_prob:
        return samples
    chosen = _onp.take_along_axis(flat, picked, axis=1).reshape(out_shape)
    with _onp.errstate(divide="ignore"):
        log_probs = _onp.log(chosen).astype(_onp.asarray(unwrap(data)).dtype)
    return [samples, _nd(log_probs)]


def shuffle(data, **kwargs):
    """A copy of ``data`` with its first axis in random order (``data`` is unchanged)."""
    values = _onp.asarray(unwrap(data))
    shuffled = values[_r._rng().permutation(values.shape[0])] if values.ndim else values.copy()
    return _finish(shuffled, values.dtype, kwargs.get("out"))


def uniform_like(data=None, low=0, high=1, out=None, **kwargs):
    """Uniform samples on ``[low, high)`` with the shape and dtype of ``data``."""
    return _like("uniform_like", _uniform, data, (low, high), out)


def normal_like(data=None, loc=0, scale=1, out=None, **kwargs):
    """Normal samples with the shape and dtype of ``data``."""
    return _like("normal_like", _normal, data, (loc, scale), out)


def gamma_like(data=None, alpha=1, beta=1, out=None, **kwargs):
    """Gamma samples (shape ``alpha``, scale ``beta``) shaped like ``data``."""
    return _like("gamma_like", _gamma, data, (alpha, beta), out)


def exponential_like(data=None, lam=1, out=None, **kwargs):
    """Exponential samples of rate ``lam`` (mean ``1/lam``) shaped like ``data``."""
    return _like("exponential_like", _exponential_rate, data, (lam,), out)


def poisson_like(data=None, lam=1, out=None, **kwargs):
    """Poisson samples of rate ``lam`` shaped like ``data``."""
    return _like("poisson_like", _poisson, data, (lam,), out)


def negative_binomial_like(data=None, k=1, p=1, out=None, **kwargs):
    """Negative binomial samples shaped like ``data``."""
    return _like("negative_binomial_like", _negative_binomial, data, (k, p), out)


def generalized_negative_binomial_like(data=None, mu=1, alpha=1, out=None, **kwargs):
    """Generalized negative binomial samples (mean ``mu``, dispersion ``alpha``) shaped like
    ``data``."""
    return _like("generalized_negative_binomial_like", _generalized_negative_binomial, data,
                 (mu, alpha), out)


def seed(seed_state, ctx="all"):
    """Seed the generator every sampler of fastgrad draws from (``np.random``, ``nd.random``,
    ``mx.random``, the initializers)."""
    _r.seed(seed_state)
