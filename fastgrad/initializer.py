"""Weight initializers (``mx.init``, also ``mx.initializer``), as in MXNet 1.9.1.

An initializer is called as ``init(desc, arr)``: ``desc`` is an :class:`InitDesc` (a ``str``,
the parameter's name, with ``attrs`` and ``global_init``) and ``arr`` is the array to fill,
**in place**. The name's suffix picks what is done (Note [Which rule fills a parameter]), so one
initializer serves a whole network: ``Xavier`` fills the ``...weight`` arrays, biases become 0,
BatchNorm's ``gamma`` 1 and ``beta`` 0.

>>> import fastgrad as mx
>>> w = mx.nd.zeros((4, 3))
>>> mx.init.Xavier()(mx.init.InitDesc('fc1_weight'), w)
>>> bool((abs(w.asnumpy()) <= (3.0 / 3.5) ** 0.5).all())
True

Random initializers draw from ``fastgrad.np.random``'s generator, so ``mx.random.seed(n)``
makes them repeatable. The distributions and their bounds are MXNet's; the streams are not
(an MXNet seed does not give MXNet's numbers).
"""

import json
import logging
import re
import warnings

import numpy as _onp

from fastgrad._core._array import ndarray as _array_type, unwrap
from fastgrad import ndarray as _nd
from fastgrad.numpy import random as _random
from fastgrad import registry

__all__ = ["InitDesc", "Initializer", "register", "alias", "create", "Load", "Mixed", "Zero",
           "One", "Constant", "Uniform", "Normal", "Orthogonal", "Xavier", "MSRAPrelu",
           "Bilinear", "LSTMBias", "FusedRNN"]


class InitDesc(str):
    """The name of the array to initialize, with what is known about it.

    Parameters
    ----------
    name : str
        The parameter's name; its suffix (``weight``, ``bias``, ...) selects the default rule.
    attrs : dict, optional
        Attributes of the variable. ``attrs['__init__']`` (an initializer, its registered
        name or its ``dumps()`` JSON) overrides the rule chosen by the name.
    global_init : Initializer, optional
        The initializer to fall back to (set to the called initializer when ``None``).
    """

    def __new__(cls, name, attrs=None, global_init=None):
        desc = super().__new__(cls, name)
        desc.attrs = attrs or {}
        desc.global_init = global_init
        return desc


def _fill(arr, value):
    """Write ``value`` (broadcast, cast to ``arr``'s dtype) into ``arr`` in place."""
    arr[...] = unwrap(value)


def _is_array(arr):
    return isinstance(arr, (_array_type, _onp.ndarray))


def _mean_square_root(arr):
    """MXNet's default verbose statistic: ``norm(x) / sqrt(size)``."""
    values = _onp.asarray(unwrap(arr), dtype=_onp.float64)
    return str(float(_onp.linalg.norm(values.ravel()) / _onp.sqrt(max(values.size, 1))))


def _uniform(arr, low, high):
    _fill(arr, _random.uniform(low, high, size=arr.shape, dtype=_onp.float64))


def _normal(arr, loc, scale):
    _fill(arr, _random.normal(loc, scale, size=arr.shape, dtype=_onp.float64))


# Note [Which rule fills a parameter]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Initializer.__call__(desc, arr) follows MXNet 1.9.1 exactly. If desc.attrs has '__init__'
# (Gluon's Parameter.initialize always sets it: the parameter's own init, else the default),
# that initializer's _init_weight fills the array whatever the name. Otherwise the name's
# suffix picks the rule, in this order: weight, bias (0), gamma (1), beta (0), min (0), max (1),
# weight_quantize, bias_quantize; any other name raises ValueError. Called with a plain str
# instead of an InitDesc (the deprecated form), the older table applies, which also knows
# upsampling* (bilinear), stn_loc*, moving_mean/moving_inv_var/moving_avg (0) and moving_var (1).
_DESC_RULES = (("weight", "_init_weight"), ("bias", "_init_bias"), ("gamma", "_init_gamma"),
               ("beta", "_init_beta"), ("min", "_init_zero"), ("max", "_init_one"),
               ("weight_quantize", "_init_quantized_weight"),
               ("bias_quantize", "_init_quantized_bias"))
_LEGACY_SUFFIX_RULES = (("bias", "_init_bias"), ("gamma", "_init_gamma"),
                        ("beta", "_init_beta"), ("weight", "_init_weight"),
                        ("moving_mean", "_init_zero"), ("moving_var", "_init_one"),
                        ("moving_inv_var", "_init_zero"), ("moving_avg", "_init_zero"),
                        ("min", "_init_zero"), ("max", "_init_one"))


class Initializer:
    """The base class of initializers: subclass it and define ``_init_weight(name, arr)``
    (and ``_init_bias`` etc. to change those defaults); register it with :func:`register`
    to create it by name.

    ``Initializer(**kwargs)`` keeps ``kwargs`` for :meth:`dumps` and for equality: two
    initializers are equal when they have the same class and arguments.
    """

    def __init__(self, **kwargs):
        self._kwargs = kwargs
        self._verbose = False
        self._print_func = None

    def set_verbosity(self, verbose=False, print_func=None):
        """Log (``logging.info``) each array it initializes with a statistic of it:
        ``print_func(arr)`` (a string), by default ``norm(arr) / sqrt(arr.size)``.
        Returns the initializer."""
        self._verbose = verbose
        self._print_func = _mean_square_root if print_func is None else print_func
        return self

    def _verbose_print(self, desc, init, arr):
        if self._verbose and self._print_func:
            logging.info("Initialized %s as %s: %s", desc, init, self._print_func(arr))

    def dumps(self):
        """The initializer as JSON, ``'["name", {arguments}]'``, which :func:`create` reads.

        >>> import fastgrad as mx
        >>> mx.init.Normal(0.5).dumps()
        '["normal", {"sigma": 0.5}]'
        """
        return json.dumps([self.__class__.__name__.lower(), self._kwargs])

    def __call__(self, desc, arr):
        """Fill ``arr`` in place as the name ``desc`` asks (Note [Which rule fills a
        parameter])."""
        if not isinstance(desc, InitDesc):
            self._legacy_init(desc, arr)
            return
        if desc.global_init is None:
            desc.global_init = self
        override = desc.attrs.get("__init__", "")
        if override:
            create(override)._init_weight(desc, arr)
            self._verbose_print(desc, override, arr)
            return
        for suffix, rule in _DESC_RULES:
            if desc.endswith(suffix):
                getattr(self, rule)(desc, arr)
                self._verbose_print(desc, suffix, arr)
                return
        self._init_default(desc, arr)

    def _legacy_init(self, name, arr):
        warnings.warn("Calling initializer with init(str, NDArray) has been deprecated."
                      "please use init(mx.init.InitDesc(...), NDArray) instead.",
                      DeprecationWarning, stacklevel=3)
        if not isinstance(name, str):
            raise TypeError("name must be string")
        if not _is_array(arr):
            raise TypeError("arr must be NDArray")
        if name.startswith("upsampling"):
            self._init_bilinear(name, arr)
        elif name.startswith("stn_loc") and name.endswith("weight"):
            self._init_zero(name, arr)
        elif name.startswith("stn_loc") and name.endswith("bias"):
            self._init_loc_bias(name, arr)
        else:
            for suffix, rule in _LEGACY_SUFFIX_RULES:
                if name.endswith(suffix):
                    getattr(self, rule)(name, arr)
                    return
            self._init_default(name, arr)

    def _init_bilinear(self, _, arr):
        _fill(arr, _bilinear_kernel(arr.shape))

    def _init_loc_bias(self, name, arr):
        if arr.shape[0] != 6:
            raise ValueError("Initializer: %s (a spatial transformer's localisation bias) must "
                             "have 6 elements, not shape %s" % (name, arr.shape))
        _fill(arr, _onp.array([1.0, 0, 0, 0, 1.0, 0]))

    def _init_zero(self, _, arr):
        _fill(arr, 0.0)

    def _init_one(self, _, arr):
        _fill(arr, 1.0)

    def _init_bias(self, _, arr):
        _fill(arr, 0.0)

    def _init_quantized_bias(self, _, arr):
        _fill(arr, 0)

    def _init_gamma(self, _, arr):
        _fill(arr, 1.0)

    def _init_beta(self, _, arr):
        _fill(arr, 0.0)

    def _init_weight(self, name, arr):
        """Fill a weight: every initializer defines it."""
        raise NotImplementedError("Must override it")

    def _init_quantized_weight(self, _, arr):
        # MXNet draws a single integer in [-127, 127) and writes it everywhere.
        _fill(arr, _onp.int8(int(_random.randint(-127, 127))))

    def _init_default(self, name, _):
        raise ValueError(
            "Unknown initialization pattern for %s. Default initialization is now limited to "
            '"weight", "bias", "gamma" (1.0), and "beta" (0.0).Please use '
            "mx.sym.Variable(init=mx.init.*) to set initialization pattern" % name)

    def __eq__(self, other):
        if not isinstance(other, Initializer):
            return NotImplemented
        return type(self) is type(other) and self._kwargs == other._kwargs

    __hash__ = None     # equal when their arguments are: not hashable, as in MXNet

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__,
                           ", ".join("%s=%r" % item for item in self._kwargs.items()))


_register = registry.get_register_func(Initializer, "initializer")
alias = registry.get_alias_func(Initializer, "initializer")
create = registry.get_create_func(Initializer, "initializer")


def register(klass):
    """Register an :class:`Initializer` subclass under its lower-cased class name, so that
    ``mx.init.create(name)`` and ``init='name'`` arguments find it. Returns the class (use it
    as a decorator; combine with ``@mx.init.alias('other_name')`` for more names).

    >>> import fastgrad as mx
    >>> @mx.init.register
    ... class Halves(mx.init.Initializer):
    ...     def _init_weight(self, _, arr):
    ...         arr[:] = 0.5
    >>> w = mx.nd.zeros((2,))
    >>> mx.init.create('halves')(mx.init.InitDesc('w_weight'), w)
    >>> w.asnumpy().tolist()
    [0.5, 0.5]
    """
    return _register(klass)


class Load:
    """Initialize from saved arrays: a ``.params`` file name or a ``{name: array}`` dict
    (an ``arg:``/``aux:`` prefix of a key is dropped). Names not found go to
    ``default_init``; with no default they raise."""

    def __init__(self, param, default_init=None, verbose=False):
        if isinstance(param, str):
            param = _nd.load(param)
        if not isinstance(param, dict):
            raise TypeError("Load: param must be a file name or a dict of arrays, not %s"
                            % type(param).__name__)
        self.param = {}
        for name, arr in param.items():
            key = name[4:] if name.startswith(("arg:", "aux:")) else name
            self.param[key] = arr
        self.default_init = default_init
        self.verbose = verbose

    def __call__(self, name, arr):
        if name in self.param:
            saved = self.param[name]
            if tuple(arr.shape) != tuple(saved.shape):
                raise ValueError("Parameter %s cannot be initialized from loading. Shape "
                                 "mismatch, target %s vs loaded %s"
                                 % (name, tuple(arr.shape), tuple(saved.shape)))
            _fill(arr, saved)
            if self.verbose:
                logging.info("Initialized %s by loading", name)
            return
        if self.default_init is None:
            raise ValueError("Cannot Initialize %s. Not found in loaded param and no default "
                             "Initializer is provided." % name)
        self.default_init(name, arr)
        if self.verbose:
            logging.info("Initialized %s by default", name)


class Mixed:
    """Initialize each array with the first initializer whose pattern (a regular expression,
    matched at the start of the name) matches its name.

    >>> import fastgrad as mx
    >>> init = mx.init.Mixed(['bias', '.*'], [mx.init.Zero(), mx.init.Uniform(0.1)])
    """

    def __init__(self, patterns, initializers):
        if len(patterns) != len(initializers):
            raise ValueError("Mixed: %d patterns but %d initializers"
                             % (len(patterns), len(initializers)))
        self.map = list(zip([re.compile(p) for p in patterns], initializers))

    def __call__(self, name, arr):
        for pattern, init in self.map:
            if pattern.match(name):
                init(name, arr)
                return
        raise ValueError('Parameter name %s did not match any pattern. Consider adding a ".*" '
                         "pattern at the end with a default Initializer." % name)


@register
@alias("zeros")
class Zero(Initializer):
    """Fill weights with 0 (also ``'zeros'``)."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        _fill(arr, 0)


@register
@alias("ones")
class One(Initializer):
    """Fill weights with 1 (also ``'ones'``)."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        _fill(arr, 1)


@register
class Constant(Initializer):
    """Fill weights with ``value``: a scalar, or an array broadcast to the weight's shape."""

    def __init__(self, value):
        super().__init__(value=value)
        self.value = value

    def _init_weight(self, _, arr):
        _fill(arr, self.value)

    def dumps(self):
        value = self._kwargs["value"]
        if not _onp.isscalar(value):
            self._kwargs["value"] = _onp.asarray(unwrap(value)).tolist()
        return super().dumps()


@register
class Uniform(Initializer):
    """Weights drawn uniformly from ``[-scale, scale)`` (Gluon's default, scale 0.07)."""

    def __init__(self, scale=0.07):
        super().__init__(scale=scale)
        self.scale = scale

    def _init_weight(self, _, arr):
        _uniform(arr, -self.scale, self.scale)


@register
class Normal(Initializer):
    """Weights drawn from a normal distribution of mean 0 and standard deviation ``sigma``."""

    def __init__(self, sigma=0.01):
        super().__init__(sigma=sigma)
        self.sigma = sigma

    def _init_weight(self, _, arr):
        _normal(arr, 0, self.sigma)


@register
class Orthogonal(Initializer):
    """``scale`` times an orthogonal matrix (Saxe et al., 2013), reshaped to the weight.

    A random ``(shape[0], prod(shape[1:]))`` matrix (``rand_type`` ``'uniform'`` on [-1, 1)
    or ``'normal'``) is decomposed by SVD; its orthonormal factor of the same shape is used,
    so the rows (or, for a tall weight, the columns) are orthonormal before scaling.
    """

    def __init__(self, scale=1.414, rand_type="uniform"):
        super().__init__(scale=scale, rand_type=rand_type)
        self.scale = scale
        self.rand_type = rand_type

    def _init_weight(self, name, arr):
        rows = arr.shape[0]
        cols = int(_onp.prod(arr.shape[1:]))
        if self.rand_type == "uniform":
            draw = unwrap(_random.uniform(-1.0, 1.0, size=(rows, cols), dtype=_onp.float32))
        elif self.rand_type == "normal":
            draw = unwrap(_random.normal(0.0, 1.0, size=(rows, cols), dtype=_onp.float32))
        else:
            raise ValueError("Orthogonal: rand_type must be 'uniform' or 'normal', not %r"
                             % (self.rand_type,))
        u, _, v = _onp.linalg.svd(draw, full_matrices=False)
        factor = u if u.shape == draw.shape else v
        _fill(arr, self.scale * factor.reshape(arr.shape))


def _fans(shape):
    """``(fan_in, fan_out)`` of a weight as MXNet's Xavier counts them: ``shape[1]`` and
    ``shape[0]``, each times the product of the remaining (kernel) dimensions."""
    kernel = float(_onp.prod(shape[2:])) if len(shape) > 2 else 1.0
    return shape[1] * kernel, shape[0] * kernel


@register
class Xavier(Initializer):
    """Xavier/Glorot initialization: keeps the scale of activations and gradients similar
    across layers.

    With ``factor`` = ``(fan_in + fan_out) / 2`` (``factor_type='avg'``), ``fan_in`` (``'in'``)
    or ``fan_out`` (``'out'``), and ``c = sqrt(magnitude / factor)``, weights are uniform on
    ``[-c, c)`` (``rnd_type='uniform'``) or normal with standard deviation ``c``
    (``'gaussian'``). For a weight of shape ``(out, in, k1, k2, ...)``, ``fan_in = in * k1 * k2
    ...`` and ``fan_out = out * k1 * k2 ...``. Weights need at least two dimensions.
    """

    def __init__(self, rnd_type="uniform", factor_type="avg", magnitude=3):
        super().__init__(rnd_type=rnd_type, factor_type=factor_type, magnitude=magnitude)
        self.rnd_type = rnd_type
        self.factor_type = factor_type
        self.magnitude = float(magnitude)

    def _scale(self, name, shape):
        if len(shape) < 2:
            raise ValueError("Xavier initializer cannot be applied to vector %s. It requires at"
                             " least 2D." % name)
        fan_in, fan_out = _fans(shape)
        factors = {"avg": (fan_in + fan_out) / 2.0, "in": fan_in, "out": fan_out}
        if self.factor_type not in factors:
            raise ValueError("Incorrect factor type %r for %s: 'avg', 'in' or 'out'"
                             % (self.factor_type, name))
        return _onp.sqrt(self.magnitude / factors[self.factor_type])

    def _init_weight(self, name, arr):
        scale = self._scale(name, arr.shape)
        if self.rnd_type == "uniform":
            _uniform(arr, -scale, scale)
        elif self.rnd_type == "gaussian":
            _normal(arr, 0, scale)
        else:
            raise ValueError("Unknown random type %r for %s: 'uniform' or 'gaussian'"
                             % (self.rnd_type, name))


@register
class MSRAPrelu(Xavier):
    """He/MSRA initialization for (P)ReLU networks (He et al., 2015): :class:`Xavier` with
    normal draws and ``magnitude = 2 / (1 + slope**2)``."""

    def __init__(self, factor_type="avg", slope=0.25):
        super().__init__("gaussian", factor_type, 2.0 / (1 + slope ** 2))
        self._kwargs = {"factor_type": factor_type, "slope": slope}


def _bilinear_kernel(shape):
    """MXNet's bilinear upsampling kernel over the last two axes of a 4-D ``shape``,
    the same for every leading index (float32)."""
    if len(shape) != 4:
        raise ValueError("Bilinear initializer needs a 4-D weight (as for a 2-D "
                         "deconvolution), not shape %s" % (tuple(shape),))
    f = _onp.ceil(shape[3] / 2.0)
    c = (2 * f - 1 - f % 2) / (2.0 * f)
    x = _onp.arange(shape[3]) / f - c
    y = _onp.arange(shape[2]) / f - c
    plane = (1 - _onp.abs(y))[:, None] * (1 - _onp.abs(x))[None, :]
    return _onp.broadcast_to(plane.astype(_onp.float32), shape)


@register
class Bilinear(Initializer):
    """Bilinear interpolation weights for upsampling layers (4-D weights)."""

    def __init__(self):
        super().__init__()

    def _init_weight(self, _, arr):
        _fill(arr, _bilinear_kernel(arr.shape))


@register
class LSTMBias(Initializer):
    """An LSTM bias of ``4 * hidden`` entries: 0 everywhere but the forget gate (the second
    quarter, gates ordered input, forget, cell, output), which gets ``forget_bias``."""

    def __init__(self, forget_bias=1.0):
        super().__init__(forget_bias=forget_bias)
        self.forget_bias = forget_bias

    def _init_weight(self, name, arr):
        _fill(arr, 0.0)
        hidden = int(arr.shape[0] / 4)
        arr[hidden:2 * hidden] = self.forget_bias


@register
class FusedRNN(Initializer):
    """MXNet's initializer for the packed weights of the legacy ``mx.rnn.FusedRNNCell``.

    fastgrad has no ``FusedRNNCell``; creating this raises ``NotImplementedError``. Gluon's
    ``rnn.RNN``/``LSTM``/``GRU`` layers keep one parameter per gate matrix and take ordinary
    initializers (``i2h_weight_initializer`` etc.).
    """

    def __init__(self, init, num_hidden, num_layers, mode, bidirectional=False,
                 forget_bias=1.0):
        raise NotImplementedError(
            "mx.init.FusedRNN initializes the packed weights of mx.rnn.FusedRNNCell, which "
            "fastgrad does not have: use gluon.rnn.RNN/LSTM/GRU, whose per-gate parameters "
            "take ordinary initializers (e.g. i2h_weight_initializer=mx.init.Xavier())")
