"""Adam and its relatives: ``Adam``, ``AdamW`` (decoupled weight decay) and ``LAMB``
(layer-wise adaptive moments), on the fused update ops."""

import math

import numpy as _onp

from fastgrad import _update_ops as ops
from fastgrad._array import unwrap, _wrap
from fastgrad.optimizer.optimizer import register, Optimizer, zeros_like_weight, _check_arrays
from fastgrad.optimizer.sgd import _each

__all__ = ["Adam", "AdamW", "LAMB"]


@register
class Adam(Optimizer):
    """Adam (MXNet's ``Adam``); at step ``t`` of a weight.

    The update::

        g = clip(rescale_grad * grad + wd * weight)
        mean = beta1 * mean + (1 - beta1) * g
        var = beta2 * var + (1 - beta2) * g**2
        weight -= lr * sqrt(1 - beta2**t) / (1 - beta1**t) * mean / (sqrt(var) + epsilon)
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 lazy_update=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.lazy_update = lazy_update

    def create_state(self, index, weight):
        return (zeros_like_weight(weight), zeros_like_weight(weight))

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("Adam", weight, grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        lr *= math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        mean, var = state
        ops.adam_update(weight, grad, mean, var, lr=lr, wd=wd, beta1=self.beta1,
                        beta2=self.beta2, epsilon=self.epsilon, rescale_grad=self.rescale_grad,
                        clip_gradient=self._clip(), out=weight)


@register
class AdamW(Optimizer):
    """AdamW, Adam with decoupled weight decay (MXNet 2.x's ``AdamW``).

    The update::

        g = clip(rescale_grad * grad)
        mean = beta1 * mean + (1 - beta1) * g
        var = beta2 * var + (1 - beta2) * g**2
        lr_t = lr * sqrt(1 - beta2**t) / (1 - beta1**t)     (lr when correct_bias is False)
        weight -= lr_t * (mean / (sqrt(var) + epsilon) + wd * weight)
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 correct_bias=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.correct_bias = correct_bias

    def create_state(self, index, weight):
        return (zeros_like_weight(weight), zeros_like_weight(weight))

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("AdamW", weight, grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        if self.correct_bias:
            t = self._index_update_count[index]
            lr *= math.sqrt(1.0 - self.beta2 ** t) / (1.0 - self.beta1 ** t)
        mean, var = state
        ops.adamw_update(weight, grad, mean, var, rescale_grad=self.rescale_grad, lr=1.0,
                         eta=lr, wd=wd, beta1=self.beta1, beta2=self.beta2,
                         epsilon=self.epsilon, clip_gradient=self._clip(), out=weight)


@register
class LAMB(Optimizer):
    """LAMB (MXNet's ``LAMB``): Adam's step direction ``g`` plus ``wd * weight``
    (``lamb_update_phase1``), scaled by the trust ratio ``||weight|| / ||g||``
    (``lamb_update_phase2``, with ``||weight||`` clamped to ``[lower_bound, upper_bound]``)."""

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-6,
                 lower_bound=None, upper_bound=None, bias_correction=True, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.lower_bound, self.upper_bound = lower_bound, upper_bound
        self.bias_correction = bias_correction

    def create_state(self, index, weight):
        return (zeros_like_weight(weight), zeros_like_weight(weight))

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("LAMB", weight, grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        mean, var = state
        w = unwrap(weight)
        direction = _wrap(ops._scratch("lamb", w), type(weight))
        ops.lamb_update_phase1(weight, grad, mean, var, t=t, wd=wd, beta1=self.beta1,
                               beta2=self.beta2, epsilon=self.epsilon,
                               bias_correction=self.bias_correction,
                               rescale_grad=self.rescale_grad, clip_gradient=self._clip(),
                               out=direction)
        r1 = float(_onp.linalg.norm(w.reshape(-1)))
        r2 = float(_onp.linalg.norm(unwrap(direction).reshape(-1)))
        ops.lamb_update_phase2(weight, direction, r1, r2, lr=lr,
                               lower_bound=self.lower_bound or -1.0,
                               upper_bound=self.upper_bound or -1.0, out=weight)
