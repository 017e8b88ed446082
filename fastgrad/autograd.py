"""Recording scopes and gradients: the ``mxnet.autograd`` API.

Examples
--------
>>> import fastgrad as mx
>>> x = mx.np.array([[1., 2.], [3., 4.]])
>>> x.attach_grad()
>>> with mx.autograd.record():
...     y = 2 * x * x
>>> y.backward()
>>> x.grad
array([[ 4.,  8.],
       [12., 16.]])
"""

import numpy as _np

from fastgrad._core._state import (is_recording, is_training, set_recording, set_training,
                                   is_anomaly_enabled, set_anomaly_enabled)
from fastgrad._core._array import ndarray
from fastgrad.base import MXNetValueError
from fastgrad._core import _engine
from fastgrad._core._custom_function import Function
from fastgrad._autograd._derivative_tools import jacobian, hessian, vjp, jvp, hvp
from fastgrad.ndarray import NDArray     # re-exported, as mxnet.autograd does
from fastgrad.functional import grad_and_loss

__all__ = [
    "record", "pause", "train_mode", "predict_mode", "is_recording", "is_training",
    "set_recording", "set_training", "mark_variables", "backward", "grad", "Function",
    "get_symbol", "detect_anomaly", "is_anomaly_enabled", "jacobian", "hessian", "vjp", "jvp",
    "hvp", "NDArray",
]
__all__ += ["grad_and_loss"]


class _RecordingStateScope:
    """A ``with`` scope that sets recording and/or training and restores them on exit."""

    __slots__ = ("_record", "_train", "_prev_record", "_prev_train")

    def __init__(self, is_record, train_mode):
        self._record = is_record
        self._train = train_mode
        self._prev_record = None
        self._prev_train = None

    def __enter__(self):
        if self._record is not None:
            self._prev_record = set_recording(self._record)
        if self._train is not None:
            self._prev_train = set_training(self._train)
        return self

    def __exit__(self, exc_type, exc, tb):
        if self._record is not None:
            set_recording(self._prev_record)
        if self._train is not None:
            set_training(self._prev_train)
        return False


def record(train_mode=True):
    """A scope in which operations on variables are recorded for differentiation.

    Parameters
    ----------
    train_mode : bool, default True
        Whether the forward pass runs in training mode (dropout, batch norm).

    Examples
    --------
    >>> import fastgrad as mx
    >>> x = mx.np.ones((2,)); x.attach_grad()
    >>> with mx.autograd.record():
    ...     y = (x * 3).sum()
    >>> y.backward(); x.grad
    array([3., 3.])
    """
    return _RecordingStateScope(True, train_mode)


def pause(train_mode=False):
    """A scope in which nothing is recorded (inside ``record()``: evaluation, updates)."""
    return _RecordingStateScope(False, train_mode)


def train_mode():
    """A scope in training mode that leaves recording as it is."""
    return _RecordingStateScope(None, True)


def predict_mode():
    """A scope in prediction mode that leaves recording as it is."""
    return _RecordingStateScope(None, False)


def _as_list(x, what):
    if isinstance(x, ndarray):
        return [x], True
    if isinstance(x, (list, tuple)):
        return list(x), False
    raise TypeError("%s must be a fastgrad array or a list of them, got %s"
                    % (what, type(x).__name__))


def mark_variables(variables, gradients, grad_reqs="write"):
    """Make arrays variables of autograd, with the given arrays as their gradient buffers.

    Parameters
    ----------
    variables : ndarray or list of ndarray
    gradients : ndarray or list of ndarray
        Buffers of the same shapes; ``variables[i].grad`` becomes ``gradients[i]``.
    grad_reqs : str or list of str
        ``'write'``, ``'add'`` or ``'null'``, for all or for each variable.
    """
    variables, single = _as_list(variables, "mark_variables: variables")
    if single:
        gradients = [gradients] if not isinstance(gradients, (list, tuple)) else list(gradients)
    else:
        gradients, _ = _as_list(gradients, "mark_variables: gradients") \
            if not isinstance(gradients, _np.ndarray) else ([gradients], True)
    if len(variables) != len(gradients):
        raise ValueError("mark_variables: got %d variables but %d gradients"
                         % (len(variables), len(gradients)))
    if isinstance(grad_reqs, str):
        grad_reqs = [grad_reqs] * len(variables)
    elif len(grad_reqs) != len(variables):
        raise ValueError("mark_variables: got %d variables but %d grad_reqs"
                         % (len(variables), len(grad_reqs)))
    for i, (v, g, req) in enumerate(zip(variables, gradients, grad_reqs)):
        if not isinstance(v, ndarray):
            raise TypeError("mark_variables: variable %d is a %s, not a fastgrad array"
                            % (i, type(v).__name__))
        v._mark(g, req)


def _heads(heads, head_grads):
    heads, _ = _as_list(heads, "heads")
    if head_grads is None:
        return heads, None
    if isinstance(head_grads, (list, tuple)):
        head_grads = list(head_grads)
    else:
        head_grads = [head_grads]
    if len(head_grads) != len(heads):
        raise ValueError("got %d heads but %d head gradients" % (len(heads), len(head_grads)))
    return heads, head_grads


def backward(heads, head_grads=None, retain_graph=False, train_mode=True):
    """Compute the gradients of ``heads`` with respect to the variables and store them in
    the variables' ``.grad``.

    Parameters
    ----------
    heads : ndarray or list of ndarray
        Outputs to differentiate. A non-scalar head means the sum of its elements, unless
        its gradient is given.
    head_grads : ndarray, NumPy array, scalar, or a list of them, optional
        The gradient with respect to each head (``None`` entries mean ones). A head gradient
        of a different shape than its head is an error.
    retain_graph : bool
        Keep what the graph saved so it can be differentiated again.
    train_mode : bool
        Run the backward pass in training mode.
    """
    heads, head_grads = _heads(heads, head_grads)
    _engine.run_backward(heads, head_grads, None, bool(retain_graph), False, bool(train_mode))


def grad(heads, variables, head_grads=None, retain_graph=None, create_graph=False,
         train_mode=True, allow_unused=False):
    """Return the gradients of ``heads`` with respect to ``variables`` (``.grad`` untouched).

    Parameters
    ----------
    heads : ndarray or list of ndarray
    variables : ndarray or list of ndarray
        Arrays with history: variables (``attach_grad``) or intermediates computed from them.
    head_grads : optional
        As for :func:`backward`.
    retain_graph : bool, optional
        Defaults to ``create_graph``.
    create_graph : bool
        Record the gradient computation, so the result can be differentiated again, to any
        order, through every op.
    allow_unused : bool
        Return zeros for a variable the heads do not depend on instead of raising.

    Returns
    -------
    list of ndarray
        One array per variable, always a list, also when ``variables`` is a single array
        (what MXNet returns, whatever its docstring says): index it with ``[0]``.

    Examples
    --------
    >>> import fastgrad as mx
    >>> x = mx.nd.ones((1,)); x.attach_grad()
    >>> with mx.autograd.record():
    ...     z = mx.nd.elemwise_add(mx.nd.exp(x), x)
    >>> dx = mx.autograd.grad(z, [x], create_graph=True)[0]
    >>> dx.backward()
    >>> round(float(x.grad[0]), 5)
    2.71828
    """
    heads, head_grads = _heads(heads, head_grads)
    variables, _ = _as_list(variables, "grad: variables")
    if not variables:
        raise ValueError("grad: variables cannot be an empty list")
    for i, v in enumerate(variables):
        node = getattr(v, "node", None)
        if node is not None and node.op is None and v.grad_req == "null":
            raise MXNetValueError(
                "grad: cannot differentiate with respect to variable %d (shape %s) because "
                "its grad_req is 'null' (MXNet refuses too); attach_grad() it with 'write'"
                % (i, v.shape))
    if retain_graph is None:
        retain_graph = create_graph
    out = _engine.run_backward(heads, head_grads, variables, bool(retain_graph),
                               bool(create_graph), bool(train_mode), bool(allow_unused))
    return [_as_type_of(g, v) for g, v in zip(out, variables)]


def _as_type_of(gradient, variable):
    """``gradient`` as an array of ``variable``'s type (its history kept). With
    ``create_graph`` the gradients are outputs of recorded ops, of the ops' own array type;
    MXNet returns an NDArray's gradient as an NDArray either way."""
    if not isinstance(gradient, ndarray) or type(gradient) is type(variable):
        return gradient
    if isinstance(variable, NDArray):
        return gradient.as_nd_ndarray()
    if isinstance(variable, ndarray):
        return gradient.as_np_ndarray()
    return gradient


_symbol_builder = None     # fastgrad.symbol._history.from_history


def wire(*, symbol_builder):
    """Take the function that turns a recorded history into a symbol
    (``fastgrad.symbol._history.from_history``, which sits above this module): called once, by
    ``fastgrad._bootstrap.wire`` at start-up (Note [Bootstrap] in _bootstrap.py)."""
    global _symbol_builder
    _symbol_builder = symbol_builder


def get_symbol(x):
    """The recorded history of ``x`` as a :class:`fastgrad.symbol.Symbol`."""
    if _symbol_builder is None:
        raise RuntimeError("fastgrad.autograd.get_symbol: the symbol builder "
                           "(fastgrad.symbol._history) is not connected yet; "
                           "fastgrad._bootstrap.wire() connects it when `import fastgrad` has "
                           "imported its modules (Note [Bootstrap] in fastgrad/_bootstrap.py)")
    return _symbol_builder(x)


class detect_anomaly:
    """A scope in which a NaN or infinity produced by a backward rule raises at once.

    The error names the op and shows where its forward was recorded. Outside the scope the
    check costs nothing.
    """

    def __init__(self, enabled=True):
        self._enabled = bool(enabled)
        self._prev = None

    def __enter__(self):
        self._prev = set_anomaly_enabled(self._enabled)
        return self

    def __exit__(self, *exc):
        set_anomaly_enabled(self._prev)
        return False
