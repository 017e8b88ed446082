"""The ``Optimizer`` base class, the registry (``register``, ``create``) and MXNet's bookkeeping
of learning rates, weight decays and update counts.

Note [Optimizer semantics]
~~~~~~~~~~~~~~~~~~~~~~~~~~
The optimizers follow MXNet 1.9.1's ``mx.optimizer`` (``update(index, weight, grad, state)``,
one call per parameter) and compute exactly its formulas;
``tests/optimizer/test_optimizer_mxnet.py`` compares them with numbers MXNet produced
(``tests/fixtures/optimizer_mxnet.json``). ``AdamW`` is MXNet 2.x's (1.x has only the
``adamw_update`` kernel). Two deliberate differences:

* the state arrays have the weight's dtype (MXNet 1.x makes AdaGrad's, RMSProp's, AdaDelta's
  and FTRL's states float32 even for float64 weights);
* ``update`` never writes into ``grad`` (MXNet's AdaDelta rescales it in place).

Every update runs with recording off and writes the weight and the states in place (Note
[Fused updates] in ``fastgrad/_api/_update_ops.py``).
"""

import contextlib
import warnings

import numpy as _onp

from fastgrad._api import _update_ops as ops
from fastgrad import numpy_extension as _npx
from fastgrad._core._array import ndarray, unwrap, _wrap
from fastgrad._core._state import set_recording

__all__ = ["Optimizer", "register", "create", "zeros_like_weight"]


def zeros_like_weight(weight, dtype=None):
    """A zero array shaped like ``weight``, of its array type (``nd`` or ``np``) and dtype."""
    data = unwrap(weight)
    return _wrap(_onp.zeros(data.shape, dtype or data.dtype), type(weight))


class Optimizer:
    """The base class of every optimizer (``mx.optimizer.Optimizer``).

    Parameters
    ----------
    rescale_grad : float, default 1.0
        The gradient is multiplied by this before anything else (often ``1 / batch_size``).
    param_idx2name : dict of int to str, optional
        Names of the parameters by index; a parameter whose name does not end in ``_weight``
        or ``_gamma`` gets no weight decay (``wd_mult`` 0), as in MXNet.
    wd : float, default 0.0
        The weight decay (L2 regularization) coefficient.
    clip_gradient : float, optional
        Clip the rescaled gradient to ``[-clip_gradient, clip_gradient]``.
    learning_rate : float, optional
        The learning rate; if None, the scheduler's, or 0.01 without a scheduler.
    lr_scheduler : LRScheduler, optional
        Gives the learning rate as a function of the number of updates.
    sym : Symbol, optional
        Accepted for MXNet compatibility; its arguments' ``__lr_mult__``/``__wd_mult__``
        attributes are read when it has ``attr_dict``.
    begin_num_update : int, default 0
        The update count to start from.
    multi_precision : bool, default False
        Keep a float32 master copy of float16 weights and update that.
    param_dict : dict, optional
        Index to an object with ``lr_mult`` and ``wd_mult`` attributes (a Gluon parameter).
    use_fused_step : bool, optional
        Accepted for MXNet 2.x compatibility: every update here is the fused one.

    Examples
    --------
    >>> import fastgrad as mx
    >>> opt = mx.optimizer.create("sgd", learning_rate=0.1, momentum=0.9)
    >>> w = mx.nd.array([1.0, 2.0]); g = mx.nd.array([1.0, 1.0])
    >>> state = opt.create_state(0, w)
    >>> opt.update(0, w, g, state)
    >>> w
    <BLANKLINE>
    [0.9 1.9]
    <NDArray 2 @cpu(0)>
    """

    opt_registry: "dict[str, type[Optimizer]]" = {}

    def __init__(self, rescale_grad=1.0, param_idx2name=None, wd=0.0, clip_gradient=None,
                 learning_rate=None, lr_scheduler=None, sym=None, begin_num_update=0,
                 multi_precision=False, param_dict=None, use_fused_step=None):
        self.rescale_grad = rescale_grad
        self.lr_scheduler = lr_scheduler
        if lr_scheduler is None and learning_rate is None:
            learning_rate = 0.01
        self.lr = learning_rate
        if lr_scheduler is not None and learning_rate is not None \
                and lr_scheduler.base_lr != learning_rate:
            warnings.warn("the learning rate of the lr_scheduler (%g) is overwritten by the "
                          "optimizer's learning_rate (%g)" % (lr_scheduler.base_lr,
                                                               learning_rate), stacklevel=2)
            lr_scheduler.base_lr = learning_rate
        self.wd = wd
        self.lr_mult = {}
        self.wd_mult = {}
        self.begin_num_update = begin_num_update
        self.num_update = begin_num_update
        self._all_index_update_counts = {0: {}}
        self._index_update_count = self._all_index_update_counts[0]
        self.clip_gradient = clip_gradient
        self.multi_precision = multi_precision
        # MXNet's flag: whether NumPy array semantics was requested when the optimizer was
        # made (npx.set_np, @use_np); fastgrad's updates do not depend on it.
        self.allow_np_array = _npx.is_np_array_requested()
        self.aggregate_num = 0
        if param_idx2name is None:
            param_idx2name = {}
        if not isinstance(param_idx2name, dict):
            raise TypeError("Optimizer: param_idx2name must be a dict of parameter indexes to "
                            "names, got %s" % type(param_idx2name).__name__)
        self.idx2name = dict(param_idx2name)
        self.sym_info = ()
        if sym is not None and hasattr(sym, "attr_dict"):
            self.sym_info = (sym.attr_dict(), sym.list_arguments())
        self.param_dict = param_dict if param_dict else {}
        self.set_lr_mult({})
        self.set_wd_mult({})

    # ------------------------------------------------------------------ registry
    @staticmethod
    def register(klass):
        """Register an optimizer class under its lower-cased name (a class decorator)."""
        if not isinstance(klass, type) or not issubclass(klass, Optimizer):
            raise TypeError("optimizer.register: expected a subclass of Optimizer, got %r"
                            % (klass,))
        name = klass.__name__.lower()
        old = Optimizer.opt_registry.get(name)
        if old is not None and old is not klass:
            warnings.warn("optimizer.register: %s.%s replaces %s.%s as %r"
                          % (klass.__module__, klass.__name__, old.__module__, old.__name__,
                             name), stacklevel=2)
        Optimizer.opt_registry[name] = klass
        return klass

    @staticmethod
    def create_optimizer(name, **kwargs):
        """An instance of the optimizer registered as ``name`` (case-insensitive)."""
        if isinstance(name, Optimizer):
            return name
        if not isinstance(name, str):
            raise TypeError("optimizer.create: name must be a string, got %r" % (name,))
        try:
            klass = Optimizer.opt_registry[name.lower()]
        except KeyError:
            raise ValueError("optimizer.create: no optimizer named %r; registered: %s"
                             % (name, ", ".join(sorted(Optimizer.opt_registry)))) from None
        return klass(**kwargs)

    # ------------------------------------------------------------------ interface
    @property
    def learning_rate(self):
        if self.lr_scheduler is not None:
            return self.lr_scheduler(self.num_update)
        return self.lr

    def create_state(self, index, weight):
        """The state (momentum, moments, ...) kept for the weight at ``index``; None if none."""
        return None

    def create_state_multi_precision(self, index, weight):
        """``create_state``, with a float32 master copy first for float16 weights when
        ``multi_precision`` is on."""
        if self.multi_precision and weight.dtype == _onp.float16:
            master = _wrap(unwrap(weight).astype(_onp.float32), type(weight))
            return (master, self.create_state(index, master))
        if weight.dtype == _onp.float16:
            warnings.warn("accumulating optimizer state in float16 can lose accuracy; consider "
                          "multi_precision=True", stacklevel=2)
        return self.create_state(index, weight)

    def update(self, index, weight, grad, state):
        """Update ``weight`` in place from ``grad`` and ``state`` (lists of each allowed)."""
        raise NotImplementedError("%s.update is not implemented" % type(self).__name__)

    def update_multi_precision(self, index, weight, grad, state):
        """``update``, through the float32 master copy for float16 weights when
        ``multi_precision`` is on."""
        if isinstance(index, (list, tuple)):
            for i, w, g, s in zip(index, weight, grad, state):
                self.update_multi_precision(i, w, g, s)
            return
        if self.multi_precision and weight.dtype == _onp.float16:
            master, inner = state
            grad32 = _wrap(unwrap(grad).astype(_onp.float32), type(grad))
            self.update(index, master, grad32, inner)
            prev = set_recording(False)
            try:
                weight[...] = unwrap(master).astype(_onp.float16)
            finally:
                set_recording(prev)
        else:
            self.update(index, weight, grad, state)

    def set_learning_rate(self, lr):
        """Set the learning rate (an error when a scheduler sets it)."""
        if self.lr_scheduler is not None:
            raise UserWarning("set_learning_rate: this optimizer's learning rate comes from its "
                              "lr_scheduler; change the scheduler instead")
        self.lr = lr

    def _symbol_mults(self, attr_key):
        """``{name: float}`` of the attribute ``attr_key`` (``"__lr_mult__"`` or
        ``"__wd_mult__"``) of the symbol arguments in ``sym_info`` that set it."""
        mults = {}
        if self.sym_info:
            attr, names = self.sym_info
            for name in names:
                if name in attr and attr_key in attr[name]:
                    mults[name] = float(attr[name][attr_key])
        return mults

    def set_lr_mult(self, args_lr_mult):
        """Per-parameter learning-rate multipliers, by index or name."""
        self.lr_mult = self._symbol_mults("__lr_mult__")
        self.lr_mult.update(args_lr_mult)

    def set_wd_mult(self, args_wd_mult):
        """Per-parameter weight-decay multipliers, by index or name. Named parameters not
        ending in ``_weight`` or ``_gamma`` get 0 (biases are not decayed), as in MXNet."""
        self.wd_mult = {}
        for name in self.idx2name.values():
            if not (name.endswith("_weight") or name.endswith("_gamma")):
                self.wd_mult[name] = 0.0
        self.wd_mult.update(self._symbol_mults("__wd_mult__"))
        self.wd_mult.update(args_wd_mult)

    def set_lr_scale(self, args_lrscale):
        raise DeprecationWarning("set_lr_scale is deprecated (MXNet); use set_lr_mult")

    # ------------------------------------------------------------------ bookkeeping
    def _set_current_context(self, device_id):
        if device_id not in self._all_index_update_counts:
            self._all_index_update_counts[device_id] = {}
        self._index_update_count = self._all_index_update_counts[device_id]

    def _update_count(self, index):
        for idx in index if isinstance(index, (list, tuple)) else (index,):
            count = self._index_update_count.get(idx, self.begin_num_update) + 1
            self._index_update_count[idx] = count
            self.num_update = max(count, self.num_update)

    def _get_lrs(self, indices):
        lr = self.lr_scheduler(self.num_update) if self.lr_scheduler is not None else self.lr
        lrs = []
        for index in indices:
            if index in self.param_dict:
                lrs.append(lr * self.param_dict[index].lr_mult)
            elif index in self.lr_mult:
                lrs.append(lr * self.lr_mult[index])
            elif index in self.idx2name:
                lrs.append(lr * self.lr_mult.get(self.idx2name[index], 1.0))
            else:
                lrs.append(lr)
        return lrs

    def _get_lr(self, index):
        return self._get_lrs([index])[0]

    def _get_wds(self, indices):
        wds = []
        for index in indices:
            if index in self.param_dict:
                wds.append(self.wd * self.param_dict[index].wd_mult)
            elif index in self.wd_mult:
                wds.append(self.wd * self.wd_mult[index])
            elif index in self.idx2name:
                wds.append(self.wd * self.wd_mult.get(self.idx2name[index], 1.0))
            else:
                wds.append(self.wd)
        return wds

    def _get_wd(self, index):
        return self._get_wds([index])[0]

    def _clip(self):
        """``clip_gradient`` as the update ops take it (-1: off)."""
        return -1.0 if not self.clip_gradient else self.clip_gradient

    def __getstate__(self):
        state = self.__dict__.copy()
        del state["param_dict"]          # set again by whoever owns the parameters
        return state

    def __setstate__(self, state):
        self.__dict__ = state
        self.param_dict = {}


def _check_arrays(name, weight, grad):
    if not isinstance(weight, ndarray) or not isinstance(grad, ndarray):
        raise TypeError("%s.update: weight and grad must be fastgrad arrays, got %s and %s"
                        % (name, type(weight).__name__, type(grad).__name__))


@contextlib.contextmanager
def _writing(*arrays):
    """Recording off while the body writes the NumPy buffers of ``arrays`` (None entries are
    skipped); on success each is marked written (Note [Fused updates] in _update_ops.py)."""
    prev = set_recording(False)
    try:
        yield
        for a in arrays:
            if a is not None:
                ops._touch(a)
    finally:
        set_recording(prev)


def _preprocessed_grad(optimizer, weight, grad, wd=0.0):
    """``clip(rescale_grad * grad + wd * weight)`` as a new NumPy array, the way MXNet's
    Python-level optimizers (Adamax, Nadam, SGLD, DCASGD, ...) compute it: the scalars in
    double precision, clipping whenever ``clip_gradient`` is not None, to bounds rounded to
    float32 (MXNet's ``clip`` takes them as float32)."""
    w = unwrap(weight)
    ops._check_like("%s.update" % type(optimizer).__name__, w, "grad", grad)
    g = unwrap(grad) * optimizer.rescale_grad
    if wd:
        g += wd * w
    if optimizer.clip_gradient is not None:
        bound = float(_onp.float32(optimizer.clip_gradient))
        _onp.clip(g, -bound, bound, out=g)
    return g.astype(w.dtype, copy=False)


register = Optimizer.register
create = Optimizer.create_optimizer
