"""User-defined differentiable functions (``autograd.Function``).

Note [Function backward in concurrent passes]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Backward passes have no common lock (Note [Pass state] in ``_engine.pyx``), so two passes
over one graph, in two threads, or one pass inside another's ``Function.backward``, may reach
the same ``Function`` node. Its user ``backward`` reads ``self.saved_tensors``, one attribute of
one object, which the op swaps for the duration of the call (saved outputs come back with their
history) and which the release after a pass without ``retain_graph`` empties. So one call of
a ``Function``'s ``backward`` runs at a time: the op holds ``busy`` (taken without waiting, so
nothing ever waits on it while user code runs) from before it reads the saved tensors until
after it restores them, and a second pass that reaches the node meanwhile raises a
``RuntimeError`` naming the function. A release that finds the op busy leaves the saved tensors
to the running call, which empties them when it returns.
"""

import threading
import weakref

import numpy as _np

from fastgrad._core._array import ndarray, record_custom, wrap_output, unwrap, _wrap
from fastgrad._core._state import set_recording, is_recording
from fastgrad.base import MXNetTypeError

# Every Function instance whose node is alive. A graph owns its Function nodes, so dropping
# the graph (or running backward without retain_graph) releases them; this registry only
# observes them (``live_functions()``), it never keeps one alive.
_LIVE = weakref.WeakSet()


def live_functions():
    """The ``Function`` instances that a recorded graph still holds (for leak checks)."""
    return list(_LIVE)


class _OutputRef:
    """Stands in ``saved_tensors`` for output ``index`` of the Function (Note [No cycles])."""

    __slots__ = ("index", "data")

    def __init__(self, index, data):
        self.index = index
        self.data = data


class _FunctionOp:
    """The op of a recorded ``Function`` call: runs the user's ``backward`` for the engine."""

    __slots__ = ("fn", "name", "in_shapes", "in_dtypes", "out_shapes", "out_dtypes",
                 "busy", "__weakref__")

    def __init__(self, fn, inputs, outputs):
        self.fn = fn
        self.busy = threading.Lock()      # Note [Function backward in concurrent passes]
        self.name = type(fn).__name__
        self.in_shapes = [_np.shape(_np.asarray(x)) for x in inputs]
        self.in_dtypes = [_np.asarray(x).dtype for x in inputs]
        self.out_shapes = [o.shape for o in outputs]
        self.out_dtypes = [o.dtype for o in outputs]

    def node_backward(self, node, g, needs, create_graph):
        fn = self.fn
        if fn is None:
            raise RuntimeError(
                "%s: the saved tensors of this Function were already freed by an earlier "
                "backward pass; pass retain_graph=True to differentiate it again" % self.name)
        n_out = len(self.out_shapes)
        gs = list(g) if n_out > 1 else [g]
        for k in range(n_out):
            if gs[k] is None:
                gs[k] = _np.zeros(self.out_shapes[k], dtype=self.out_dtypes[k])
            if not isinstance(gs[k], ndarray):
                gs[k] = _wrap(gs[k])
        if not self.busy.acquire(blocking=False):
            raise RuntimeError(
                "%s: the backward of this Function call is already running in another backward "
                "pass (another thread, or a pass that this backward started and that reached "
                "its own node); one call of a Function's backward runs at a time. Run the "
                "passes one after the other (with retain_graph=True)" % self.name)
        try:
            if self.fn is None:
                raise RuntimeError(
                    "%s: the saved tensors of this Function were already freed by an earlier "
                    "backward pass; pass retain_graph=True to differentiate it again"
                    % self.name)
            stored = fn.saved_tensors
            _check_saved_versions(fn, stored)
            fn.saved_tensors = tuple(
                wrap_output(s.data, node, s.index) if isinstance(s, _OutputRef) else s
                for s in stored)
            prev = set_recording(create_graph)
            try:
                rets = fn.backward(*gs)
            finally:
                set_recording(prev)
                # Emptied if a pass released the node while this call ran.
                fn.saved_tensors = stored if self.fn is not None else ()
        finally:
            self.busy.release()
        if isinstance(rets, ndarray) or not isinstance(rets, (list, tuple)):
            rets = (rets,)
        n_in = len(self.in_shapes)
        if len(rets) != n_in:
            raise ValueError("%s.backward returned %d gradients but forward took %d inputs"
                             % (self.name, len(rets), n_in))
        out = []
        for i, r in enumerate(rets):
            if not isinstance(r, ndarray):
                # MXNet asserts the same: a NumPy array or None is not a gradient.
                raise MXNetTypeError(
                    "%s.backward must return fastgrad arrays (np.zeros_like(x) for an input "
                    "without gradient); gradient %d is a %s" % (self.name, i, type(r).__name__))
            shape = r.shape
            if tuple(shape) != tuple(self.in_shapes[i]):
                raise ValueError("%s.backward returned a gradient of shape %s for input %d of "
                                 "shape %s" % (self.name, tuple(shape), i,
                                               tuple(self.in_shapes[i])))
            out.append(r)
        return tuple(out)

    def release(self):
        fn = self.fn
        if fn is None:
            return
        self.fn = None
        if self.busy.acquire(blocking=False):
            # Not running: empty the saved tensors now (else the running call does).
            fn.saved_tensors = ()
            self.busy.release()


def _versions(saved):
    """The in-place write counts of the fastgrad arrays among ``saved`` (None for others)."""
    return tuple(s.version if isinstance(s, ndarray) else None for s in saved)


def _check_saved_versions(fn, saved):
    """Raise if an array ``fn`` saved was written in place since ``forward`` (Note [Versions]
    in _array_versions.pxi): its ``backward`` would read the new values and be silently wrong."""
    recorded = getattr(fn, "_saved_versions", None)
    if recorded is None:
        return
    for k, (s, v) in enumerate(zip(saved, recorded)):
        if v is not None and isinstance(s, ndarray) and s.version != v:
            raise RuntimeError(
                "%s: saved tensor %d (shape %s) was modified in place after forward() saved "
                "it, so backward() would read the new values and its gradient would be wrong. "
                "Write the update out of place, or save a copy() in forward()."
                % (type(fn).__name__, k, s.shape))


class Function:
    """A differentiable function with a hand-written backward.

    Subclass it and define ``forward(self, *inputs)`` and ``backward(self, *output_grads)``:
    ``backward`` takes one gradient per output of ``forward`` and returns one gradient per
    input. Call an instance once. If ``backward`` is written with fastgrad ops it is itself
    differentiable (``grad(..., create_graph=True)``).

    Examples
    --------
    >>> import fastgrad as mx
    >>> class sigmoid(mx.autograd.Function):
    ...     def forward(self, x):
    ...         y = 1 / (1 + mx.np.exp(-x))
    ...         self.save_for_backward(y)
    ...         return y
    ...     def backward(self, dy):
    ...         y, = self.saved_tensors
    ...         return dy * y * (1 - y)
    >>> x = mx.np.zeros((3,)); x.attach_grad()
    >>> with mx.autograd.record():
    ...     m = sigmoid()(x)
    >>> m.backward(); x.grad
    array([0.25, 0.25, 0.25])
    """

    def __init__(self):
        self._used = False
        self.saved_tensors = ()

    def save_for_backward(self, *args):
        """Keep arrays for ``backward`` (read them back from ``self.saved_tensors``)."""
        self.saved_tensors = args

    def __call__(self, *inputs):
        if getattr(self, "_used", False):
            raise RuntimeError("%s: each Function instance can be called only once; create "
                               "another instance" % type(self).__name__)
        self._used = True
        if not hasattr(self, "saved_tensors"):
            raise RuntimeError("%s.__init__ must call super().__init__()" % type(self).__name__)
        recording = is_recording()
        prev = set_recording(False)
        try:
            outputs = self.forward(*inputs)
        finally:
            set_recording(prev)
        single = isinstance(outputs, ndarray)
        outs = (outputs,) if single else tuple(outputs) if isinstance(outputs, (list, tuple)) \
            else None
        if outs is None or not all(isinstance(o, ndarray) for o in outs):
            raise TypeError("%s.forward must return a fastgrad array or a tuple of them"
                            % type(self).__name__)
        if not recording:
            return outputs
        op = _FunctionOp(self, inputs, outs)
        recorded = record_custom(op, tuple(inputs), outs)
        if recorded is not outs:
            _LIVE.add(self)
            # Outputs saved for backward come back with their history when backward runs:
            # kept as themselves they would tie the node to itself (Note [No cycles]).
            self.saved_tensors = tuple(
                next((_OutputRef(k, unwrap(o)) for k, o in enumerate(outs) if s is o), s)
                for s in self.saved_tensors)
            self._saved_versions = _versions(self.saved_tensors)
        return recorded[0] if single else recorded

    def forward(self, *inputs):
        """Forward computation: takes arrays, returns an array or a tuple of arrays."""
        raise NotImplementedError("%s must define forward()" % type(self).__name__)

    def backward(self, *output_grads):
        """Backward computation: one gradient per output in, one per input out."""
        raise NotImplementedError("%s must define backward()" % type(self).__name__)
