"""Samplers: the order in which a DataLoader visits a dataset (MXNet's ``gluon.data``
samplers).

A sampler is an iterable of indices with a length; :class:`BatchSampler` groups the indices
of another sampler into lists, one list per mini-batch.

>>> from fastgrad import gluon
>>> list(gluon.data.BatchSampler(gluon.data.SequentialSampler(7), 3, 'keep'))
[[0, 1, 2], [3, 4, 5], [6]]
"""

import numpy as _onp

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "FilterSampler", "BatchSampler",
           "IntervalSampler"]

LAST_BATCH_MODES = ("keep", "discard", "rollover")


def check_last_batch(last_batch, where):
    """Raise a ValueError naming ``where`` unless ``last_batch`` is one of MXNet's modes."""
    if last_batch not in LAST_BATCH_MODES:
        raise ValueError("%s: last_batch must be one of 'keep', 'discard', or 'rollover', "
                         "but got %r" % (where, last_batch))


def _check_length(length, where):
    if isinstance(length, bool) or not isinstance(length, (int, _onp.integer)) or length < 0:
        raise ValueError("%s: length must be a non-negative integer, got %r" % (where, length))
    return int(length)


class Sampler:
    """The base class of samplers: a subclass defines ``__iter__`` (the indices) and
    ``__len__`` (how many)."""

    def __iter__(self):
        raise NotImplementedError

    def __len__(self):
        raise NotImplementedError


class SequentialSampler(Sampler):
    """The indices ``start, start + 1, ..., start + length - 1`` in order.

    Parameters
    ----------
    length : int
        How many indices.
    start : int, default 0
        The first index.
    """

    def __init__(self, length, start=0):
        self._length = _check_length(length, "SequentialSampler")
        self._start = int(start)

    def __iter__(self):
        return iter(range(self._start, self._start + self._length))

    def __len__(self):
        return self._length


class RandomSampler(Sampler):
    """The indices ``0, ..., length - 1`` in a new random order on every pass (drawn from
    NumPy's global generator, as MXNet does, so ``numpy.random.seed`` fixes the order)."""

    def __init__(self, length):
        self._length = _check_length(length, "RandomSampler")

    def __iter__(self):
        order = _onp.arange(self._length)
        _onp.random.shuffle(order)
        return iter(order.tolist())

    def __len__(self):
        return self._length


class FilterSampler(Sampler):
    """The indices of the samples of ``dataset`` for which ``fn(sample)`` is true (``fn`` is
    evaluated once, when the sampler is made)."""

    def __init__(self, fn, dataset):
        self._fn = fn
        self._dataset = dataset
        self._indices = [i for i in range(len(dataset)) if fn(dataset[i])]

    def __iter__(self):
        return iter(self._indices)

    def __len__(self):
        return len(self._indices)


class IntervalSampler(Sampler):
    """Every ``interval``-th index: ``0, interval, 2*interval, ...``, then (with ``rollover``)
    ``1, 1 + interval, ...`` and so on, so that every index of ``[0, length)`` is visited once
    (MXNet 2's ``IntervalSampler``).

    >>> from fastgrad.gluon.data import IntervalSampler
    >>> list(IntervalSampler(7, 3))
    [0, 3, 6, 1, 4, 2, 5]
    >>> list(IntervalSampler(7, 3, rollover=False))
    [0, 3, 6]
    """

    def __init__(self, length, interval, rollover=True):
        self._length = _check_length(length, "IntervalSampler")
        if isinstance(interval, bool) or not isinstance(interval, (int, _onp.integer)) \
                or not 0 < interval:
            raise ValueError("IntervalSampler: interval must be a positive integer, got %r"
                             % (interval,))
        if interval > max(length, 1):
            raise ValueError("IntervalSampler: interval %d is larger than the length %d"
                             % (interval, length))
        self._interval = int(interval)
        self._rollover = bool(rollover)

    def __iter__(self):
        starts = range(self._interval) if self._rollover else range(1)
        for start in starts:
            for index in range(start, self._length, self._interval):
                yield index

    def __len__(self):
        if self._rollover:
            return self._length
        return (self._length + self._interval - 1) // self._interval


class BatchSampler(Sampler):
    """Groups the indices of ``sampler`` into lists of ``batch_size``.

    Parameters
    ----------
    sampler : Sampler (or any iterable of indices with a length)
        The indices to group.
    batch_size : int
        The length of each list.
    last_batch : {'keep', 'discard', 'rollover'}, default 'keep'
        What becomes of the indices left over when ``batch_size`` does not divide the
        sampler's length: ``'keep'`` yields them as a shorter last batch, ``'discard'`` drops
        them, ``'rollover'`` puts them at the front of the next pass.

    >>> from fastgrad.gluon.data import BatchSampler, SequentialSampler
    >>> batches = BatchSampler(SequentialSampler(5), 2, 'rollover')
    >>> list(batches)
    [[0, 1], [2, 3]]
    >>> list(batches)         # index 4 was carried over to the second pass
    [[4, 0], [1, 2], [3, 4]]
    """

    def __init__(self, sampler, batch_size, last_batch="keep"):
        if isinstance(batch_size, bool) or not isinstance(batch_size, (int, _onp.integer)) \
                or batch_size <= 0:
            raise ValueError("BatchSampler: batch_size must be a positive integer, got %r"
                             % (batch_size,))
        check_last_batch(last_batch, "BatchSampler")
        self._sampler = sampler
        self._batch_size = int(batch_size)
        self._last_batch = last_batch
        self._prev = []

    def __iter__(self):
        batch, self._prev = self._prev, []
        for index in self._sampler:
            batch.append(index)
            if len(batch) == self._batch_size:
                yield batch
                batch = []
        if batch:
            if self._last_batch == "keep":
                yield batch
            elif self._last_batch == "rollover":
                self._prev = batch

    def __len__(self):
        if self._last_batch == "keep":
            return (len(self._sampler) + self._batch_size - 1) // self._batch_size
        if self._last_batch == "discard":
            return len(self._sampler) // self._batch_size
        return (len(self._prev) + len(self._sampler)) // self._batch_size
