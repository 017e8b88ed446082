"""Evaluation metrics (``mx.metric``, also ``mx.gluon.metric``), as in MXNet 1.9.1.

A metric accumulates over mini-batches: ``update(labels, preds)`` takes a list of label arrays
and a list of prediction arrays (or one array each), ``get()`` returns ``(name, value)``,
``reset()`` starts again. Each metric also keeps *global* statistics that ``reset_local()``
leaves alone (``get_global()``). Arrays may be fastgrad arrays (``mx.nd``/``mx.np``) or NumPy
arrays; values are MXNet's on the same inputs.

>>> import fastgrad as mx
>>> acc = mx.metric.Accuracy()
>>> acc.update(labels=[mx.nd.array([0, 1, 1])],
...            preds=[mx.nd.array([[0.3, 0.7], [0, 1.], [0.4, 0.6]])])
>>> acc.get()
('accuracy', 0.6666666666666666)

``mx.metric.create`` builds a metric from a registered name (``'acc'``, ``'top_k_accuracy'``,
``'f1'``, ``'mcc'``, ``'mae'``, ``'mse'``, ``'rmse'``, ``'ce'``, ``'nll_loss'``,
``'perplexity'``, ``'pearsonr'``, ``'pcc'``, ``'loss'``, ...), a list of them (a
:class:`CompositeEvalMetric`) or a function ``feval(label, pred)`` (a :class:`CustomMetric`).
"""

import math
from collections import OrderedDict

import numpy as _onp

from fastgrad._core._array import ndarray as _array_type, unwrap
from fastgrad import registry

__all__ = ["EvalMetric", "CompositeEvalMetric", "Accuracy", "TopKAccuracy", "F1", "MCC",
           "Perplexity", "MAE", "MSE", "RMSE", "CrossEntropy", "NegativeLogLikelihood",
           "PearsonCorrelation", "PCC", "Loss", "Torch", "Caffe", "CustomMetric", "np",
           "check_label_shapes", "register", "alias", "create"]

_NUMERIC_TYPES = (float, int, _onp.generic)


def _is_array(x):
    return isinstance(x, (_array_type, _onp.ndarray))


def _numpy(x):
    """The values of ``x`` as a NumPy array (no copy of a fastgrad array's data)."""
    return _onp.asarray(unwrap(x))


def _length(x):
    """``len(x)``; for a 0-d array, a clear error instead of NumPy's."""
    if _is_array(x) and x.ndim == 0:
        raise ValueError("metric: a label or prediction must have at least one dimension "
                         "(got a 0-d array)")
    return len(x)


def check_label_shapes(labels, preds, wrap=False, shape=False):
    """Check that ``labels`` and ``preds`` agree, as MXNet does: their lengths (the number of
    arrays in a list, or the first dimension of a single array), or with ``shape=True`` their
    shapes. Raises ``ValueError`` when they differ. With ``wrap=True`` a single array is put in
    a list. Returns ``(labels, preds)``."""
    if shape:
        label_shape, pred_shape = tuple(labels.shape), tuple(preds.shape)
    else:
        label_shape, pred_shape = _length(labels), _length(preds)
    if label_shape != pred_shape:
        raise ValueError("Shape of labels {} does not match shape of predictions {}"
                         .format(label_shape, pred_shape))
    if wrap:
        if _is_array(labels):
            labels = [labels]
        if _is_array(preds):
            preds = [preds]
    return labels, preds


class EvalMetric:
    """The base class of metrics: subclasses define ``update(labels, preds)``, adding to
    ``sum_metric`` and ``num_inst`` (and their ``global_`` twins); ``get()`` is their ratio.

    Parameters
    ----------
    name : str
        The metric's display name.
    output_names, label_names : list of str, optional
        The predictions and labels :meth:`update_dict` uses (default: all, in order).
    """

    def __init__(self, name, output_names=None, label_names=None, **kwargs):
        self.name = str(name)
        self.output_names = output_names
        self.label_names = label_names
        self._has_global_stats = kwargs.pop("has_global_stats", False)
        self._kwargs = kwargs
        self.reset()

    def __str__(self):
        return "EvalMetric: {}".format(dict(self.get_name_value()))

    def get_config(self):
        """The arguments that recreate this metric with ``mx.metric.create(**config)``."""
        config = dict(self._kwargs)
        config.update({"metric": self.__class__.__name__, "name": self.name,
                       "output_names": self.output_names, "label_names": self.label_names})
        return config

    def update_dict(self, label, pred):
        """``update`` from ``{name: array}`` dicts, picking ``label_names``/``output_names``."""
        pred = (list(pred.values()) if self.output_names is None
                else [pred[name] for name in self.output_names])
        label = (list(label.values()) if self.label_names is None
                 else [label[name] for name in self.label_names])
        self.update(label, pred)

    def update(self, labels, preds):
        """Add a mini-batch: ``labels`` and ``preds`` are lists of arrays (or one array)."""
        raise NotImplementedError()

    def reset(self):
        """Forget everything, local and global."""
        self.num_inst = 0
        self.sum_metric = 0.0
        self.global_num_inst = 0
        self.global_sum_metric = 0.0

    def reset_local(self):
        """Forget the local statistics; the global ones continue."""
        self.num_inst = 0
        self.sum_metric = 0.0

    def _add(self, value, count):
        """Add ``value`` over ``count`` instances to the local and global sums."""
        self.sum_metric += value
        self.global_sum_metric += value
        self.num_inst += count
        self.global_num_inst += count

    def get(self):
        """``(name, value)``: the mean since the last reset, NaN before any instance."""
        if self.num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, self.sum_metric / self.num_inst)

    def get_global(self):
        """``(name, value)`` since the last :meth:`reset` (ignoring :meth:`reset_local`)."""
        if not self._has_global_stats:
            return self.get()
        if self.global_num_inst == 0:
            return (self.name, float("nan"))
        return (self.name, self.global_sum_metric / self.global_num_inst)

    def get_name_value(self):
        """``[(name, value), ...]`` of :meth:`get`."""
        return _zip_name_value(*self.get())

    def get_global_name_value(self):
        """``[(name, value), ...]`` of :meth:`get_global`."""
        if not self._has_global_stats:
            return self.get_name_value()
        return _zip_name_value(*self.get_global())


def _zip_name_value(name, value):
    names = name if isinstance(name, list) else [name]
    values = value if isinstance(value, list) else [value]
    return list(zip(names, values))


register = registry.get_register_func(EvalMetric, "metric")
alias = registry.get_alias_func(EvalMetric, "metric")
_create = registry.get_create_func(EvalMetric, "metric")


def create(metric, *args, **kwargs):
    """A metric from a registered name (with constructor arguments), an :class:`EvalMetric`
    (returned as is), a list of those (a :class:`CompositeEvalMetric`) or a function
    ``feval(label, pred)`` of NumPy arrays (a :class:`CustomMetric`).

    >>> import fastgrad as mx
    >>> mx.metric.create(['acc', 'rmse']).get()
    (['accuracy', 'rmse'], [nan, nan])
    """
    if callable(metric):
        return CustomMetric(metric, *args, **kwargs)
    if isinstance(metric, list):
        composite = CompositeEvalMetric()
        for child in metric:
            composite.add(create(child, *args, **kwargs))
        return composite
    return _create(metric, *args, **kwargs)


@register
@alias("composite")
class CompositeEvalMetric(EvalMetric):
    """Several metrics updated together; ``get()`` returns ``([names], [values])``."""

    def __init__(self, metrics=None, name="composite", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.metrics = [create(m) for m in (metrics or [])]

    def add(self, metric):
        """Add a child metric (an instance or anything :func:`create` takes)."""
        self.metrics.append(create(metric))

    def get_metric(self, index):
        """The child metric at ``index``."""
        try:
            return self.metrics[index]
        except IndexError:
            raise ValueError("Metric index {} is out of range 0 and {}"
                             .format(index, len(self.metrics))) from None

    def update_dict(self, labels, preds):
        if self.label_names is not None:
            labels = OrderedDict([i for i in labels.items() if i[0] in self.label_names])
        if self.output_names is not None:
            preds = OrderedDict([i for i in preds.items() if i[0] in self.output_names])
        for metric in self.metrics:
            metric.update_dict(labels, preds)

    def update(self, labels, preds):
        for metric in self.metrics:
            metric.update(labels, preds)

    def reset(self):
        for metric in getattr(self, "metrics", ()):   # EvalMetric.__init__ resets first
            metric.reset()

    def reset_local(self):
        for metric in self.metrics:
            metric.reset_local()

    def _collect(self, getter):
        names, values = [], []
        for metric in self.metrics:
            name, value = getter(metric)
            names.extend([name] if isinstance(name, str) else name)
            values.extend([value] if isinstance(value, _NUMERIC_TYPES) else value)
        return (names, values)

    def get(self):
        return self._collect(lambda metric: metric.get())

    def get_global(self):
        return self._collect(lambda metric: metric.get_global())

    def get_config(self):
        config = super().get_config()
        config.update({"metrics": [m.get_config() for m in self.metrics]})
        return config


# ------------------------------------------------------------------ classification
@register
@alias("acc")
class Accuracy(EvalMetric):
    """The fraction of correct predictions. A prediction whose shape differs from its label's
    holds scores: its class is the argmax along ``axis`` (the first of tied maxima). Labels
    and predicted classes are truncated to int32 before comparing."""

    def __init__(self, axis=1, name="accuracy", output_names=None, label_names=None):
        super().__init__(name, axis=axis, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.axis = axis

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            pred = _numpy(pred)
            label = _numpy(label)
            if pred.shape != label.shape:
                pred = _onp.argmax(pred, axis=self.axis)
            pred = pred.astype("int32").ravel()
            label = label.astype("int32").ravel()
            check_label_shapes(label, pred)
            self._add(int((pred == label).sum()), len(pred))


@register
@alias("top_k_accuracy", "top_k_acc")
class TopKAccuracy(EvalMetric):
    """The fraction of samples whose label is among the ``top_k`` highest scores
    (``top_k`` > 1; the name becomes ``top_k_accuracy_<k>``)."""

    def __init__(self, top_k=1, name="top_k_accuracy", output_names=None, label_names=None):
        super().__init__(name, top_k=top_k, output_names=output_names,
                         label_names=label_names, has_global_stats=True)
        self.top_k = top_k
        if not self.top_k > 1:
            raise ValueError("Please use Accuracy if top_k is no more than 1")
        self.name += "_%d" % self.top_k

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            pred = _numpy(pred)
            if pred.ndim > 2:
                raise ValueError("TopKAccuracy: predictions should be no more than 2 dims, "
                                 "not shape %s" % (pred.shape,))
            ranked = _onp.argpartition(pred.astype("float32"), -self.top_k)
            label = _numpy(label).astype("int32")
            check_label_shapes(label, ranked)
            if ranked.ndim == 1:
                correct = int((ranked.ravel() == label.ravel()).sum())
            else:
                classes = ranked.shape[1]
                correct = sum(int((ranked[:, classes - 1 - j].ravel() == label.ravel()).sum())
                              for j in range(min(classes, self.top_k)))
            self._add(correct, ranked.shape[0])


class _BinaryClassificationMetrics:
    """True/false positive/negative counts of a binary classifier, local and global."""

    _COUNTS = ("true_positives", "false_negatives", "false_positives", "true_negatives")

    def __init__(self):
        self.reset_stats()

    def update_binary_stats(self, label, pred):
        """Count one batch: ``pred`` holds two scores per sample (the class is their argmax),
        ``label`` 0 or 1."""
        pred = _numpy(pred)
        label = _numpy(label).astype("int32")
        if pred.ndim != 2:
            raise ValueError("%s: predictions must be (batch, 2) scores, not shape %s"
                             % (type(self).__name__, pred.shape))
        pred_label = _onp.argmax(pred, axis=1)
        check_label_shapes(label, pred)
        if len(_onp.unique(label)) > 2:
            raise ValueError("%s currently only supports binary classification."
                             % self.__class__.__name__)
        pred_true = pred_label == 1
        label_true = label == 1
        batch = {"true_positives": int((pred_true & label_true).sum()),
                 "false_positives": int((pred_true & ~label_true).sum()),
                 "false_negatives": int((~pred_true & label_true).sum()),
                 "true_negatives": int((~pred_true & ~label_true).sum())}
        for count, value in batch.items():
            setattr(self, count, getattr(self, count) + value)
            setattr(self, "global_" + count, getattr(self, "global_" + count) + value)

    def _counts(self, use_global):
        prefix = "global_" if use_global else ""
        return [float(getattr(self, prefix + c)) for c in self._COUNTS]

    def _precision_recall(self, use_global):
        tp, fn, fp, _ = self._counts(use_global)
        precision = tp / (tp + fp) if tp + fp > 0 else 0.0
        recall = tp / (tp + fn) if tp + fn > 0 else 0.0
        return precision, recall

    def _fscore(self, use_global):
        precision, recall = self._precision_recall(use_global)
        if precision + recall > 0:
            return 2 * precision * recall / (precision + recall)
        return 0.0

    precision = property(lambda self: self._precision_recall(False)[0])
    recall = property(lambda self: self._precision_recall(False)[1])
    global_precision = property(lambda self: self._precision_recall(True)[0])
    global_recall = property(lambda self: self._precision_recall(True)[1])
    fscore = property(lambda self: self._fscore(False))
    global_fscore = property(lambda self: self._fscore(True))
    total_examples = property(lambda self: sum(self._counts(False)))
    global_total_examples = property(lambda self: sum(self._counts(True)))

    def matthewscc(self, use_global=False):
        """Matthews' correlation coefficient; a zero factor of the denominator counts as 1."""
        tp, fn, fp, tn = self._counts(use_global)
        if tp + fn + fp + tn == 0:
            return 0.0
        denominator = 1.0
        for term in (tp + fp, tp + fn, tn + fp, tn + fn):
            if term != 0.0:
                denominator *= term
        return (tp * tn - fp * fn) / math.sqrt(denominator)

    def local_reset_stats(self):
        for count in self._COUNTS:
            setattr(self, count, 0)

    def reset_stats(self):
        self.local_reset_stats()
        for count in self._COUNTS:
            setattr(self, "global_" + count, 0)


class _BinaryMetric(EvalMetric):
    """F1 and MCC: a per-batch score averaged over batches (``average='macro'``) or one score
    of the counts over all batches (``'micro'``)."""

    def __init__(self, name, output_names, label_names, average):
        if average not in ("macro", "micro"):
            raise ValueError("%s: average must be 'macro' or 'micro', not %r"
                             % (type(self).__name__, average))
        self.average = average
        self.metrics = _BinaryClassificationMetrics()
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def _score(self, use_global):
        raise NotImplementedError()

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            self.metrics.update_binary_stats(label, pred)
        if self.average == "macro":
            self.sum_metric += self._score(False)
            self.global_sum_metric += self._score(True)
            self.num_inst += 1
            self.global_num_inst += 1
            self.metrics.reset_stats()
        else:
            local_n = self.metrics.total_examples
            global_n = self.metrics.global_total_examples
            self.sum_metric = self._score(False) * local_n
            self.global_sum_metric = self._score(True) * global_n
            self.num_inst = local_n
            self.global_num_inst = global_n

    def reset(self):
        self.sum_metric = 0.0
        self.num_inst = 0
        self.global_sum_metric = 0.0
        self.global_num_inst = 0
        self.metrics.reset_stats()

    def reset_local(self):
        self.sum_metric = 0.0
        self.num_inst = 0
        self.metrics.local_reset_stats()


@register
class F1(_BinaryMetric):
    """The F1 score (harmonic mean of precision and recall) of a binary classifier whose
    predictions are ``(batch, 2)`` scores; ``average`` is ``'macro'`` (mean of per-batch
    scores) or ``'micro'`` (one score over all batches)."""

    def __init__(self, name="f1", output_names=None, label_names=None, average="macro"):
        super().__init__(name, output_names, label_names, average)

    def _score(self, use_global):
        return self.metrics._fscore(use_global)


@register
class MCC(_BinaryMetric):
    """Matthews' correlation coefficient of a binary classifier (predictions ``(batch, 2)``
    scores), ``(TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN))`` with zero factors of the
    denominator replaced by 1; ``average`` as for :class:`F1`."""

    def __init__(self, name="mcc", output_names=None, label_names=None, average="macro"):
        super().__init__(name, output_names, label_names, average)

    # MXNet names these _average and _metrics on MCC
    _average = property(lambda self: self.average)
    _metrics = property(lambda self: self.metrics)

    def _score(self, use_global):
        return self.metrics.matthewscc(use_global)


@register
class PCC(EvalMetric):
    """The multiclass generalisation of MCC over a confusion matrix that grows with the
    largest class seen. Predictions are class indices (same shape as labels) or scores
    ``(batch, classes)``."""

    def __init__(self, name="pcc", output_names=None, label_names=None, has_global_stats=True):
        self.k = 2
        super().__init__(name=name, output_names=output_names, label_names=label_names,
                         has_global_stats=has_global_stats)

    def _grow(self, inc):
        self.lcm = _onp.pad(self.lcm, ((0, inc), (0, inc)), "constant", constant_values=0)
        self.gcm = _onp.pad(self.gcm, ((0, inc), (0, inc)), "constant", constant_values=0)
        self.k += inc

    @staticmethod
    def _calc_mcc(cmat):
        n = cmat.sum()
        x = cmat.sum(axis=1)
        y = cmat.sum(axis=0)
        cov_xx = _onp.sum(x * (n - x))
        cov_yy = _onp.sum(y * (n - y))
        if cov_xx == 0 or cov_yy == 0:
            return float("nan")
        cov_xy = _onp.sum(cmat.diagonal() * n - x * y)
        return float(cov_xy / (cov_xx * cov_yy) ** 0.5)

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label = _numpy(label).astype("int32")
            pred = _numpy(pred)
            pred = pred.argmax(axis=1) if pred.shape != label.shape else pred.astype("int32")
            pred, label = pred.ravel(), label.ravel()
            if pred.size and min(pred.min(), label.min()) < 0:
                raise ValueError("PCC: class indices must be >= 0")
            n = int(max(pred.max(), label.max())) if pred.size else 0
            if n >= self.k:
                self._grow(n + 1 - self.k)
            batch = _onp.zeros((self.k, self.k))
            _onp.add.at(batch, (pred, label), 1)
            self.lcm += batch
            self.gcm += batch
        self.num_inst += 1
        self.global_num_inst += 1

    @property
    def sum_metric(self):
        return self._calc_mcc(self.lcm) * self.num_inst

    @property
    def global_sum_metric(self):
        return self._calc_mcc(self.gcm) * self.global_num_inst

    def reset(self):
        self.global_num_inst = 0.0
        self.gcm = _onp.zeros((self.k, self.k))
        self.reset_local()

    def reset_local(self):
        self.num_inst = 0.0
        self.lcm = _onp.zeros((self.k, self.k))


@register
class Perplexity(EvalMetric):
    """``exp`` of the mean negative log of the probability given to each label.

    ``pred`` holds probabilities along ``axis``; the label array has one entry per position
    of ``pred`` without that axis. Entries equal to ``ignore_label`` (a required argument, as
    in MXNet; ``None`` ignores nothing) are left out. Probabilities below 1e-10 count as 1e-10.
    """

    def __init__(self, ignore_label, axis=-1, name="perplexity", output_names=None,
                 label_names=None):
        super().__init__(name, ignore_label=ignore_label, output_names=output_names,
                         label_names=label_names, has_global_stats=True)
        self.ignore_label = ignore_label
        self.axis = axis

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        loss = 0.0
        num = 0
        for label, pred in zip(labels, preds):
            pred = _numpy(pred)
            label = _numpy(label)
            axis = self.axis % pred.ndim if pred.ndim else 0
            positions = pred.shape[:axis] + pred.shape[axis + 1:]
            if pred.ndim == 0 or label.size != int(_onp.prod(positions)):
                raise ValueError("Perplexity: shape mismatch: labels %s vs. predictions %s "
                                 "(one label per prediction along axis %d)"
                                 % (label.shape, pred.shape, self.axis))
            # MXNet's pick clips out-of-range indices (mode='clip')
            index = _onp.clip(label.reshape(positions).astype("int32"), 0, pred.shape[axis] - 1)
            picked = _onp.take_along_axis(pred, _onp.expand_dims(index, axis), axis).ravel()
            if self.ignore_label is not None:
                ignore = (label.ravel() == self.ignore_label).astype(picked.dtype)
                num -= float(ignore.sum())
                picked = picked * (1 - ignore) + ignore
            loss -= float(_onp.log(_onp.maximum(picked.dtype.type(1e-10), picked)).sum())
            num += picked.size
        self._add(loss, num)

    def _perplexity(self, total, count):
        return float("nan") if count == 0 else math.exp(total / count)

    def get(self):
        return (self.name, self._perplexity(self.sum_metric, self.num_inst))

    def get_global(self):
        return (self.name, self._perplexity(self.global_sum_metric, self.global_num_inst))


# ------------------------------------------------------------------ regression
class _RegressionMetric(EvalMetric):
    """MAE, MSE, RMSE: a per-batch error (a 1-D label or prediction is read as a column,
    then they broadcast), averaged over batches."""

    def __init__(self, name, output_names, label_names):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    @staticmethod
    def _error(difference):
        raise NotImplementedError()

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label = _numpy(label)
            pred = _numpy(pred)
            if label.ndim == 1:
                label = label.reshape(label.shape[0], 1)
            if pred.ndim == 1:
                pred = pred.reshape(pred.shape[0], 1)
            self._add(float(self._error(label - pred)), 1)


@register
class MAE(_RegressionMetric):
    """Mean absolute error, ``mean(|label - pred|)`` per batch, averaged over batches."""

    def __init__(self, name="mae", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _error(difference):
        return _onp.abs(difference).mean()


@register
class MSE(_RegressionMetric):
    """Mean squared error, ``mean((label - pred)**2)`` per batch, averaged over batches."""

    def __init__(self, name="mse", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _error(difference):
        return (difference ** 2.0).mean()


@register
class RMSE(_RegressionMetric):
    """Root mean squared error per batch, averaged over batches."""

    def __init__(self, name="rmse", output_names=None, label_names=None):
        super().__init__(name, output_names, label_names)

    @staticmethod
    def _error(difference):
        return _onp.sqrt((difference ** 2.0).mean())


class _LikelihoodMetric(EvalMetric):
    """CrossEntropy and NegativeLogLikelihood: the mean over samples of
    ``-log(pred[i, label[i]] + eps)``, with ``pred`` of shape ``(batch, classes)``."""

    def __init__(self, eps, name, output_names, label_names):
        super().__init__(name, eps=eps, output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self.eps = eps

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            label = _numpy(label).ravel()
            pred = _numpy(pred)
            if pred.ndim < 2 or label.shape[0] != pred.shape[0]:
                raise ValueError("%s: labels %s do not match predictions %s (one label per "
                                 "row of (batch, classes) probabilities)"
                                 % (type(self).__name__, label.shape, pred.shape))
            prob = pred[_onp.arange(label.shape[0], dtype=_onp.int64), _onp.int64(label)]
            self._add(float((-_onp.log(prob + self.eps)).sum()), label.shape[0])


@register
@alias("ce")
class CrossEntropy(_LikelihoodMetric):
    """Cross entropy of ``(batch, classes)`` probabilities against class labels."""

    def __init__(self, eps=1e-12, name="cross-entropy", output_names=None, label_names=None):
        super().__init__(eps, name, output_names, label_names)


@register
@alias("nll_loss")
class NegativeLogLikelihood(_LikelihoodMetric):
    """Negative log-likelihood of ``(batch, classes)`` probabilities against class labels."""

    def __init__(self, eps=1e-12, name="nll-loss", output_names=None, label_names=None):
        super().__init__(eps, name, output_names, label_names)


class _Moments:
    """Running count, means, sums of squared deviations and co-moment of two series
    (Welford's updates), for the micro-averaged Pearson correlation."""

    def __init__(self):
        self.count = 0
        self.mean_label = self.mean_pred = 0.0
        self.sse_label = self.sse_pred = 0.0
        self.comoment = 0.0

    def update(self, label, pred):
        count = self.count + len(label)
        delta = label - self.mean_label
        mean_label = self.mean_label + _onp.sum(delta / count)
        self.sse_label += _onp.sum(delta * (label - mean_label))
        self.comoment += _onp.sum((label - mean_label) * (pred - self.mean_pred))
        delta = pred - self.mean_pred
        mean_pred = self.mean_pred + _onp.sum(delta / count)
        self.sse_pred += _onp.sum(delta * (pred - mean_pred))
        self.count, self.mean_label, self.mean_pred = count, mean_label, mean_pred

    def pearson(self):
        n = self.count
        return float(self.comoment / ((n - 1) * _onp.sqrt(self.sse_pred / (n - 1))
                                      * _onp.sqrt(self.sse_label / (n - 1))))


@register
@alias("pearsonr")
class PearsonCorrelation(EvalMetric):
    """Pearson's correlation of predictions and labels (same shapes, flattened): per batch and
    averaged (``average='macro'``) or over all values seen (``'micro'``)."""

    def __init__(self, name="pearsonr", output_names=None, label_names=None, average="macro"):
        if average not in ("macro", "micro"):
            raise ValueError("PearsonCorrelation: average must be 'macro' or 'micro', not %r"
                             % (average,))
        self.average = average
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def reset(self):
        super().reset()
        self._local, self._global = _Moments(), _Moments()

    def reset_local(self):
        super().reset_local()
        self._local = _Moments()

    def update(self, labels, preds):
        labels, preds = check_label_shapes(labels, preds, True)
        for label, pred in zip(labels, preds):
            check_label_shapes(label, pred, False, True)
            label = _numpy(label).ravel().astype(_onp.float64)
            pred = _numpy(pred).ravel().astype(_onp.float64)
            if self.average == "macro":
                self._add(float(_onp.corrcoef(pred, label)[0, 1]), 1)
            else:
                self._local.update(label, pred)
                self._global.update(label, pred)
                self.num_inst += 1
                self.global_num_inst += 1

    def get(self):
        if self.num_inst == 0:
            return (self.name, float("nan"))
        if self.average == "macro":
            return (self.name, self.sum_metric / self.num_inst)
        return (self.name, self._local.pearson())

    def get_global(self):
        if self.average == "macro" or self.global_num_inst == 0:
            return super().get_global()
        return (self.name, self._global.pearson())


# ------------------------------------------------------------------ others
@register
class Loss(EvalMetric):
    """The mean of the predictions themselves (losses); labels are ignored."""

    def __init__(self, name="loss", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names,
                         has_global_stats=True)

    def update(self, _, preds):
        if _is_array(preds):
            preds = [preds]
        for pred in preds:
            pred = _numpy(pred)
            self._add(float(pred.sum()), pred.size)


@register
class Torch(Loss):
    """:class:`Loss` under MXNet's name for Torch criterions."""

    def __init__(self, name="torch", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names)


@register
class Caffe(Loss):
    """:class:`Loss` under MXNet's name for Caffe criterions."""

    def __init__(self, name="caffe", output_names=None, label_names=None):
        super().__init__(name, output_names=output_names, label_names=label_names)


@register
class CustomMetric(EvalMetric):
    """A metric from ``feval(label, pred)`` of NumPy arrays, called per (label, pred) pair: it
    returns the batch's value (counted as one instance) or ``(sum_metric, num_inst)``.

    Parameters
    ----------
    feval : callable
    name : str, optional
        Default: ``feval.__name__`` (``'custom(<lambda>)'`` for a lambda).
    allow_extra_outputs : bool
        Allow more predictions than labels (e.g. RNN states); the extra ones are skipped.
    """

    def __init__(self, feval, name=None, allow_extra_outputs=False, output_names=None,
                 label_names=None):
        if name is None:
            name = feval.__name__
            if "<" in name:
                name = "custom(%s)" % name
        super().__init__(name, feval=feval, allow_extra_outputs=allow_extra_outputs,
                         output_names=output_names, label_names=label_names,
                         has_global_stats=True)
        self._feval = feval
        self._allow_extra_outputs = allow_extra_outputs

    def update(self, labels, preds):
        if not self._allow_extra_outputs:
            labels, preds = check_label_shapes(labels, preds, True)
        else:
            labels = [labels] if _is_array(labels) else labels
            preds = [preds] if _is_array(preds) else preds
        for pred, label in zip(preds, labels):
            value = self._feval(_numpy(label), _numpy(pred))
            if isinstance(value, tuple):
                self._add(*value)
            else:
                self._add(value, 1)

    def get_config(self):
        raise NotImplementedError("CustomMetric cannot be serialized")


def np(numpy_feval, name=None, allow_extra_outputs=False):
    """A :class:`CustomMetric` of ``numpy_feval(label, pred)`` (NumPy arrays in, a number
    out), named after the function.

    >>> import fastgrad as mx, numpy
    >>> def mean_abs(label, pred):
    ...     return numpy.mean(numpy.abs(label - pred))
    >>> mx.metric.np(mean_abs).name
    'mean_abs'
    """
    def feval(label, pred):
        return numpy_feval(label, pred)
    feval.__name__ = numpy_feval.__name__
    return CustomMetric(feval, name, allow_extra_outputs)
