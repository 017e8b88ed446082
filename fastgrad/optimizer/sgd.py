"""Gradient descent with momentum (``SGD``, also ``ccSGD``), Nesterov momentum (``NAG``) and
sign descent (``Signum``) on the fused update ops; Langevin dynamics (``SGLD``), delay
compensation (``DCASGD``) and MXNet's ``Test`` optimizer."""

import math

import numpy as _onp

from fastgrad._api import _update_ops as ops
from fastgrad._core._array import unwrap, _wrap
from fastgrad.numpy import random as _random
from fastgrad.optimizer.optimizer import (Optimizer, register, zeros_like_weight, _check_arrays,
                                          _writing, _preprocessed_grad)

__all__ = ["SGD", "ccSGD", "NAG", "Signum", "SGLD", "DCASGD", "Test"]


def _each(update):
    """Let ``update`` take lists of indices, weights, gradients and states (MXNet's
    aggregated form) as well as single ones."""
    def wrapper(self, index, weight, grad, state):
        if isinstance(index, (list, tuple)):
            for i, w, g, s in zip(index, weight, grad, state):
                update(self, i, w, g, s)
        else:
            update(self, index, weight, grad, state)
    wrapper.__doc__ = update.__doc__
    wrapper.__name__ = update.__name__
    return wrapper


class _MomentumDescent(Optimizer):
    """Descent along the gradient plus weight decay, with a momentum state when ``momentum``
    is not 0; subclasses name the fused op that applies the momentum."""

    momentum_update = None   # the fused op for momentum > 0

    def __init__(self, momentum=0.0, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum

    def create_state(self, index, weight):
        return zeros_like_weight(weight) if self.momentum != 0.0 else None

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays(type(self).__name__, weight, grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        if state is not None:
            type(self).momentum_update(weight, grad, state, lr=lr, wd=wd,
                                       momentum=self.momentum,
                                       rescale_grad=self.rescale_grad,
                                       clip_gradient=self._clip(), out=weight)
        else:
            ops.sgd_update(weight, grad, lr=lr, wd=wd, rescale_grad=self.rescale_grad,
                           clip_gradient=self._clip(), out=weight)


@register
class SGD(_MomentumDescent):
    """Stochastic gradient descent with momentum and weight decay (MXNet's ``SGD``).

    The update::

        rescaled = lr * (clip(rescale_grad * grad) + wd * weight)
        state = momentum * state - rescaled          (momentum > 0)
        weight = weight + state                      (weight - rescaled without momentum)

    Parameters
    ----------
    momentum : float, default 0.0
    lazy_update : bool, default True
        Accepted for MXNet compatibility (it only matters for sparse gradients).
    **kwargs
        Passed to :class:`Optimizer` (``learning_rate``, ``wd``, ``rescale_grad``, ...).
    """

    momentum_update = ops.sgd_mom_update

    def __init__(self, momentum=0.0, lazy_update=True, **kwargs):
        super().__init__(momentum=momentum, **kwargs)
        self.lazy_update = lazy_update


@register
class NAG(_MomentumDescent):
    """Nesterov accelerated gradient (MXNet's ``NAG``).

    The update::

        g = clip(rescale_grad * grad) + wd * weight
        state = momentum * state + g
        weight = weight - lr * (g + momentum * state)
    """

    momentum_update = ops.nag_mom_update


@register
class Signum(Optimizer):
    """Sign of the momentum (MXNet's ``Signum``; signSGD when ``momentum`` is 0).

    The update::

        state = momentum * state - (1 - momentum) * (clip(rescale_grad * grad) + wd * weight)
        weight = (1 - lr * wd_lh) * weight + lr * sign(state)
    """

    def __init__(self, learning_rate=0.01, momentum=0.9, wd_lh=0.0, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.momentum = momentum
        self.wd_lh = wd_lh

    def create_state(self, index, weight):
        return zeros_like_weight(weight) if self.momentum != 0.0 else None

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("Signum", weight, grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        if state is not None:
            ops.signum_update(weight, grad, state, lr=lr, wd=wd, momentum=self.momentum,
                              wd_lh=self.wd_lh, rescale_grad=self.rescale_grad,
                              clip_gradient=self._clip(), out=weight)
        else:
            ops.signsgd_update(weight, grad, lr=lr, wd=wd, rescale_grad=self.rescale_grad,
                               clip_gradient=self._clip(), out=weight)


@register
class ccSGD(SGD):                                    # noqa: N801 (MXNet's name)
    """MXNet's deprecated alias of :class:`SGD` (registered as ``'ccsgd'``)."""


@register
class SGLD(Optimizer):
    """Stochastic gradient Langevin dynamics (MXNet's ``SGLD``; Welling & Teh 2011).

    The update::

        g = clip(rescale_grad * grad)
        weight = weight - lr / 2 * (g + wd * weight) + normal(0, sqrt(lr))

    The noise is drawn from fastgrad's global generator (``mx.random.seed`` makes it
    reproducible; ``mx.np.random.normal`` is the same stream) by :meth:`noise`, which a
    subclass or a test may replace.
    """

    def create_state(self, index, weight):
        return None

    def noise(self, shape, dtype, scale):
        """Gaussian noise with mean 0 and standard deviation ``scale``."""
        return unwrap(_random.normal(0.0, scale, size=shape, dtype=dtype))

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("SGLD", weight, grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        w = unwrap(weight)
        with _writing(weight):
            g = _preprocessed_grad(self, weight, grad)
            w += -lr / 2 * (g + wd * w)
            w += _onp.asarray(self.noise(w.shape, w.dtype, math.sqrt(lr)), dtype=w.dtype)


@register
class DCASGD(Optimizer):
    """Delay-compensated asynchronous SGD (MXNet's ``DCASGD``; Zheng et al. 2017).

    The update, with ``previous`` the weight before the last update of this weight::

        g = clip(rescale_grad * grad)
        step = -lr * (g + wd * weight + lamda * g**2 * (weight - previous))
        mom = momentum * mom + step                  (mom = step when momentum is 0)
        previous = weight
        weight = weight + mom

    Note [DCASGD's momentum]: MXNet 1.9.1 tests its momentum array with ``if mom:``, which
    raises for a weight of more than one element and takes the no-momentum branch (then fails
    its assertion) for one whose momentum is still zero, so only ``momentum=0`` runs there.
    This class computes the formula above for any momentum.
    """

    def __init__(self, momentum=0.0, lamda=0.04, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.weight_previous = {}
        self.lamda = lamda

    def create_state(self, index, weight):
        mom = zeros_like_weight(weight) if self.momentum != 0.0 else None
        return (mom, _wrap(unwrap(weight).copy(), type(weight)))

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("DCASGD", weight, grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        mom, previous = state
        w, prev = unwrap(weight), unwrap(previous)
        with _writing(mom, previous, weight):
            g = _preprocessed_grad(self, weight, grad)
            step = -lr * (g + wd * w + self.lamda * g * g * (w - prev))
            if mom is not None:
                m = unwrap(mom)
                m *= self.momentum
                m += step
                step = m
            prev[...] = w
            w += step


@register
class Test(Optimizer):
    """MXNet's ``Test`` optimizer (for tests of the optimizer machinery): ``weight +=
    rescale_grad * grad``, and the state becomes a copy of the new weight."""

    def create_state(self, index, weight):
        return zeros_like_weight(weight)

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("Test", weight, grad)
        w = unwrap(weight)
        with _writing(weight, state):
            w += ops._check_like("Test.update", w, "grad", grad) * self.rescale_grad
            unwrap(state)[...] = w
