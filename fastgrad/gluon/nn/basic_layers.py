"""Gluon's basic layers (MXNet 1.9.1's ``gluon.nn.basic_layers``): containers, ``Dense``,
``Dropout``, the normalizations, ``Embedding``, ``Flatten``, ``Lambda``/``HybridLambda``,
``Identity`` and ``Concatenate``.

The layers have MXNet 1.9.1's constructor arguments, defaults, parameter names
(``dense0_weight``, ``batchnorm0_running_mean``) and ``__repr__`` strings, and compute with
MXNet 1.x's operators through ``F`` (``mx.nd`` imperatively, ``mx.sym`` when traced).

Note [Deferred input dimensions]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A layer created without its input size (``Dense(10)``: ``in_units=0``; ``BatchNorm()``:
``in_channels=0``) has parameters with an unknown dimension ``0``. Before the first forward
pass ``HybridBlock`` calls the layer's ``infer_shape(x)``, which sets the full shapes from the
input, and the parameters are then initialised. Afterwards an input whose size disagrees with
the parameters raises a ``ValueError`` naming the layer, the argument and both sizes, checked
before any arithmetic (MXNet reports it from deep inside its shape inference).
"""

import warnings

import numpy as _onp

from fastgrad import ndarray as _nd
from fastgrad import symbol as _sym
from fastgrad.base import MXNetValueError
from fastgrad.gluon.block import Block, HybridBlock
from fastgrad.gluon.parameter import _indent
from fastgrad.gluon.nn.activations import Activation

__all__ = ["Sequential", "HybridSequential", "Dense", "Dropout", "Embedding", "BatchNorm",
           "BatchNormReLU", "InstanceNorm", "LayerNorm", "GroupNorm", "Flatten", "Lambda",
           "HybridLambda", "Identity", "Concatenate", "HybridConcatenate"]


def _is_symbol(x):
    return isinstance(x, _sym.Symbol)


def check_input_size(block, argument, got, expected, what):
    """Raise a ``ValueError`` (also an ``MXNetError``, what MXNet raises) naming ``block`` if
    the input's ``what`` (``got``) differs from the size its parameters were made for (Note
    [Deferred input dimensions])."""
    if expected and got != expected:
        raise MXNetValueError("%s '%s': the input has %s %d, but the layer's parameters were made "
                         "for %s=%d" % (type(block).__name__, block.name, what, got, argument,
                                        expected))


def _children_repr(block):
    lines = ["  ({key}): {block}".format(key=key, block=_indent(repr(child), 2))
             for key, child in block._children.items()]
    return "%s(\n%s\n)" % (block.__class__.__name__, "\n".join(lines))


class _Stack:
    """What ``Sequential`` and ``HybridSequential`` share: ``add``, indexing and slicing
    (a slice is a new container of the same type holding the same blocks), ``len``, repr."""

    def _chain_children(self, x, *args):
        """The children applied in order, each to the previous one's output: a tuple or list
        output passes its first item as ``x`` and the rest as extra arguments (the first
        child gets ``args``); extra outputs of the last child are returned after ``x``."""
        for block in self._children.values():
            x = block(x, *args)
            args = []
            if isinstance(x, (tuple, list)):
                args = x[1:]
                x = x[0]
        if args:
            x = tuple([x] + list(args))
        return x

    def add(self, *blocks):
        """Add blocks on top of the stack."""
        for block in blocks:
            self.register_child(block)

    def __getitem__(self, key):
        layers = list(self._children.values())[key]
        if isinstance(layers, list):
            net = type(self)(prefix=self._prefix)
            with net.name_scope():
                net.add(*layers)
            return net
        return layers

    def __len__(self):
        return len(self._children)

    def __repr__(self):
        return _children_repr(self)

    def _is_container(self):
        return True


class Sequential(_Stack, Block):
    """Stacks Blocks sequentially: each block's output is the next one's input.

    Examples
    --------
    >>> from fastgrad.gluon import nn
    >>> net = nn.Sequential()
    >>> with net.name_scope():
    ...     net.add(nn.Dense(10, activation='relu'), nn.Dense(20))
    >>> len(net)
    2
    """

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)

    def forward(self, x, *args):
        return self._chain_children(x, *args)

    def hybridize(self, active=True, **kwargs):
        """Hybridize the children that are HybridBlocks (warning that a HybridSequential
        would be faster when all of them are, as MXNet does)."""
        if self._children and all(isinstance(c, HybridBlock) for c in self._children.values()):
            warnings.warn("All children of this Sequential layer '%s' are HybridBlocks. "
                          "Consider using HybridSequential for the best performance."
                          % self.prefix, stacklevel=2)
        super().hybridize(active, **kwargs)


class HybridSequential(_Stack, HybridBlock):
    """Stacks HybridBlocks sequentially; ``hybridize()`` traces the whole stack at once.

    Examples
    --------
    >>> import fastgrad as mx
    >>> from fastgrad.gluon import nn
    >>> net = nn.HybridSequential()
    >>> net.add(nn.Dense(3, activation='tanh'), nn.Dense(1))
    >>> net.initialize()
    >>> net(mx.nd.ones((2, 5))).shape
    (2, 1)
    """

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)

    def hybrid_forward(self, F, x, *args):
        return self._chain_children(x, *args)


def _optional_bias(params, use_bias, size, init, **kwargs):
    """A layer's ``bias`` Parameter of shape ``(size,)`` (deferred init) from ``params``, or
    ``None`` without ``use_bias``; ``kwargs`` go to ``params.get`` (``dtype``)."""
    if not use_bias:
        return None
    return params.get("bias", shape=(size,), init=init, allow_deferred_init=True, **kwargs)


def _optional_activation(activation):
    """The ``Activation`` block a layer applies to its output (prefix ``<activation>_``), or
    ``None`` when ``activation`` is ``None``. Call it in the layer's name scope."""
    if activation is None:
        return None
    return Activation(activation, prefix=activation + "_")


class Dense(HybridBlock):
    """A densely-connected layer: ``activation(dot(x, weight.T) + bias)``.

    Parameters
    ----------
    units : int
        The output size.
    activation : str, optional
        An ``Activation`` applied to the output (none by default).
    use_bias : bool, default True
    flatten : bool, default True
        Collapse every axis of the input but the first; with ``False`` the layer acts on the
        last axis and keeps the others.
    dtype : str or numpy.dtype, default 'float32'
    weight_initializer, bias_initializer : str or Initializer
        The bias defaults to zeros, the weight to the ``initialize()`` call's initializer.
    in_units : int, optional
        The input size; ``0`` (the default) defers it to the first forward pass (Note
        [Deferred input dimensions]).

    Notes
    -----
    Parameters are ``<prefix>weight`` of shape ``(units, in_units)`` and ``<prefix>bias`` of
    shape ``(units,)``.

    Examples
    --------
    >>> import fastgrad as mx
    >>> from fastgrad.gluon import nn
    >>> layer = nn.Dense(2, in_units=3)
    >>> layer.initialize(mx.init.One())
    >>> layer(mx.nd.ones((1, 3)))
    <BLANKLINE>
    [[3. 3.]]
    <NDArray 1x2 @cpu(0)>
    """

    def __init__(self, units, activation=None, use_bias=True, flatten=True, dtype="float32",
                 weight_initializer=None, bias_initializer="zeros", in_units=0, **kwargs):
        super().__init__(**kwargs)
        self._flatten = flatten
        with self.name_scope():
            self._units = units
            self._in_units = in_units
            self.weight = self.params.get("weight", shape=(units, in_units),
                                          init=weight_initializer, dtype=dtype,
                                          allow_deferred_init=True)
            self.bias = _optional_bias(self.params, use_bias, units, bias_initializer,
                                       dtype=dtype)
            self.act = _optional_activation(activation)

    def _input_units(self, shape):
        if not self._flatten:
            return shape[-1]
        units = 1
        for d in shape[1:]:
            units *= d
        return units

    def infer_shape(self, x, *args):
        self.weight.shape = (self._units, self._input_units(x.shape))

    def hybrid_forward(self, F, x, weight, bias=None):
        if not _is_symbol(x):
            units = self._input_units(x.shape)
            if units != weight.shape[1]:
                check_input_size(self, "in_units", units, weight.shape[1],
                                 "flattened size" if self._flatten else "last axis")
        inputs = (x, weight) if bias is None else (x, weight, bias)
        out = F.FullyConnected(*inputs, no_bias=bias is None, num_hidden=self._units,
                               flatten=self._flatten, name="fwd")
        if self.act is not None:
            out = self.act(out)
        return out

    def __repr__(self):
        shape = self.weight.shape
        return "{name}({layout}, {act})".format(
            name=self.__class__.__name__, act=self.act if self.act else "linear",
            layout="{0} -> {1}".format(shape[1] if shape[1] else None, shape[0]))


class Dropout(HybridBlock):
    """Sets a fraction ``rate`` of the input to zero in training (``autograd.record()``), and
    scales the rest by ``1 / (1 - rate)``; the identity in predict mode. ``axes`` shares the
    mask along those axes."""

    def __init__(self, rate, axes=(), **kwargs):
        super().__init__(**kwargs)
        self._rate = rate
        self._axes = axes

    def hybrid_forward(self, F, x):
        if self._rate > 0:
            return F.Dropout(x, p=self._rate, axes=self._axes, name="fwd", cudnn_off=False)
        return F.identity(x)

    def __repr__(self):
        return "{name}(p = {_rate}, axes={_axes})".format(name=self.__class__.__name__,
                                                          **self.__dict__)


def _kwargs_repr(kwargs):
    return ", ".join("=".join([k, repr(v)]) for k, v in kwargs.items())


def _gamma_beta(params, size, scale, center, gamma_initializer, beta_initializer):
    """A normalization layer's ``gamma`` and ``beta`` Parameters of shape ``(size,)``
    (deferred init), each trained only when ``scale`` / ``center`` is set."""
    gamma = params.get("gamma", grad_req="write" if scale else "null", shape=(size,),
                       init=gamma_initializer, allow_deferred_init=True)
    beta = params.get("beta", grad_req="write" if center else "null", shape=(size,),
                      init=beta_initializer, allow_deferred_init=True)
    return gamma, beta


class _BatchNorm(HybridBlock):
    """What ``BatchNorm`` and ``BatchNormReLU`` share (MXNet's private base class)."""

    def __init__(self, axis=1, momentum=0.9, epsilon=1e-5, center=True, scale=True,
                 use_global_stats=False, fuse_relu=False, beta_initializer="zeros",
                 gamma_initializer="ones", running_mean_initializer="zeros",
                 running_variance_initializer="ones", in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self._kwargs = {"axis": axis, "eps": epsilon, "momentum": momentum,
                        "fix_gamma": not scale, "use_global_stats": use_global_stats}
        self._axis = axis
        self.fuse_relu = fuse_relu
        if in_channels != 0:
            self.in_channels = in_channels
        self.gamma = self.params.get("gamma", grad_req="write" if scale else "null",
                                     shape=(in_channels,), init=gamma_initializer,
                                     allow_deferred_init=True, differentiable=scale)
        self.beta = self.params.get("beta", grad_req="write" if center else "null",
                                    shape=(in_channels,), init=beta_initializer,
                                    allow_deferred_init=True, differentiable=center)
        self.running_mean = self.params.get("running_mean", grad_req="null",
                                            shape=(in_channels,),
                                            init=running_mean_initializer,
                                            allow_deferred_init=True, differentiable=False)
        self.running_var = self.params.get("running_var", grad_req="null",
                                           shape=(in_channels,),
                                           init=running_variance_initializer,
                                           allow_deferred_init=True, differentiable=False)

    def cast(self, dtype):
        # As MXNet: batch statistics of float16 data are kept in float32.
        if _onp.dtype(dtype).name == "float16":
            dtype = "float32"
        super().cast(dtype)

    def infer_shape(self, x, *args):
        channels = x.shape[self._axis]
        for param in (self.gamma, self.beta, self.running_mean, self.running_var):
            param.shape = (channels,)

    def hybrid_forward(self, F, x, gamma, beta, running_mean, running_var):
        if not _is_symbol(x):
            axis = self._axis
            if not -len(x.shape) <= axis < len(x.shape):
                raise MXNetValueError("%s '%s': axis=%d is out of range for an input of shape %s"
                                 % (type(self).__name__, self.name, axis, x.shape))
            check_input_size(self, "in_channels", x.shape[axis], gamma.shape[0],
                             "channels (axis %d):" % axis)
        out = F.BatchNorm(x, gamma, beta, running_mean, running_var, name="fwd",
                          **self._kwargs)
        if self.fuse_relu:
            out = F.Activation(out, act_type="relu")
        return out

    def __repr__(self):
        in_channels = self.gamma.shape[0]
        return "{name}({content}, in_channels={ch})".format(
            name=self.__class__.__name__, content=_kwargs_repr(self._kwargs),
            ch=in_channels if in_channels else None)


class _BatchNormFixedFusion(_BatchNorm):
    """The public constructor of ``BatchNorm`` and ``BatchNormReLU``: ``fuse_relu`` is not an
    argument but the subclass's ``_fuse_relu``."""

    _fuse_relu = False

    def __init__(self, axis=1, momentum=0.9, epsilon=1e-5, center=True, scale=True,
                 use_global_stats=False, beta_initializer="zeros", gamma_initializer="ones",
                 running_mean_initializer="zeros", running_variance_initializer="ones",
                 in_channels=0, **kwargs):
        super().__init__(axis=axis, momentum=momentum, epsilon=epsilon, center=center,
                         scale=scale, use_global_stats=use_global_stats, fuse_relu=self._fuse_relu,
                         beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
                         running_mean_initializer=running_mean_initializer,
                         running_variance_initializer=running_variance_initializer,
                         in_channels=in_channels, **kwargs)


class BatchNorm(_BatchNormFixedFusion):
    """Batch normalization (Ioffe and Szegedy, 2014) over every axis but ``axis``.

    In training mode (inside ``autograd.record()``) the batch's mean and variance normalize
    the input and the moving statistics move towards them,
    ``running = momentum * running + (1 - momentum) * batch``; in predict mode, or with
    ``use_global_stats=True``, the moving statistics normalize and stay as they are.
    ``scale=False`` fixes ``gamma`` at one, ``center=False`` leaves ``beta`` untrained.

    Parameters are ``<prefix>gamma``, ``<prefix>beta``, ``<prefix>running_mean`` and
    ``<prefix>running_var``, all of shape ``(in_channels,)`` (deferred while
    ``in_channels=0``, Note [Deferred input dimensions]); the last two have
    ``grad_req='null'``.

    Examples
    --------
    >>> import fastgrad as mx
    >>> from fastgrad.gluon import nn
    >>> bn = nn.BatchNorm(in_channels=2)
    >>> bn.initialize()
    >>> with mx.autograd.record():
    ...     y = bn(mx.nd.array([[1.0, 2.0], [3.0, 6.0]]))
    >>> bn.running_mean.data()      # 0.1 * the batch mean, in float32 as MXNet computes it
    <BLANKLINE>
    [0.20000005 0.4000001 ]
    <NDArray 2 @cpu(0)>
    """

    _fuse_relu = False


class BatchNormReLU(_BatchNormFixedFusion):
    """``BatchNorm`` followed by a ReLU (MXNet's fused layer)."""

    _fuse_relu = True


class Embedding(HybridBlock):
    """Rows of a ``(input_dim, output_dim)`` weight at integer indices: an input of shape
    ``(x1, ..., xk)`` gives ``(x1, ..., xk, output_dim)``. Float indices are truncated and
    indices out of range clipped, as in MXNet.

    Examples
    --------
    >>> import fastgrad as mx
    >>> from fastgrad.gluon import nn
    >>> emb = nn.Embedding(10, 4)
    >>> emb.initialize()
    >>> emb(mx.nd.array([[1, 2, 3]])).shape
    (1, 3, 4)
    """

    def __init__(self, input_dim, output_dim, dtype="float32", weight_initializer=None,
                 sparse_grad=False, **kwargs):
        super().__init__(**kwargs)
        grad_stype = "row_sparse" if sparse_grad else "default"
        self._kwargs = {"input_dim": input_dim, "output_dim": output_dim, "dtype": dtype,
                        "sparse_grad": sparse_grad}
        self.weight = self.params.get("weight", shape=(input_dim, output_dim),
                                      init=weight_initializer, dtype=dtype,
                                      allow_deferred_init=True, grad_stype=grad_stype)

    def hybrid_forward(self, F, x, weight):
        return F.Embedding(x, weight, name="fwd", **self._kwargs)

    def __repr__(self):
        return "{block_name}({input_dim} -> {output_dim}, {dtype})".format(
            block_name=self.__class__.__name__, **self._kwargs)


class Flatten(HybridBlock):
    """Collapses every axis but the first: ``(N, x1, ..., xk)`` to ``(N, x1 * ... * xk)``."""

    def hybrid_forward(self, F, x):
        return F.flatten(x)

    def __repr__(self):
        return self.__class__.__name__


class _ChannelNorm(HybridBlock):
    """A normalization with ``gamma`` and ``beta`` of one value per channel on ``axis``
    (``LayerNorm``, ``InstanceNorm``)."""

    def __init__(self, axis, epsilon, center, scale, beta_initializer, gamma_initializer,
                 in_channels, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._kwargs = {"eps": epsilon, "axis": axis, "center": center, "scale": scale}
        self._axis = axis
        self._epsilon = epsilon
        self._center = center
        self._scale = scale
        self.gamma, self.beta = _gamma_beta(self.params, in_channels, scale, center,
                                            gamma_initializer, beta_initializer)

    def infer_shape(self, x, *args):
        self.gamma.shape = self.beta.shape = (x.shape[self._axis],)

    def _check(self, x, gamma):
        if not _is_symbol(x):
            if not -len(x.shape) <= self._axis < len(x.shape):
                raise MXNetValueError("%s '%s': axis=%d is out of range for an input of shape %s"
                                 % (type(self).__name__, self.name, self._axis, x.shape))
            check_input_size(self, "in_channels", x.shape[self._axis], gamma.shape[0],
                             "channels (axis %d):" % self._axis)

    def __repr__(self):
        return "{name}({content}, in_channels={ch})".format(
            name=self.__class__.__name__, content=_kwargs_repr(self._kwargs),
            ch=self.gamma.shape[0])


class InstanceNorm(_ChannelNorm):
    """Instance normalization (Ulyanov et al., 2016): each sample normalized over every axis
    but the first and ``axis``, then scaled by ``gamma`` (untrained unless ``scale=True``)
    and shifted by ``beta``. MXNet's operator adds ``epsilon`` to the variance."""

    def __init__(self, axis=1, epsilon=1e-5, center=True, scale=False,
                 beta_initializer="zeros", gamma_initializer="ones", in_channels=0, **kwargs):
        super().__init__(axis, epsilon, center, scale, beta_initializer, gamma_initializer,
                         in_channels, **kwargs)

    def hybrid_forward(self, F, x, gamma, beta):
        self._check(x, gamma)
        if self._axis == 1:
            return F.InstanceNorm(x, gamma, beta, name="fwd", eps=self._epsilon)
        x = F.swapaxes(x, 1, self._axis)
        return F.swapaxes(F.InstanceNorm(x, gamma, beta, name="fwd", eps=self._epsilon), 1,
                          self._axis)


class LayerNorm(_ChannelNorm):
    """Layer normalization (Ba et al., 2016) over ``axis`` (the last by default), then
    ``gamma`` and ``beta`` of one value per position on that axis."""

    def __init__(self, axis=-1, epsilon=1e-5, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones", in_channels=0,
                 prefix=None, params=None):
        super().__init__(axis, epsilon, center, scale, beta_initializer, gamma_initializer,
                         in_channels, prefix=prefix, params=params)

    def hybrid_forward(self, F, data, gamma, beta):
        self._check(data, gamma)
        return F.LayerNorm(data, gamma=gamma, beta=beta, axis=self._axis, eps=self._epsilon)


class GroupNorm(HybridBlock):
    """Group normalization (Wu and He, 2018) as MXNet 1.9.1 has it: the channels (axis 1)
    split into ``num_groups`` groups, each normalized over its channels and positions, then
    scaled and shifted by ``gamma`` and ``beta`` of one value per *group* (shape
    ``(num_groups,)``; MXNet 2 has one per channel)."""

    def __init__(self, num_groups=1, epsilon=1e-5, center=True, scale=True,
                 beta_initializer="zeros", gamma_initializer="ones", prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._kwargs = {"eps": epsilon, "num_groups": num_groups, "center": center,
                        "scale": scale}
        self._num_groups = num_groups
        self._epsilon = epsilon
        self._center = center
        self._scale = scale
        self.gamma, self.beta = _gamma_beta(self.params, num_groups, scale, center,
                                            gamma_initializer, beta_initializer)

    def hybrid_forward(self, F, data, gamma, beta):
        if not _is_symbol(data) and (len(data.shape) < 2
                                     or data.shape[1] % self._num_groups):
            raise MXNetValueError("GroupNorm '%s': an input of shape %s does not split its "
                                  "channels (axis 1) into num_groups=%d groups"
                             % (self.name, data.shape, self._num_groups))
        return F.GroupNorm(data, gamma=gamma, beta=beta, num_groups=self._num_groups,
                           eps=self._epsilon)

    def __repr__(self):
        return "{name}({content})".format(name=self.__class__.__name__,
                                          content=_kwargs_repr(self._kwargs))


def _function_name(function):
    return getattr(function, "__name__", type(function).__name__)


class Lambda(Block):
    """Wraps a function, or the name of an ``mx.nd`` operator, as a Block.

    Examples
    --------
    >>> import fastgrad as mx
    >>> from fastgrad.gluon import nn
    >>> nn.Lambda('tanh')(mx.nd.zeros(2))
    <BLANKLINE>
    [0. 0.]
    <NDArray 2 @cpu(0)>
    """

    def __init__(self, function, prefix=None):
        super().__init__(prefix=prefix)
        if isinstance(function, str):
            assert hasattr(_nd, function), "Function name %s is not found in ndarray." % function
            self._func_impl = getattr(_nd, function)
        elif callable(function):
            self._func_impl = function
        else:
            raise ValueError("Unrecognized function in lambda: {} of type {}"
                             .format(function, type(function)))

    def forward(self, *args):
        return self._func_impl(*args)

    def __repr__(self):
        return "{name}({function})".format(name=self.__class__.__name__,
                                           function=_function_name(self._func_impl))


class HybridLambda(HybridBlock):
    """Wraps ``function(F, x, *args)``, or the name of an operator both ``mx.nd`` and
    ``mx.sym`` have, as a HybridBlock."""

    def __init__(self, function, prefix=None):
        super().__init__(prefix=prefix)
        if isinstance(function, str):
            assert hasattr(_nd, function) and hasattr(_sym, function), \
                "Function name %s is not found in symbol/ndarray." % function
            by_namespace = {_sym: getattr(_sym, function), _nd: getattr(_nd, function)}
            self._func = lambda F, *args: by_namespace[F](*args)
            self._func_name = function
        elif callable(function):
            self._func = function
            self._func_name = _function_name(function)
        else:
            raise ValueError("Unrecognized function in lambda: {} of type {}"
                             .format(function, type(function)))

    def hybrid_forward(self, F, x, *args):
        return self._func(F, x, *args)

    def __repr__(self):
        return "{name}({function})".format(name=self.__class__.__name__,
                                           function=self._func_name)


class Identity(HybridBlock):
    """Returns its input (MXNet 2's ``nn.Identity``; 1.9.1 has it in ``contrib.nn``)."""

    def hybrid_forward(self, F, x):
        return x


class Concatenate(Sequential):
    """Runs every child on the same input and concatenates their outputs along ``axis``
    (MXNet 2's ``nn.Concatenate``; 1.9.1's ``contrib.nn.Concurrent``)."""

    def __init__(self, axis=-1, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self.axis = axis

    def forward(self, x):
        return _nd.concat(*[block(x) for block in self._children.values()], dim=self.axis)


class HybridConcatenate(HybridSequential):
    """``Concatenate`` for HybridBlocks (MXNet 2's ``nn.HybridConcatenate``; 1.9.1's
    ``contrib.nn.HybridConcurrent``)."""

    def __init__(self, axis=-1, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self.axis = axis

    def hybrid_forward(self, F, x):
        return F.concat(*[block(x) for block in self._children.values()], dim=self.axis)
