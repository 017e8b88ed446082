"""MXNet's CTC loss operator with its arguments: ``nd.CTCLoss`` (also ``nd.ctc_loss``) and,
through the symbol catalogue, ``sym.CTCLoss``. The computation is the
table op ``ctc_loss`` (Note [CTC loss] in ``_table_ctc.py``)."""

import numpy as _onp

from fastgrad._core._array import unwrap
from fastgrad._ops._registry import REGISTRY as _P


def _lengths(name, what, lengths, use, batch):
    """The lengths array the op takes: ``-1`` for "not given" (the op then uses the full
    sequence, or the labels up to their first padding value)."""
    if not use:
        return _onp.full((batch,), -1, dtype=_onp.int64)
    if lengths is None:
        raise ValueError("%s: use_%s=True needs %s" % (name, what, what))
    values = _onp.asarray(unwrap(lengths))
    if values.shape != (batch,):
        raise ValueError("%s: %s must have shape (batch_size,) = (%d,), got %s"
                         % (name, what, batch, values.shape))
    if values.size and (values.min() < 0 or _onp.any(values != _onp.round(values))):
        raise ValueError("%s: %s must be non-negative integers, got %s"
                         % (name, what, values.tolist()))
    return values.astype(_onp.int64)


def ctc_loss(data, label, data_lengths=None, label_lengths=None, use_data_lengths=False,
             use_label_lengths=False, blank_label="first", _name="ctc_loss"):
    """The connectionist temporal classification loss per sample, shape ``(batch_size,)``.

    Parameters
    ----------
    data : array, shape ``(sequence_length, batch_size, alphabet_size)``
        Unnormalized activations; softmax over the last axis is applied inside.
    label : array, shape ``(batch_size, label_sequence_length)``
        The labels, padded with ``0`` when ``blank_label='first'`` (labels ``1`` to
        ``alphabet_size - 1``) or with ``-1`` when ``blank_label='last'`` (labels ``0`` to
        ``alphabet_size - 2``).
    data_lengths, label_lengths : array of shape ``(batch_size,)``, optional
        Used when ``use_data_lengths`` / ``use_label_lengths`` is true; otherwise every
        sequence is ``sequence_length`` long and a label ends at its first padding value.
    blank_label : {'first', 'last'}
        Which class is the blank.

    The loss is differentiable once with respect to ``data`` (Note [CTC loss] in
    ``fastgrad/_ops/_table_ctc.py``; an impossible alignment gives ``inf`` and a zero gradient).

    >>> import fastgrad as mx
    >>> data = mx.nd.zeros((2, 1, 3))         # two frames, blank and two symbols, uniform
    >>> mx.nd.CTCLoss(data, mx.nd.array([[1, 0]])).asnumpy()   # -log(3 paths / 9)
    array([1.0986123], dtype=float32)
    """
    shape = _onp.shape(unwrap(data))
    if len(shape) != 3:
        raise ValueError("%s: data must have shape (sequence_length, batch_size, "
                         "alphabet_size), got %s" % (_name, shape))
    label_shape = _onp.shape(unwrap(label))
    if len(label_shape) != 2 or label_shape[0] != shape[1]:
        raise ValueError("%s: label must have shape (batch_size, label_length) = (%d, L), "
                         "got %s" % (_name, shape[1], label_shape))
    dl = _lengths(_name, "data_lengths", data_lengths, use_data_lengths, shape[1])
    ll = _lengths(_name, "label_lengths", label_lengths, use_label_lengths, shape[1])
    return _P["ctc_loss"](data, label, dl, ll, blank_label)


def CTCLoss(data, label, data_lengths=None, label_lengths=None, use_data_lengths=False,
            use_label_lengths=False, blank_label="first", **kwargs):
    """MXNet 1.x's ``nd.CTCLoss`` (also ``nd.ctc_loss``): see :func:`ctc_loss`."""
    if kwargs:
        raise TypeError("nd.CTCLoss: unexpected argument(s) %s" % ", ".join(sorted(kwargs)))
    return ctc_loss(data, label, data_lengths, label_lengths, use_data_lengths,
                    use_label_lengths, blank_label, _name="nd.CTCLoss")
