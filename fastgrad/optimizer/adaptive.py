"""Per-coordinate adaptive step sizes: ``RMSProp`` (plain and centered), ``AdaGrad``,
``AdaDelta``, ``Ftrl`` and ``FTML``."""

import numpy as _onp

from fastgrad._api import _update_ops as ops
from fastgrad._core._array import unwrap
from fastgrad._core._state import set_recording
from fastgrad.optimizer.optimizer import register, Optimizer, zeros_like_weight, _check_arrays
from fastgrad.optimizer.sgd import _each

__all__ = ["RMSProp", "AdaGrad", "AdaDelta", "Ftrl", "FTRL", "FTML"]


@register
class RMSProp(Optimizer):
    """RMSProp (MXNet's ``RMSProp``): Tieleman & Hinton's, or Graves's centered version with
    ``centered=True`` (see ``rmsprop_update`` and ``rmspropalex_update``). ``clip_weights``
    clips the weights after the update."""

    def __init__(self, learning_rate=0.001, gamma1=0.9, gamma2=0.9, epsilon=1e-8,
                 centered=False, clip_weights=None, **kwargs):
        super().__init__(learning_rate=learning_rate, **kwargs)
        self.gamma1, self.gamma2, self.epsilon = gamma1, gamma2, epsilon
        self.centered, self.clip_weights = centered, clip_weights

    def create_state(self, index, weight):
        if self.centered:
            return (zeros_like_weight(weight), zeros_like_weight(weight),
                    zeros_like_weight(weight))
        return (zeros_like_weight(weight),)

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("RMSProp", weight, grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        kwargs = dict(lr=lr, wd=wd, gamma1=self.gamma1, epsilon=self.epsilon,
                      rescale_grad=self.rescale_grad, clip_gradient=self._clip(),
                      clip_weights=self.clip_weights or -1.0, out=weight)
        if self.centered:
            n, g, delta = state
            ops.rmspropalex_update(weight, grad, n, g, delta, gamma2=self.gamma2, **kwargs)
        else:
            ops.rmsprop_update(weight, grad, state[0], **kwargs)


def _rescaled(op, weight, grad, rescale_grad, clip_gradient):
    return ops._grad(op, weight, grad, rescale_grad, -1.0 if not clip_gradient
                     else clip_gradient)


@register
class AdaGrad(Optimizer):
    """AdaGrad (MXNet's ``AdaGrad``).

    The update::

        g = clip(rescale_grad * grad)
        history += g**2
        weight -= lr * (g / sqrt(history + eps) + wd * weight)
    """

    def __init__(self, eps=1e-7, **kwargs):
        super().__init__(**kwargs)
        self.float_stable_eps = eps

    def create_state(self, index, weight):
        return zeros_like_weight(weight)

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("AdaGrad", weight, grad)
        ops._check_like("AdaGrad.update", unwrap(weight), "grad", grad)
        ops._check_like("AdaGrad.update", unwrap(weight), "state", state)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        w, history = unwrap(weight), unwrap(state)
        prev = set_recording(False)
        try:
            g = _rescaled("AdaGrad.update", weight, grad, self.rescale_grad, self.clip_gradient)
            t = ops._scratch(1, w)
            _onp.multiply(g, g, out=t)
            history += t
            _onp.add(history, self.float_stable_eps, out=t)
            _onp.sqrt(t, out=t)
            _onp.divide(g, t, out=g)
            if wd:
                ops._axpy(g, wd, w, 0)
            g *= lr
            w -= g
            ops._touch(state)
            ops._touch(weight)
        finally:
            set_recording(prev)


@register
class AdaDelta(Optimizer):
    """AdaDelta (MXNet's ``AdaDelta``).

    The update::

        g = clip(rescale_grad * grad)
        acc_g = rho * acc_g + (1 - rho) * g**2
        delta = sqrt(acc_delta + epsilon) / sqrt(acc_g + epsilon) * g
        acc_delta = rho * acc_delta + (1 - rho) * delta**2
        weight -= delta + wd * weight
    """

    def __init__(self, rho=0.90, epsilon=1e-5, **kwargs):
        super().__init__(**kwargs)
        self.rho, self.epsilon = rho, epsilon

    def create_state(self, index, weight):
        return (zeros_like_weight(weight), zeros_like_weight(weight))

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("AdaDelta", weight, grad)
        w = unwrap(weight)
        ops._check_like("AdaDelta.update", w, "grad", grad)
        acc_g, acc_delta = (ops._check_like("AdaDelta.update", w, "state", s) for s in state)
        wd = self._get_wd(index)
        self._update_count(index)
        rho, eps = self.rho, self.epsilon
        prev = set_recording(False)
        try:
            g = _rescaled("AdaDelta.update", weight, grad, self.rescale_grad, self.clip_gradient)
            t, s = ops._scratch(1, w), ops._scratch(2, w)
            _onp.multiply(g, g, out=t)
            t *= 1.0 - rho
            acc_g *= rho
            acc_g += t
            _onp.add(acc_delta, eps, out=t)
            _onp.sqrt(t, out=t)
            _onp.add(acc_g, eps, out=s)
            _onp.sqrt(s, out=s)
            _onp.divide(t, s, out=t)
            g *= t                                   # g is now the step (delta)
            _onp.multiply(g, g, out=t)
            t *= 1.0 - rho
            acc_delta *= rho
            acc_delta += t
            if wd:
                ops._axpy(g, wd, w, 1)
            w -= g
            for a in state:
                ops._touch(a)
            ops._touch(weight)
        finally:
            set_recording(prev)


@register
class Ftrl(Optimizer):
    """FTRL-proximal (MXNet's ``Ftrl``; see ``ftrl_update`` for the formula).

    Parameters
    ----------
    lamda1 : float, default 0.01
        The L1 regularization coefficient.
    learning_rate : float, default 0.1
    beta : float, default 1
        The per-coordinate learning rate's ``beta``.
    """

    def __init__(self, lamda1=0.01, learning_rate=0.1, beta=1, **kwargs):
        super().__init__(**kwargs)
        self.lamda1, self.beta = lamda1, beta
        self.lr = learning_rate

    def create_state(self, index, weight):
        return (zeros_like_weight(weight), zeros_like_weight(weight))

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("Ftrl", weight, grad)
        self._update_count(index)
        lr, wd = self._get_lr(index), self._get_wd(index)
        z, n = state
        ops.ftrl_update(weight, grad, z, n, lr=lr, wd=wd, lamda1=self.lamda1, beta=self.beta,
                        rescale_grad=self.rescale_grad, clip_gradient=self._clip(),
                        out=weight)


FTRL = Ftrl


@register
class FTML(Optimizer):
    """Follow the Moving Leader (MXNet's ``FTML``; Zheng & Kwok 2017), at step ``t``.

    The update (MXNet's ``ftml_update`` kernel)::

        g = clip(rescale_grad * grad + wd * weight)
        v = beta2 * v + (1 - beta2) * g**2
        d_t = (1 - beta1**t) / lr * (sqrt(v / (1 - beta2**t)) + epsilon)
        z = beta1 * z + (1 - beta1) * g - (d_t - beta1 * d) * weight
        d = d_t
        weight = -z / d_t

    The hyper-parameters are rounded to float32 as the kernel takes them (Note [Fused
    updates] in ``_update_ops.py``).
    """

    def __init__(self, beta1=0.6, beta2=0.999, epsilon=1e-8, **kwargs):
        super().__init__(**kwargs)
        self.beta1, self.beta2, self.epsilon = beta1, beta2, epsilon

    def create_state(self, index, weight):
        return (zeros_like_weight(weight), zeros_like_weight(weight), zeros_like_weight(weight))

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("FTML", weight, grad)
        op = "FTML.update"
        w = unwrap(weight)
        ops._check_like(op, w, "grad", grad)
        d, v, z = (ops._check_like(op, w, "state", s) for s in state)
        self._update_count(index)
        lr, wd = ops._scalar(op, "lr", self._get_lr(index)), ops._scalar(op, "wd",
                                                                         self._get_wd(index))
        beta1, beta2 = ops._scalar(op, "beta1", self.beta1), ops._scalar(op, "beta2", self.beta2)
        eps = ops._scalar(op, "epsilon", self.epsilon)
        t = self._index_update_count[index]
        prev = set_recording(False)
        try:
            g = ops._grad(op, weight, grad, self.rescale_grad, self._clip(), wd=wd)
            v *= beta2
            v += (1.0 - beta2) * g * g
            d_t = (1.0 - beta1 ** t) / lr * (_onp.sqrt(v / (1.0 - beta2 ** t)) + eps)
            z *= beta1
            z += (1.0 - beta1) * g - (d_t - beta1 * d) * w
            d[...] = d_t
            _onp.divide(z, d_t, out=w)
            _onp.negative(w, out=w)
            for a in state:
                ops._touch(a)
            ops._touch(weight)
        finally:
            set_recording(prev)
