"""MXNet 1.9.1's Gluon losses (``fastgrad.gluon.loss``, also ``mx.gluon.loss``).

Every loss is a :class:`~fastgrad.gluon.HybridBlock` called as ``loss(pred, label)`` (plus the
optional inputs each one documents) and returns one value per sample: the elementwise loss,
multiplied by ``sample_weight`` (broadcast against it) and by the scalar ``weight``, then
averaged over every axis except ``batch_axis``.

Note [Losses on nd and sym]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
``hybrid_forward(self, F, ...)`` runs with ``F = mx.nd`` on arrays and with ``F = mx.sym``
when the loss is given Symbols or is hybridized (traced into a Symbol). So the losses are
written only with operators that both namespaces have with the same arguments
(``F.broadcast_mul``, ``F.mean(..., exclude=True)``, ``F.Activation``, ``F.pick``,
``F.CTCLoss``, ...) and never read an input's shape: a Symbol has none while it is traced.
The one place where the two differ is reshaping a label like the prediction
(:func:`_reshape_like`): an array reshapes to ``pred.shape``, a Symbol uses
``F.reshape_like``. ``SDMLLoss`` needs the batch size and runs imperatively only, as in
MXNet.

Inputs may be ``mx.nd.NDArray`` (MXNet 1.x) or ``mx.np.ndarray`` (after ``npx.set_np()``);
the result has the type of the inputs.
"""

import math
import numbers

import numpy as _onp

from fastgrad import ndarray as _nd
from fastgrad.gluon.block import HybridBlock

__all__ = ["Loss", "L2Loss", "L1Loss", "SigmoidBinaryCrossEntropyLoss", "SigmoidBCELoss",
           "SoftmaxCrossEntropyLoss", "SoftmaxCELoss", "KLDivLoss", "CTCLoss", "HuberLoss",
           "HingeLoss", "SquaredHingeLoss", "LogisticLoss", "TripletLoss", "PoissonNLLLoss",
           "CosineEmbeddingLoss", "SDMLLoss"]


def _apply_weighting(F, loss, weight=None, sample_weight=None):
    """``loss`` times ``sample_weight`` (broadcast) and times the number ``weight``."""
    if sample_weight is not None:
        loss = F.broadcast_mul(loss, sample_weight)
    if weight is not None:
        loss = loss * weight
    return loss


def _reshape_like(F, x, y, loss, names=("label", "pred")):
    """``x`` reshaped to the shape of ``y`` (Note [Losses on nd and sym]); on arrays, a size
    mismatch raises naming the ``loss`` block and the two inputs."""
    if F is _nd:
        if x.size != y.size:
            raise ValueError("%s: %s has shape %s (%d elements) but %s has shape %s (%d); "
                             "they need the same number of elements"
                             % (type(loss).__name__, names[0], x.shape, x.size, names[1],
                                y.shape, y.size))
        return x.reshape(y.shape)
    return F.reshape_like(x, y)


def _softplus(F, x):
    """``log(1 + exp(x))``, MXNet's ``softrelu`` activation."""
    return F.Activation(x, act_type="softrelu")


class Loss(HybridBlock):
    """The base class of the losses.

    Parameters
    ----------
    weight : float or None
        A global scalar the loss is multiplied by.
    batch_axis : int
        The axis of the samples: the loss is averaged over every other axis.
    """

    def __init__(self, weight, batch_axis, **kwargs):
        if weight is not None and (isinstance(weight, bool)
                                   or not isinstance(weight, numbers.Number)):
            raise TypeError("%s: weight must be a number or None, got %r"
                            % (type(self).__name__, weight))
        if isinstance(batch_axis, bool) or not isinstance(batch_axis, numbers.Integral):
            raise TypeError("%s: batch_axis must be an int, got %r"
                            % (type(self).__name__, batch_axis))
        super().__init__(**kwargs)
        self._weight = weight
        self._batch_axis = int(batch_axis)

    def __repr__(self):
        return "%s(batch_axis=%s, w=%s)" % (type(self).__name__, self._batch_axis, self._weight)

    def _per_sample(self, F, loss):
        """The mean of ``loss`` over every axis but the batch axis."""
        return F.mean(self._checked(F, loss), axis=self._batch_axis, exclude=True)

    def _checked(self, F, loss):
        """``loss``, after checking on arrays that it has the batch axis (a Symbol's axes are
        checked when it runs)."""
        if F is _nd and not -loss.ndim <= self._batch_axis < max(loss.ndim, 1):
            raise ValueError("%s: batch_axis=%d is out of range for a loss of shape %s"
                             % (type(self).__name__, self._batch_axis, loss.shape))
        return loss

    def hybrid_forward(self, F, x, *args, **kwargs):
        """The loss, written with ``F`` (``mx.nd`` or ``mx.sym``): each loss overrides it."""
        raise NotImplementedError("%s must define hybrid_forward" % type(self).__name__)


class L2Loss(Loss):
    r"""Half the squared error, :math:`L = \frac{1}{2} \sum_i (label_i - pred_i)^2`, averaged
    over the non-batch axes.

    Parameters
    ----------
    weight : float or None, default 1.
    batch_axis : int, default 0

    Notes
    -----
    Inputs ``pred``, ``label`` (same number of elements as ``pred``), optional
    ``sample_weight`` (broadcastable to ``pred``'s shape); output of shape ``(batch_size,)``.

    >>> import fastgrad as mx
    >>> mx.gluon.loss.L2Loss()(mx.nd.array([[1., 2.]]), mx.nd.array([[2., 4.]]))
    <BLANKLINE>
    [1.25]
    <NDArray 1 @cpu(0)>
    """

    def __init__(self, weight=1., batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = _reshape_like(F, label, pred, self)
        loss = F.square(label - pred)
        loss = _apply_weighting(F, loss, self._weight / 2, sample_weight)
        return self._per_sample(F, loss)


class L1Loss(Loss):
    r"""The absolute error :math:`L = \sum_i |label_i - pred_i|`, averaged over the non-batch
    axes. Inputs as :class:`L2Loss`."""

    def __init__(self, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = _reshape_like(F, label, pred, self)
        loss = F.abs(label - pred)
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return self._per_sample(F, loss)


class SigmoidBinaryCrossEntropyLoss(Loss):
    r"""Binary cross-entropy (alias ``SigmoidBCELoss``).

    With ``p = sigmoid(pred)`` (or ``p = pred`` when ``from_sigmoid``),
    :math:`L = -\sum_i pos\_weight \cdot label_i \log p_i + (1 - label_i) \log(1 - p_i)`.
    From logits it is computed as ``relu(x) - x * z + softplus(-|x|)`` (with ``pos_weight``,
    ``x - x * z + (1 + (pos_weight - 1) * z) * (softplus(-|x|) + relu(-x))``), which never
    overflows; from probabilities ``1e-12`` is added inside the logarithms, as MXNet does.

    Parameters
    ----------
    from_sigmoid : bool, default False
        Whether ``pred`` is already a probability.
    weight : float or None
    batch_axis : int, default 0

    Notes
    -----
    Inputs ``pred``, ``label`` (values in ``[0, 1]``), optional ``sample_weight`` and
    ``pos_weight`` (broadcastable, e.g. ``(1, num_classes)``); output ``(batch_size,)``.
    """

    def __init__(self, from_sigmoid=False, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_sigmoid = from_sigmoid

    def hybrid_forward(self, F, pred, label, sample_weight=None, pos_weight=None):
        label = _reshape_like(F, label, pred, self)
        if not self._from_sigmoid:
            tail = _softplus(F, -F.abs(pred))
            if pos_weight is None:
                loss = F.relu(pred) - pred * label + tail
            else:
                scale = 1 + F.broadcast_mul(pos_weight - 1, label)
                loss = pred - pred * label + scale * (tail + F.relu(-pred))
        else:
            eps = 1e-12
            positive = F.log(pred + eps) * label
            if pos_weight is not None:
                positive = F.broadcast_mul(positive, pos_weight)
            loss = -(positive + F.log(1. - pred + eps) * (1. - label))
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return self._per_sample(F, loss)


SigmoidBCELoss = SigmoidBinaryCrossEntropyLoss


class SoftmaxCrossEntropyLoss(Loss):
    r"""Softmax cross-entropy (alias ``SoftmaxCELoss``).

    With ``log p = log_softmax(pred, axis)`` (or ``pred`` itself when ``from_logits``), the
    loss is ``-log p[label]`` for integer labels (``sparse_label=True``; ``label`` has
    ``pred``'s shape without ``axis``) or ``-sum(label * log p, axis)`` for distributions
    (``label`` has ``pred``'s number of elements).

    Parameters
    ----------
    axis : int, default -1
        The class axis.
    sparse_label : bool, default True
    from_logits : bool, default False
        Whether ``pred`` already holds log-probabilities.
    weight : float or None
    batch_axis : int, default 0

    >>> import fastgrad as mx
    >>> loss = mx.gluon.loss.SoftmaxCrossEntropyLoss()
    >>> loss(mx.nd.array([[0., 0.]]), mx.nd.array([1])).asnumpy().round(4)   # log 2
    array([0.6931], dtype=float32)
    """

    def __init__(self, axis=-1, sparse_label=True, from_logits=False, weight=None,
                 batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._axis = axis
        self._sparse_label = sparse_label
        self._from_logits = from_logits

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        if not self._from_logits:
            pred = F.log_softmax(pred, axis=self._axis)
        if self._sparse_label:
            loss = -F.pick(pred, label, axis=self._axis, keepdims=True)
        else:
            label = _reshape_like(F, label, pred, self)
            loss = -F.sum(pred * label, axis=self._axis, keepdims=True)
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return self._per_sample(F, loss)


SoftmaxCELoss = SoftmaxCrossEntropyLoss


class KLDivLoss(Loss):
    r"""The Kullback-Leibler divergence :math:`\sum_i label_i (\log label_i - \log p_i)`,
    **summed** over the non-batch axes (as MXNet 1.9.1), with ``log p = pred``
    (``from_logits=True``, the default) or ``log_softmax(pred, axis)``; ``1e-12`` is added
    inside ``log label``.

    Parameters
    ----------
    from_logits : bool, default True
    axis : int, default -1
        The softmax axis when ``from_logits`` is False.
    weight : float or None
    batch_axis : int, default 0
    """

    def __init__(self, from_logits=True, axis=-1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = from_logits
        self._axis = axis

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        if not self._from_logits:
            pred = F.log_softmax(pred, axis=self._axis)
        loss = label * (F.log(label + 1e-12) - pred)
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return F.sum(self._checked(F, loss), axis=self._batch_axis, exclude=True)


class CTCLoss(Loss):
    r"""Connectionist temporal classification loss (Graves et al., 2006).

    ``pred`` holds unnormalized scores of shape ``(N, T, C)`` (``layout='NTC'``) or
    ``(T, N, C)`` (``'TNC'``); the last class, ``C - 1``, is the blank. ``label`` holds the
    label sequences, ``(N, L)`` (``label_layout='NT'``) or ``(L, N)``, padded with ``-1``.
    ``pred_lengths`` and ``label_lengths`` (shape ``(N,)``, optional) give each sample's
    lengths; without them every sequence is ``T`` long and a label ends at its first ``-1``.
    The output is ``-log p(label | pred)`` per sample, shape ``(N,)``, differentiable once
    with respect to ``pred`` (Note [CTC loss] in ``fastgrad/_ops/_table_ctc.py``).

    Parameters
    ----------
    layout : {'NTC', 'TNC'}, default 'NTC'
    label_layout : {'NT', 'TN'}, default 'NT'
    weight : float or None

    >>> import fastgrad as mx
    >>> ctc = mx.gluon.loss.CTCLoss()
    >>> pred = mx.nd.zeros((1, 2, 3))          # two frames, symbols 0 and 1, blank 2
    >>> ctc(pred, mx.nd.array([[0, -1]])).asnumpy().round(4)   # -log(3 / 9)
    array([1.0986], dtype=float32)
    """

    def __init__(self, layout="NTC", label_layout="NT", weight=None, **kwargs):
        if layout not in ("NTC", "TNC"):
            raise ValueError("CTCLoss: layout must be 'NTC' or 'TNC', got %r" % (layout,))
        if label_layout not in ("NT", "TN"):
            raise ValueError("CTCLoss: label_layout must be 'NT' or 'TN', got %r"
                             % (label_layout,))
        self._layout = layout
        self._label_layout = label_layout
        super().__init__(weight, label_layout.find("N"), **kwargs)

    def hybrid_forward(self, F, pred, label, pred_lengths=None, label_lengths=None,
                       sample_weight=None):
        if self._layout == "NTC":
            pred = F.swapaxes(pred, 0, 1)
        if self._batch_axis == 1:
            label = F.swapaxes(label, 0, 1)
        lengths = {}
        if pred_lengths is not None:
            lengths["data_lengths"] = pred_lengths
        if label_lengths is not None:
            lengths["label_lengths"] = label_lengths
        loss = F.CTCLoss(pred, label, use_data_lengths=pred_lengths is not None,
                         use_label_lengths=label_lengths is not None, blank_label="last",
                         **lengths)
        return _apply_weighting(F, loss, self._weight, sample_weight)


class HuberLoss(Loss):
    r"""The smoothed L1 loss: ``|e| - rho / 2`` where the error ``|e| = |label - pred|``
    exceeds ``rho``, ``e^2 / (2 rho)`` elsewhere; averaged over the non-batch axes.

    Parameters
    ----------
    rho : float, default 1
    weight : float or None
    batch_axis : int, default 0
    """

    def __init__(self, rho=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._rho = rho

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = _reshape_like(F, label, pred, self)
        error = F.abs(label - pred)
        loss = F.where(error > self._rho, error - 0.5 * self._rho,
                       (0.5 / self._rho) * F.square(error))
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return self._per_sample(F, loss)


class HingeLoss(Loss):
    r"""The hinge loss ``max(0, margin - pred * label)`` for labels ``-1``/``1``, averaged
    over the non-batch axes.

    Parameters
    ----------
    margin : float, default 1
    weight : float or None
    batch_axis : int, default 0
    """

    def __init__(self, margin=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = _reshape_like(F, label, pred, self)
        loss = F.relu(self._margin - pred * label)
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return self._per_sample(F, loss)


class SquaredHingeLoss(Loss):
    r"""The squared hinge loss ``max(0, margin - pred * label)^2`` for labels ``-1``/``1``,
    averaged over the non-batch axes. Parameters as :class:`HingeLoss`."""

    def __init__(self, margin=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = _reshape_like(F, label, pred, self)
        loss = F.square(F.relu(self._margin - pred * label))
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return self._per_sample(F, loss)


class LogisticLoss(Loss):
    r"""The logistic loss ``log(1 + exp(-pred * label))`` for labels ``-1``/``1``
    (``label_format='signed'``) or ``0``/``1`` (``'binary'``), computed without overflow;
    averaged over the non-batch axes.

    Parameters
    ----------
    weight : float or None
    batch_axis : int, default 0
    label_format : {'signed', 'binary'}, default 'signed'
    """

    def __init__(self, weight=None, batch_axis=0, label_format="signed", **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        if label_format not in ("signed", "binary"):
            # MXNet's message (with its spelling), so code matching it keeps working
            raise ValueError("label_format can only be signed or binary, recieved %s."
                             % label_format)
        self._label_format = label_format

    def hybrid_forward(self, F, pred, label, sample_weight=None):
        label = _reshape_like(F, label, pred, self)
        if self._label_format == "signed":
            label = (label + 1.0) / 2.0
        loss = F.relu(pred) - pred * label + _softplus(F, -F.abs(pred))
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        return self._per_sample(F, loss)


class TripletLoss(Loss):
    r"""The triplet loss
    ``max(0, sum ||positive - pred||^2 - sum ||negative - pred||^2 + margin)``, the sums over
    the non-batch axes.

    Parameters
    ----------
    margin : float, default 1
    weight : float or None
    batch_axis : int, default 0

    Notes
    -----
    Inputs ``pred``, ``positive``, ``negative`` (each with ``pred``'s number of elements);
    output ``(batch_size,)``.
    """

    def __init__(self, margin=1, weight=None, batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F, pred, positive, negative):
        positive = _reshape_like(F, positive, pred, self, ("positive", "pred"))
        negative = _reshape_like(F, negative, pred, self, ("negative", "pred"))
        gap = F.sum(self._checked(F, F.square(positive - pred) - F.square(negative - pred)),
                    axis=self._batch_axis, exclude=True)
        loss = F.relu(gap + self._margin)
        return _apply_weighting(F, loss, self._weight, None)


class PoissonNLLLoss(Loss):
    r"""The negative log-likelihood of ``target`` under a Poisson law of mean ``exp(pred)``
    (``from_logits=True``, the default: ``exp(pred) - target * pred``) or ``pred``
    (``pred - target * log(pred + epsilon)``), **averaged over every element** (a result of
    shape ``(1,)``, as MXNet 1.9.1). ``compute_full`` adds Stirling's approximation of
    ``log(target!)``, ``target log target - target + log(2 pi target) / 2``, where
    ``target > 1``.

    Parameters
    ----------
    weight : float or None
    from_logits : bool, default True
    batch_axis : int, default 0
    compute_full : bool, default False

    Notes
    -----
    Inputs ``pred``, ``target``, optional ``sample_weight`` and ``epsilon`` (default 1e-8).
    """

    def __init__(self, weight=None, from_logits=True, batch_axis=0, compute_full=False,
                 **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._from_logits = from_logits
        self._compute_full = compute_full

    def hybrid_forward(self, F, pred, target, sample_weight=None, epsilon=1e-08):
        target = _reshape_like(F, target, pred, self, ("target", "pred"))
        if self._from_logits:
            loss = F.exp(pred) - target * pred
        else:
            loss = pred - target * F.log(pred + epsilon)
        if self._compute_full:
            # Stirling's term only where target > 1; evaluated at max(target, 1) so that a
            # zero count gives 0, not 0 * log(0) = nan (MXNet gives nan there)
            above = target > 1
            t = F.maximum(target, 1.0)
            loss = loss + (t * F.log(t) - t + 0.5 * F.log(2 * math.pi * t)) * above
        loss = _apply_weighting(F, loss, self._weight, sample_weight)
        # the mean of every element, shape (1,) in both namespaces (sym.mean(x) is NumPy's
        # full reduction, of shape ())
        return F.mean(loss.reshape((1, -1)), axis=1)


class CosineEmbeddingLoss(Loss):
    r"""For pairs of vectors and labels ``1``/``-1``: ``1 - cos(input1, input2)`` where the
    label is 1, ``max(0, cos(input1, input2) - margin)`` where it is -1, the cosine taken
    along the last axis (its denominator at least ``1e-12``).

    Parameters
    ----------
    weight : float or None
    batch_axis : int, default 0
    margin : float, default 0

    Notes
    -----
    Inputs ``input1``, ``input2`` (shape ``(batch_size, dim)``), ``label`` (``batch_size``
    values), optional ``sample_weight``; the output has shape ``(batch_size, 1)``, as in
    MXNet 1.9.1.
    """

    def __init__(self, weight=None, batch_axis=0, margin=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self._margin = margin

    def hybrid_forward(self, F, input1, input2, label, sample_weight=None):
        input1 = _reshape_like(F, input1, input2, self, ("input1", "input2"))
        label = label.reshape((-1, 1))
        cosine = self._cosine_similarity(F, input1, input2)
        similar = (label == 1) * (1 - cosine)
        dissimilar = F.relu((label == -1) * (cosine - self._margin))
        loss = similar + dissimilar
        return _apply_weighting(F, loss, self._weight, sample_weight)

    @staticmethod
    def _cosine_similarity(F, x, y, axis=-1):
        norms = F.norm(x, axis=axis).reshape((-1, 1)) * F.norm(y, axis=axis).reshape((-1, 1))
        dots = F.sum(x * y, axis=axis).reshape((-1, 1))
        return dots / F.maximum(norms, 1e-12)


class SDMLLoss(Loss):
    r"""Batchwise smoothed deep metric learning loss (Bonadiman, Kumar and Mittal, 2019).

    ``x1[i]`` and ``x2[i]`` form a positive pair and every other row of ``x2`` serves as a
    negative for ``x1[i]``: the loss is the KL divergence between the softmax over ``j`` of
    ``-||x1[i] - x2[j]||^2`` and the identity matrix smoothed by ``smoothing_parameter``
    (``1 - s`` on the diagonal, ``s / (N - 1)`` elsewhere), per row.

    Parameters
    ----------
    smoothing_parameter : float, default 0.3
    weight : float or None, default 1.
    batch_axis : int, default 0

    Notes
    -----
    Inputs ``x1``, ``x2`` of shape ``(batch_size, dim)``; output ``(batch_size,)``. It needs
    the batch size, so it runs imperatively only (as in MXNet).
    """

    def __init__(self, smoothing_parameter=0.3, weight=1., batch_axis=0, **kwargs):
        super().__init__(weight, batch_axis, **kwargs)
        self.kl_loss = KLDivLoss(from_logits=True)
        self.smoothing_parameter = smoothing_parameter

    def _smoothed_identity(self, F, batch_size, like):
        s = self.smoothing_parameter
        gold = _onp.eye(batch_size)
        labels = gold * (1 - s) + (1 - gold) * s / max(batch_size - 1, 1)
        if F is not _nd:
            return F.array(labels)
        out = _nd.array(labels, dtype=like.dtype)
        return out if isinstance(like, _nd.NDArray) else out.as_np_ndarray()

    def hybrid_forward(self, F, x1, x2):
        if x1.shape != x2.shape or len(x1.shape) != 2:
            raise ValueError("SDMLLoss: x1 and x2 must have the same shape (batch_size, dim), "
                             "got %s and %s" % (x1.shape, x2.shape))
        batch_size = x1.shape[0]
        diffs = F.broadcast_sub(x1.expand_dims(1), x2.expand_dims(0))
        distances = F.sum(F.square(diffs), axis=2)
        log_probabilities = F.log_softmax(-distances, axis=1)
        labels = self._smoothed_identity(F, batch_size, distances)
        return self.kl_loss(log_probabilities, labels)
