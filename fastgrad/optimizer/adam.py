"""Adam and its relatives: ``Adam``, ``AdamW`` (decoupled weight decay), ``LAMB``
(layer-wise adaptive moments) on the fused update ops; ``Adamax`` (the infinity norm) and
``Nadam`` (Nesterov momentum), which MXNet computes with array arithmetic in Python."""

import math

import numpy as _onp

from fastgrad._api import _update_ops as ops
from fastgrad._core._array import unwrap, _wrap
from fastgrad.optimizer.optimizer import (register, Optimizer, zeros_like_weight, _check_arrays,
                                          _writing, _preprocessed_grad)
from fastgrad.optimizer.sgd import _each

__all__ = ["Adam", "AdamW", "LAMB", "Adamax", "Nadam"]


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


@register
class Adamax(Optimizer):
    """AdaMax, Adam with the infinity norm (MXNet's ``Adamax``; Kingma & Ba, section 7).

    The update, at step ``t`` of a weight::

        g = clip(rescale_grad * grad + wd * weight)
        mean = beta1 * mean + (1 - beta1) * g
        u = maximum(beta2 * u, abs(g))
        weight -= lr / (1 - beta1**t) * mean / u

    A coordinate whose gradients have all been 0 divides 0 by 0, as in MXNet.
    """

    def __init__(self, learning_rate=0.002, beta1=0.9, beta2=0.999, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2 = beta1, beta2

    def create_state(self, index, weight):
        return (zeros_like_weight(weight), zeros_like_weight(weight))

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("Adamax", weight, grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        lr /= 1.0 - self.beta1 ** self._index_update_count[index]
        mean, u = state
        with _writing(mean, u, weight):
            g = _preprocessed_grad(self, weight, grad, wd)
            m, uu, w = unwrap(mean), unwrap(u), unwrap(weight)
            m *= self.beta1
            m += (1.0 - self.beta1) * g
            _onp.maximum(self.beta2 * uu, _onp.abs(g), out=uu)
            w -= lr * m / uu


@register
class Nadam(Optimizer):
    """Adam with Nesterov momentum (MXNet's ``Nadam``; Dozat 2016).

    The update, at step ``t`` of a weight, with ``mu(t) = beta1 * (1 - 0.5 * 0.96**(t *
    schedule_decay))``::

        g = clip(rescale_grad * grad + wd * weight)
        m_schedule = m_schedule * mu(t)
        mean = beta1 * mean + (1 - beta1) * g
        var = beta2 * var + (1 - beta2) * g**2
        m_bar = (1 - mu(t)) * g / (1 - m_schedule)
                + mu(t + 1) * mean / (1 - m_schedule * mu(t + 1))
        weight -= lr * m_bar / (sqrt(var / (1 - beta2**t)) + epsilon)

    Note [Nadam's schedule]: as in MXNet, ``m_schedule`` is one number of the optimizer,
    multiplied by ``mu(t)`` at every ``update`` call, whatever the weight: with several weights
    it advances once per weight per step. Kept, so that training follows MXNet's numbers.
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 schedule_decay=0.004, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon
        self.schedule_decay = schedule_decay
        self.m_schedule = 1.0

    def create_state(self, index, weight):
        return (zeros_like_weight(weight), zeros_like_weight(weight))

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("Nadam", weight, grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        t = self._index_update_count[index]
        momentum_t = self.beta1 * (1.0 - 0.5 * 0.96 ** (t * self.schedule_decay))
        momentum_next = self.beta1 * (1.0 - 0.5 * 0.96 ** ((t + 1) * self.schedule_decay))
        self.m_schedule *= momentum_t
        m_schedule_next = self.m_schedule * momentum_next
        mean, var = state
        with _writing(mean, var, weight):
            g = _preprocessed_grad(self, weight, grad, wd)
            m, v, w = unwrap(mean), unwrap(var), unwrap(weight)
            m *= self.beta1
            m += (1.0 - self.beta1) * g
            v *= self.beta2
            v += (1.0 - self.beta2) * g * g
            m_bar = (1.0 - momentum_t) * (g / (1.0 - self.m_schedule)) \
                + momentum_next * (m / (1.0 - m_schedule_next))
            v_hat = v / (1.0 - self.beta2 ** t)
            w -= lr * m_bar / (_onp.sqrt(v_hat) + self.epsilon)
