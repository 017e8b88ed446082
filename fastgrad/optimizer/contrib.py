"""MXNet's contributed optimizers (``mx.optimizer.contrib``): ``GroupAdaGrad``."""

import numpy as _onp

from fastgrad._core._array import unwrap, _wrap
from fastgrad.optimizer.optimizer import (Optimizer, register, _check_arrays, _writing,
                                          _preprocessed_grad)
from fastgrad.optimizer.sgd import _each

__all__ = ["GroupAdaGrad"]


@register
class GroupAdaGrad(Optimizer):
    """AdaGrad with one accumulator per row of a 2-D weight (MXNet's
    ``optimizer.contrib.GroupAdaGrad``; no weight decay).

    The update::

        g = clip(rescale_grad * grad)
        history += mean(g**2, axis=1, keepdims=True)
        weight -= lr * g / sqrt(history + eps)
    """

    def __init__(self, eps=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index, weight):
        if len(weight.shape) != 2:
            raise ValueError("GroupAdaGrad: the weight at index %r must be 2-D (one "
                             "accumulator per row), got shape %s" % (index, weight.shape))
        return _wrap(_onp.zeros((weight.shape[0], 1), unwrap(weight).dtype), type(weight))

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("GroupAdaGrad", weight, grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        if wd != 0:
            raise ValueError("GroupAdaGrad does not support weight decay (wd=%g for the weight "
                             "at index %r)" % (wd, index))
        history, w = unwrap(state), unwrap(weight)
        with _writing(state, weight):
            g = _preprocessed_grad(self, weight, grad)
            history += _onp.mean(g * g, axis=1, keepdims=True)
            w -= lr * g / _onp.sqrt(history + self.float_stable_eps)
