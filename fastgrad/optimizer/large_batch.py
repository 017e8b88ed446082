"""Large-batch SGD: ``LARS`` (layer-wise adaptive rate scaling) and ``LBSGD`` (gradient
accumulation with a warm-up of the learning rate), on the fused SGD update ops."""

import math

import numpy as _onp

from fastgrad._api import _update_ops as ops
from fastgrad._core._array import unwrap, _wrap
from fastgrad.optimizer.optimizer import Optimizer, register, zeros_like_weight, _check_arrays
from fastgrad.optimizer.sgd import _each

__all__ = ["LARS", "LBSGD"]

_NO_LARS_SUFFIXES = ("gamma", "beta", "bias")


def _as_lists(index, weight, grad, state):
    if isinstance(index, (list, tuple)):
        return list(index), list(weight), list(grad), list(state)
    return [index], [weight], [grad], [state]


def _sgd_step(weight, grad, mom, lr, wd, momentum, rescale_grad, clip_gradient):
    """MXNet's ``sgd_mom_update`` when there is a momentum state, else ``sgd_update``."""
    if mom is not None:
        ops.sgd_mom_update(weight, grad, mom, lr=lr, wd=wd, momentum=momentum,
                           rescale_grad=rescale_grad, clip_gradient=clip_gradient, out=weight)
    else:
        ops.sgd_update(weight, grad, lr=lr, wd=wd, rescale_grad=rescale_grad,
                       clip_gradient=clip_gradient, out=weight)


def _sum_sq(a):
    """The sum of squares as MXNet's ``multi_sum_sq`` makes it: a float32 running sum (in
    element order; exactly MXNet's for float32 arrays, to float32 rounding for others)."""
    if a.size == 0:
        return _onp.float32(0)
    sq = _onp.square(a.reshape(-1))
    if a.dtype == _onp.float32:
        return _onp.cumsum(sq, dtype=_onp.float32)[-1]
    return _onp.float32(_onp.sum(sq))


@register
class LARS(Optimizer):
    """SGD with layer-wise adaptive rate scaling (MXNet's ``LARS``; You et al. 2017).

    Each weight whose name does not end in ``gamma``, ``beta`` or ``bias`` gets the learning
    rate (computed in float32, as MXNet's ``multi_lars`` kernel)::

        lr * eta * ||weight|| / (rescale_grad * ||grad|| + wd * ||weight|| + eps)

    (``lr`` when either norm is 0), then the update is SGD's with momentum. With
    ``momentum_correction`` the momentum is scaled by ``lr_now / lr_before`` when a scheduler
    changes the learning rate between calls (Goyal et al. 2017), as MXNet does: "before" is the
    previous ``update`` call's rate. Only names ending in ``_weight`` get weight decay when
    ``param_idx2name`` is given.

    Parameters
    ----------
    momentum : float, default 0.0
    lazy_update : bool, default True
        Accepted for MXNet compatibility (sparse gradients only).
    eta : float, default 0.001
        The LARS coefficient.
    eps : float, default 0
    momentum_correction : bool, default True
    """

    def __init__(self, momentum=0.0, lazy_update=True, eta=0.001, eps=0,
                 momentum_correction=True, **kwargs):
        super().__init__(**kwargs)
        self.momentum = momentum
        self.momentum_correction = momentum_correction
        self.lazy_update = lazy_update
        self.eta, self.eps = eta, eps
        self.skip = 0
        self.last_lr = None
        self.cur_lr = None

    def _get_lrs(self, indices):
        lr = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
        self.last_lr = lr if self.cur_lr is None else self.cur_lr
        self.cur_lr = lr
        return super()._get_lrs(indices)

    def set_wd_mult(self, args_wd_mult):
        """As :meth:`Optimizer.set_wd_mult`, except that only names ending in ``_weight`` are
        decayed by default (not ``_gamma``), as in MXNet's LARS."""
        self.wd_mult = {name: 0.0 for name in self.idx2name.values()
                        if not name.endswith("_weight")}
        self.wd_mult.update(self._symbol_mults("__wd_mult__"))
        self.wd_mult.update(args_wd_mult)

    def create_state(self, index, weight):
        return zeros_like_weight(weight) if self.momentum != 0.0 else None

    def _lars_lr(self, index, weight, grad, lr, wd):
        name = self.idx2name.get(index, str(index))
        if name.endswith(_NO_LARS_SUFFIXES):
            return lr
        f32 = _onp.float32
        w_sum_sq, g_sum_sq = _sum_sq(unwrap(weight)), _sum_sq(unwrap(grad))
        w_norm = f32(_onp.sqrt(w_sum_sq))
        if not (w_norm > 0 and g_sum_sq > 0):
            return lr
        return float(f32(lr) * f32(self.eta) * w_norm
                     / (f32(_onp.sqrt(g_sum_sq)) * f32(self.rescale_grad) + f32(wd) * w_norm
                        + f32(self.eps)))

    def update(self, index, weight, grad, state):
        indices, weights, grads, states = _as_lists(index, weight, grad, state)
        for w, g in zip(weights, grads):
            _check_arrays("LARS", w, g)
        self._update_count(indices)
        lrs, wds = self._get_lrs(indices), self._get_wds(indices)
        momentum = self.momentum
        if self.momentum_correction and self.last_lr:
            momentum = self.momentum * (self.cur_lr / self.last_lr)
        for i, w, g, s, lr, wd in zip(indices, weights, grads, states, lrs, wds):
            _sgd_step(w, g, s, self._lars_lr(i, w, g, lr, wd), wd, momentum,
                      self.rescale_grad, self._clip())


@register
class LBSGD(Optimizer):
    """Large-batch SGD (MXNet's ``LBSGD``): gradients are averaged over ``batch_scale``
    consecutive updates of a weight, and every ``batch_scale``-th update is SGD's (with
    momentum) on the average, its learning rate scaled by a warm-up multiplier; the updates
    in between leave the weight as it is.

    The multiplier after ``n`` accumulated gradients (``n`` counts from ``begin_epoch *
    updates_per_epoch``), with ``N = warmup_epochs * updates_per_epoch`` and ``B =
    batch_scale``: ``B`` once ``n >= N``; before that ``1 + (B - 1) * n / N`` (``'linear'``),
    ``1 + (B - 1) * (n / N)**2`` (``'power2'``), ``1 + (B - 1) * sqrt(n / N)`` (``'sqrt'``),
    or, for ``'lars'``, ``sqrt(|w|^2 / (|g|^2 + wd * |w|^2 + 1e-18))`` clipped to
    ``[0.01, 100]``.

    Note [LBSGD's accumulation]: MXNet keeps the first gradient of a macro-batch by reference,
    so when the caller reuses the gradient buffer (as a Trainer does) the sum counts the last
    gradient twice; this class copies it and sums what was given.
    """

    def __init__(self, momentum=0.0, multi_precision=False, warmup_strategy="linear",
                 warmup_epochs=5, batch_scale=1, updates_per_epoch=32, begin_epoch=0,
                 num_epochs=60, **kwargs):
        super().__init__(multi_precision=multi_precision, **kwargs)
        self.momentum = momentum
        self.warmup_strategy = warmup_strategy
        self.warmup_epochs = warmup_epochs
        self.batch_scale = batch_scale
        self.updates_per_epoch = updates_per_epoch
        self.init_updates = begin_epoch * updates_per_epoch
        self.num_epochs = num_epochs
        self.lbmult = 1
        self.cumgrads = {}
        self.adaptive = False
        self.admult = 1

    def create_state(self, index, weight):
        return zeros_like_weight(weight) if self.momentum != 0.0 else None

    def _get_lbmult(self, nup):
        nwup = self.warmup_epochs * self.updates_per_epoch
        maxmult = float(self.batch_scale)
        if nup >= nwup:
            return maxmult
        if nwup <= 1:
            return 1.0
        if self.warmup_strategy == "linear":
            return 1.0 + (maxmult - 1) * nup / nwup
        if self.warmup_strategy == "power2":
            return 1.0 + (maxmult - 1) * (nup * nup) / (nwup * nwup)
        if self.warmup_strategy == "sqrt":
            return 1.0 + (maxmult - 1) * math.sqrt(float(nup) / nwup)
        return 1.0

    def _get_lars(self, weight, grad, wd):
        w2 = float(_onp.sum(_onp.square(weight)))
        g2 = float(_onp.sum(_onp.square(grad)))
        return min(max(math.sqrt(w2 / (g2 + wd * w2 + 1e-18)), 0.01), 100.0)

    def _cumulate_gradient(self, grad, index):
        entry = self.cumgrads.get(index)
        if entry and entry["num_cums"] > 0:
            entry = {"cum_grad": entry["cum_grad"] + grad, "num_cums": entry["num_cums"] + 1}
        else:
            entry = {"cum_grad": grad.copy(), "num_cums": self.init_updates + 1}
        self.cumgrads[index] = entry
        return entry

    @_each
    def update(self, index, weight, grad, state):
        _check_arrays("LBSGD", weight, grad)
        ops._check_like("LBSGD.update", unwrap(weight), "grad", grad)
        lr, wd = self._get_lr(index), self._get_wd(index)
        self._update_count(index)
        entry = self._cumulate_gradient(unwrap(grad), index)
        if entry["num_cums"] % self.batch_scale == 0:
            mean_grad = entry["cum_grad"] / self.batch_scale
            if self.warmup_strategy == "lars":
                lr *= self._get_lars(unwrap(weight), mean_grad, wd)
            else:
                lr *= self._get_lbmult(entry["num_cums"])
            mean_grad = _wrap(mean_grad.astype(unwrap(grad).dtype, copy=False), type(grad))
            _sgd_step(weight, mean_grad, state, lr, wd, self.momentum, self.rescale_grad,
                      self._clip())
            entry["cum_grad"] = 0
        else:
            ops.sgd_update(weight, grad, lr=0.0, wd=wd, out=weight)

