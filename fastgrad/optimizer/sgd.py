"""Gradient descent with momentum (``SGD``), Nesterov momentum (``NAG``) and sign descent
(``Signum``), on the fused update ops."""

from fastgrad import _update_ops as ops
from fastgrad.optimizer.optimizer import Optimizer, register, zeros_like_weight, _check_arrays

__all__ = ["SGD", "NAG", "Signum"]


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
