"""The CTC section of the derivative table (Note [Table sections] in _derivatives.py): the
connectionist temporal classification loss of Graves et al. (2006), MXNet's ``CTCLoss``.

Note [CTC loss]
~~~~~~~~~~~~~~~
``ctc_loss(data, label, data_lengths, label_lengths, blank_label)`` takes unnormalized
activations ``data`` of shape ``(T, N, C)`` (softmax over the alphabet is applied inside, as
MXNet does), integer labels ``(N, L)`` and one length per sample of each, and returns the
negative log-likelihood ``-log p(label | data)`` per sample, shape ``(N,)``.

The forward is the log-space alpha recursion over the label with a blank between and around
its symbols (``2L + 1`` states), run for all samples at once, one time step at a time; a
sample whose sequence has ended keeps its last alphas. The derivative with respect to the
activations is the classic alpha-beta one: with ``y = softmax(data)`` and the posterior
probability ``occ[t, n, k]`` of emitting symbol ``k`` at time ``t`` (the alpha-beta products of
the states labelled ``k``, over ``p``), ``d loss / d data = y - occ`` for ``t`` inside the
sequence and zero after it. ``ctc_loss_grad`` computes it in NumPy,
so ``ctc_loss`` is differentiable once (``list_ops()`` reports order 1): its rule records
``ctc_loss_grad`` under ``create_graph=True`` like any op, and differentiating that raises
``NotImplementedError`` (a second derivative is never silently zero).

Where MXNet 1.9.1 (warp-ctc) returns a wrong value, fastgrad returns the true one: an empty
label has loss ``-sum_t log y[t, blank]`` (MXNet: 0) and a label that cannot be aligned in the
time available (too many symbols and repeats for ``T``) has loss ``+inf`` with a zero gradient
(MXNet: loss 0). Labels outside the alphabet raise ``ValueError`` (MXNet reads past its
tables).
"""

import numpy as np


def _lengths(data, label, data_lengths, label_lengths, blank_label):
    """Per-sample ``(T_n, L_n)`` as int arrays, the blank index and the labels as ints,
    checked. A negative length means "not given": ``T`` for the data, and for the labels
    the position of the first padding value (``0`` with a first blank, ``-1`` with a last)."""
    t_max, n, c = data.shape
    if blank_label not in ("first", "last"):
        raise ValueError("ctc_loss: blank_label must be 'first' or 'last', got %r"
                         % (blank_label,))
    blank = 0 if blank_label == "first" else c - 1
    pad = 0 if blank_label == "first" else -1
    lab = np.asarray(label)
    if lab.ndim != 2 or lab.shape[0] != n:
        raise ValueError("ctc_loss: label must have shape (batch_size, label_length) = (%d, L), "
                         "got %s" % (n, lab.shape))
    lab = lab.astype(np.int64)
    dl = np.asarray(data_lengths).reshape(-1)
    ll = np.asarray(label_lengths).reshape(-1)
    if dl.shape != (n,) or ll.shape != (n,):
        raise ValueError("ctc_loss: data_lengths and label_lengths must have shape (%d,), got "
                         "%s and %s" % (n, dl.shape, ll.shape))
    dl = np.where(dl < 0, t_max, dl).astype(np.int64)
    if np.any(dl > t_max):
        raise ValueError("ctc_loss: a data length exceeds the sequence length %d: %s"
                         % (t_max, dl.tolist()))
    given = ll >= 0
    padded = lab == pad
    found = np.where(padded.any(axis=1), padded.argmax(axis=1), lab.shape[1]) \
        if lab.shape[1] else np.zeros(n, dtype=np.int64)
    ll = np.where(given, ll, found).astype(np.int64)
    if np.any(ll > lab.shape[1]):
        raise ValueError("ctc_loss: a label length exceeds the label width %d: %s"
                         % (lab.shape[1], ll.tolist()))
    used = np.arange(lab.shape[1]) < ll[:, None]
    bad = used & ((lab < 0) | (lab >= c) | (lab == blank))
    if bad.any():
        raise ValueError("ctc_loss: labels must lie in [0, %d) and differ from the blank %d "
                         "(blank_label=%r); got %s" % (c, blank, blank_label,
                                                      sorted(set(lab[bad].tolist()))))
    return dl, ll, blank, np.where(used, lab, blank)


def _extended(lab, ll, blank):
    """The labels with blanks around every symbol, ``(N, 2L + 1)``; whether each state may be
    entered from two states back (a symbol differing from the symbol before it); whether each
    state exists for its sample."""
    n, width = lab.shape
    ext = np.full((n, 2 * width + 1), blank, dtype=np.int64)
    ext[:, 1::2] = lab
    skip = np.zeros(ext.shape, dtype=bool)
    skip[:, 3::2] = lab[:, 1:] != lab[:, :-1]
    valid = np.arange(ext.shape[1]) < (2 * ll + 1)[:, None]
    return ext, skip, valid


def _shift(a, k):
    """``a`` moved ``k`` states to the right along the last axis, ``-inf`` entering."""
    out = np.full_like(a, -np.inf)
    if k < a.shape[-1]:
        out[..., k:] = a[..., :a.shape[-1] - k]
    return out


def _unshift(a, k):
    """``a`` moved ``k`` states to the left along the last axis, ``-inf`` entering."""
    out = np.full_like(a, -np.inf)
    if k < a.shape[-1]:
        out[..., :a.shape[-1] - k] = a[..., k:]
    return out


def _logsumexp3(a, b, c):
    m = np.maximum(np.maximum(a, b), c)
    safe = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return np.log(np.exp(a - safe) + np.exp(b - safe) + np.exp(c - safe)) + safe


def _alphas(logy, ext, skip, valid, dl):
    """``alpha[t, n, s]``: log probability of the first ``t + 1`` frames ending in state
    ``s``; frozen after a sample's last frame."""
    t_max, n = logy.shape[:2]
    emit = np.take_along_axis(logy, np.broadcast_to(ext, (t_max,) + ext.shape), axis=2)
    emit = np.where(valid, emit, -np.inf)
    alpha = np.full(emit.shape, -np.inf)
    if t_max == 0:
        return alpha, emit
    first = np.full(ext.shape, -np.inf)
    first[:, :2] = emit[0, :, :2]
    alpha[0] = np.where((dl > 0)[:, None], first, -np.inf)
    for t in range(1, t_max):
        prev = alpha[t - 1]
        step = _logsumexp3(prev, _shift(prev, 1), np.where(skip, _shift(prev, 2), -np.inf))
        alpha[t] = np.where((t < dl)[:, None], step + emit[t], prev)
    return alpha, emit


def _log_likelihood(alpha, ll, dl):
    """``log p(label | data)`` per sample from the alphas at its last frame."""
    n = alpha.shape[1]
    if alpha.shape[0] == 0:
        return np.where(ll == 0, 0.0, -np.inf)
    last = alpha[np.maximum(dl - 1, 0), np.arange(n)]
    end = 2 * ll
    a = last[np.arange(n), end]
    b = np.where(ll > 0, last[np.arange(n), np.maximum(end - 1, 0)], -np.inf)
    logp = np.logaddexp(a, b)
    # No frames: only the empty label is possible, with probability one.
    return np.where(dl == 0, np.where(ll == 0, 0.0, -np.inf), logp)


def _float_dtype(data):
    dtype = np.asarray(data).dtype
    return dtype if dtype.kind == "f" else np.dtype(np.float32)


def _prepare(data, label, data_lengths, label_lengths, blank_label):
    x = np.asarray(data, dtype=np.float64)
    if x.ndim != 3:
        raise ValueError("ctc_loss: data must have shape (sequence_length, batch_size, "
                         "alphabet_size), got %s" % (x.shape,))
    dl, ll, blank, lab = _lengths(x, label, data_lengths, label_lengths, blank_label)
    ext, skip, valid = _extended(lab, ll, blank)
    shifted = x - x.max(axis=2, keepdims=True) if x.size else x
    logy = shifted - np.log(np.exp(shifted).sum(axis=2, keepdims=True))
    alpha, emit = _alphas(logy, ext, skip, valid, dl)
    return x, dl, ll, ext, skip, valid, logy, alpha, emit


def ctc_loss(data, label, data_lengths, label_lengths, blank_label):
    """``-log p(label | data)`` per sample (Note [CTC loss]), in the dtype of ``data``."""
    x, dl, ll, _, _, _, _, alpha, _ = _prepare(data, label, data_lengths, label_lengths,
                                               blank_label)
    # 0.0 - x: a certain alignment costs 0, not -0
    return (0.0 - _log_likelihood(alpha, ll, dl)).astype(_float_dtype(data), copy=False)


def ctc_loss_grad(data, label, data_lengths, label_lengths, blank_label):
    """The derivative of ``ctc_loss`` with respect to ``data``, ``(T, N, C)``, by the
    alpha-beta recursion (Note [CTC loss]); zero for an impossible alignment."""
    x, dl, ll, ext, skip, valid, logy, alpha, emit = _prepare(
        data, label, data_lengths, label_lengths, blank_label)
    t_max, n, c = x.shape
    logp = _log_likelihood(alpha, ll, dl)
    # beta[t, n, s]: log probability of the frames after t given state s at frame t.
    beta = np.full(alpha.shape, -np.inf)
    rows = np.arange(n)
    end = np.full(ext.shape, -np.inf)
    end[rows, 2 * ll] = 0.0
    end[rows[ll > 0], 2 * ll[ll > 0] - 1] = 0.0
    skip_from = _unshift(skip, 2) if ext.shape[1] > 2 else np.zeros_like(skip)
    for t in range(t_max - 1, -1, -1):
        if t + 1 < t_max:
            nxt = beta[t + 1] + emit[t + 1]
            step = _logsumexp3(nxt, _unshift(nxt, 1),
                               np.where(skip_from, _unshift(nxt, 2), -np.inf))
        else:
            step = end
        beta[t] = np.where((t == dl - 1)[:, None], end,
                           np.where((t < dl - 1)[:, None], step, -np.inf))
    feasible = np.isfinite(logp)
    with np.errstate(invalid="ignore"):
        post = np.exp(alpha + beta - np.where(feasible, logp, 0.0)[None, :, None])
    post = np.where(valid & feasible[:, None], post, 0.0)
    # occupancy[t, n, k]: the posteriors of the states labelled k (one-hot of the labels)
    occupancy = np.einsum("tns,nsk->tnk", post, np.eye(c)[ext], optimize=True)
    inside = (np.arange(t_max)[:, None] < dl[None, :]) & feasible[None, :]
    grad = np.where(inside[..., None], np.exp(logy) - occupancy, 0.0)
    return grad.astype(_float_dtype(data), copy=False)


def entries(Op, NONDIFF):
    return [
        Op("ctc_loss", ctc_loss, "data, label, data_lengths, label_lengths; blank_label='first'",
           order=1, label=NONDIFF, data_lengths=NONDIFF, label_lengths=NONDIFF,
           data="reshape(g, (1, -1, 1)) * ctc_loss_grad(data, label, data_lengths, "
                "label_lengths, blank_label)"),
        # The first derivative; differentiating it raises (Note [CTC loss]).
        Op("ctc_loss_grad", ctc_loss_grad,
           "data, label, data_lengths, label_lengths; blank_label='first'", order=0,
           label=NONDIFF, data_lengths=NONDIFF, label_lengths=NONDIFF,
           data="ctc_second_derivative()"),
    ]


def ctc_second_derivative():
    """The rule of ``ctc_loss_grad``: there is none (Note [CTC loss])."""
    raise NotImplementedError(
        "ctc_loss (CTCLoss) is differentiable once: its second derivative (the derivative of "
        "ctc_loss_grad with respect to data) is not implemented")


HELPERS = {"ctc_second_derivative": ctc_second_derivative}
