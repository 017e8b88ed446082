"""Learning-rate schedules (``mx.lr_scheduler``): the learning rate as a function of the number
of updates, with an optional warm-up.

A scheduler is called with ``num_update``, the largest number of updates applied to any one
weight so far, and returns the learning rate, as in MXNet. ``FactorScheduler`` and
``MultiFactorScheduler`` keep their position, so call them with non-decreasing counts.

Examples
--------
>>> from fastgrad.optimizer import lr_scheduler
>>> s = lr_scheduler.FactorScheduler(step=2, factor=0.5, base_lr=1.0)
>>> [s(t) for t in range(1, 7)]
[1.0, 1.0, 0.5, 0.5, 0.25, 0.25]
"""

import math

__all__ = ["LRScheduler", "FactorScheduler", "MultiFactorScheduler", "PolyScheduler",
           "CosineScheduler"]


class LRScheduler:
    """The base class: a base learning rate and the warm-up before the schedule.

    Parameters
    ----------
    base_lr : float, default 0.01
    warmup_steps : int, default 0
        Updates spent warming up before the schedule starts.
    warmup_begin_lr : float, default 0
        The learning rate the warm-up starts from.
    warmup_mode : {'linear', 'constant'}
        Rise linearly from ``warmup_begin_lr`` to ``base_lr``, or stay at ``warmup_begin_lr``.
    """

    def __init__(self, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0, warmup_mode="linear"):
        if not isinstance(warmup_steps, int) or warmup_steps < 0:
            raise ValueError("LRScheduler: warmup_steps must be a non-negative int, got %r"
                             % (warmup_steps,))
        if warmup_begin_lr > base_lr:
            raise ValueError("LRScheduler: warmup_begin_lr (%g) is above base_lr (%g)"
                             % (warmup_begin_lr, base_lr))
        if warmup_mode not in ("linear", "constant"):
            raise ValueError("LRScheduler: warmup_mode must be 'linear' or 'constant', got %r"
                             % (warmup_mode,))
        self.base_lr = base_lr
        self.warmup_steps = warmup_steps
        self.warmup_final_lr = base_lr
        self.warmup_begin_lr = warmup_begin_lr
        self.warmup_mode = warmup_mode

    def get_warmup_lr(self, num_update):
        """The learning rate at update ``num_update`` of the warm-up."""
        if self.warmup_mode == "constant":
            return self.warmup_begin_lr
        rise = (self.warmup_final_lr - self.warmup_begin_lr) * num_update / self.warmup_steps
        return self.warmup_begin_lr + rise

    def __call__(self, num_update):
        raise NotImplementedError("%s must define __call__" % type(self).__name__)


class FactorScheduler(LRScheduler):
    """Multiply the learning rate by ``factor`` every ``step`` updates, never going below
    ``stop_factor_lr``: ``base_lr * factor ** floor((num_update - 1) / step)``."""

    def __init__(self, step, factor=1, stop_factor_lr=1e-8, base_lr=0.01, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if step < 1:
            raise ValueError("FactorScheduler: step must be at least 1, got %r" % (step,))
        if factor > 1.0:
            raise ValueError("FactorScheduler: factor must be at most 1, got %r" % (factor,))
        self.step, self.factor, self.stop_factor_lr = step, factor, stop_factor_lr
        self.count = 0

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while num_update > self.count + self.step:
            self.count += self.step
            self.base_lr = max(self.base_lr * self.factor, self.stop_factor_lr)
        return self.base_lr


class MultiFactorScheduler(LRScheduler):
    """Multiply the learning rate by ``factor`` each time ``num_update`` passes one of the
    increasing ``step`` values."""

    def __init__(self, step, factor=1, base_lr=0.01, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(step, list) or not step:
            raise ValueError("MultiFactorScheduler: step must be a non-empty list, got %r"
                             % (step,))
        if any(s < 1 for s in step) or any(b <= a for a, b in zip(step, step[1:])):
            raise ValueError("MultiFactorScheduler: step must increase and start at 1 or "
                             "more, got %r" % (step,))
        if factor > 1.0:
            raise ValueError("MultiFactorScheduler: factor must be at most 1, got %r"
                             % (factor,))
        self.step, self.factor = step, factor
        self.cur_step_ind = 0
        self.count = 0

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        while self.cur_step_ind < len(self.step) and num_update > self.step[self.cur_step_ind]:
            self.count = self.step[self.cur_step_ind]
            self.cur_step_ind += 1
            self.base_lr *= self.factor
        return self.base_lr


class PolyScheduler(LRScheduler):
    """Polynomial decay after the warm-up:
    ``final_lr + (base_lr - final_lr) * (1 - (num_update - warmup_steps) / (max_update -
    warmup_steps)) ** pwr``, then ``final_lr`` from ``max_update`` on."""

    def __init__(self, max_update, base_lr=0.01, pwr=2, final_lr=0, warmup_steps=0,
                 warmup_begin_lr=0, warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(max_update, int) or max_update < 1:
            raise ValueError("PolyScheduler: max_update must be a positive int, got %r"
                             % (max_update,))
        self.power, self.base_lr_orig = pwr, base_lr
        self.max_update, self.final_lr = max_update, final_lr
        self.max_steps = max_update - warmup_steps

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            left = 1.0 - (num_update - self.warmup_steps) / self.max_steps
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * left ** self.power
        return self.base_lr


class CosineScheduler(LRScheduler):
    """Cosine decay after the warm-up: ``final_lr + (base_lr - final_lr) * (1 + cos(pi *
    (num_update - warmup_steps) / (max_update - warmup_steps))) / 2``, then ``final_lr``."""

    def __init__(self, max_update, base_lr=0.01, final_lr=0, warmup_steps=0, warmup_begin_lr=0,
                 warmup_mode="linear"):
        super().__init__(base_lr, warmup_steps, warmup_begin_lr, warmup_mode)
        if not isinstance(max_update, int) or max_update < 1:
            raise ValueError("CosineScheduler: max_update must be a positive int, got %r"
                             % (max_update,))
        self.base_lr_orig, self.max_update, self.final_lr = base_lr, max_update, final_lr
        self.max_steps = max_update - warmup_steps

    def __call__(self, num_update):
        if num_update < self.warmup_steps:
            return self.get_warmup_lr(num_update)
        if num_update <= self.max_update:
            phase = math.pi * (num_update - self.warmup_steps) / self.max_steps
            self.base_lr = self.final_lr + (self.base_lr_orig - self.final_lr) * (
                1 + math.cos(phase)) / 2
        return self.base_lr
