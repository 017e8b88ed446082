"""Gluon's convolution and pooling layers (MXNet 1.9.1's ``gluon.nn.conv_layers``).

``Conv1D/2D/3D`` compute with ``F.Convolution``, the transposed ones with
``F.Deconvolution``, the pooling layers with ``F.Pooling`` and ``ReflectionPad2D`` with
``F.pad``; 1-D and 3-D work like 2-D (Note [Convolution in other dimensions] in
``fastgrad/_api/_npx_composites.py``), in groups too. The channels-last layouts MXNet accepts
(``NHWC``, ...) take channels-last data and weights (Note [Channels-last layouts] in
``fastgrad/numpy_extension.py``).
"""

from numbers import Number

from fastgrad.base import MXNetValueError
from fastgrad.gluon.block import HybridBlock
from fastgrad.gluon.nn.basic_layers import (check_input_size, _is_symbol, _optional_activation,
                                            _optional_bias)

__all__ = ["Conv1D", "Conv2D", "Conv3D", "Conv1DTranspose", "Conv2DTranspose",
           "Conv3DTranspose", "MaxPool1D", "MaxPool2D", "MaxPool3D", "AvgPool1D", "AvgPool2D",
           "AvgPool3D", "GlobalMaxPool1D", "GlobalMaxPool2D", "GlobalMaxPool3D",
           "GlobalAvgPool1D", "GlobalAvgPool2D", "GlobalAvgPool3D", "ReflectionPad2D"]


def _tuple_of(value, n):
    return (value,) * n if isinstance(value, Number) else value


def _check_tuple(value, n, what):
    value = _tuple_of(value, n)
    assert len(value) == n, "%s must be a number or a list of %d ints" % (what, n)
    return value


class _Conv(HybridBlock):
    """A convolution (``op_name='Convolution'``) or transposed convolution
    (``'Deconvolution'``) of ``channels`` outputs: weight ``<prefix>weight`` of shape
    ``(channels, in_channels / groups, *kernel_size)`` for a convolution and
    ``(in_channels, channels / groups, *kernel_size)`` for a transposed one, bias
    ``<prefix>bias`` of shape ``(channels,)``; ``in_channels=0`` defers the input size to
    the first forward pass (Note [Deferred input dimensions] in ``basic_layers.py``)."""

    def __init__(self, channels, kernel_size, strides, padding, dilation, groups, layout,
                 in_channels=0, activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", op_name="Convolution", adj=None, prefix=None,
                 params=None):
        super().__init__(prefix=prefix, params=params)
        with self.name_scope():
            self._channels = channels
            self._in_channels = in_channels
            n = len(kernel_size)
            strides, padding, dilation = (_tuple_of(v, n) for v in (strides, padding, dilation))
            self._op_name = op_name
            self._kwargs = {"kernel": kernel_size, "stride": strides, "dilate": dilation,
                            "pad": padding, "num_filter": channels, "num_group": groups,
                            "no_bias": not use_bias, "layout": layout}
            if adj is not None:
                self._kwargs["adj"] = adj
            self.weight = self.params.get("weight", shape=self._weight_shape(in_channels),
                                          init=weight_initializer, allow_deferred_init=True)
            self.bias = _optional_bias(self.params, use_bias, channels, bias_initializer)
            self.act = _optional_activation(activation)

    def _transposed(self):
        return self._op_name == "Deconvolution"

    def _channels_last(self):
        return self._kwargs["layout"][-1] == "C"

    def _weight_shape(self, in_channels):
        # Channels-last layouts have channels-last weights, as in MXNet (Note [Channels-last
        # layouts] in numpy_extension.py).
        groups, kernel = self._kwargs["num_group"], tuple(self._kwargs["kernel"])
        if self._transposed():
            outer, inner = in_channels, self._channels // groups
        else:
            outer, inner = self._channels, in_channels // groups
        if self._channels_last():
            return (outer,) + kernel + (inner,)
        return (outer, inner) + kernel

    def _weight_in_channels(self, shape):
        if self._transposed():
            return shape[0]
        return (shape[-1] if self._channels_last() else shape[1]) * self._kwargs["num_group"]

    def infer_shape(self, x, *args):
        channels = x.shape[self._kwargs["layout"].find("C")]
        if channels % self._kwargs["num_group"]:
            raise MXNetValueError("%s '%s': %d input channels do not split into groups=%d"
                             % (type(self).__name__, self.name, channels,
                                self._kwargs["num_group"]))
        self.weight.shape = self._weight_shape(channels)

    def hybrid_forward(self, F, x, weight, bias=None):
        if not _is_symbol(x):
            dims = len(self._kwargs["kernel"]) + 2
            if len(x.shape) != dims:
                raise MXNetValueError("%s '%s': expects %d-D input (%s), got shape %s"
                                 % (type(self).__name__, self.name, dims,
                                    self._kwargs["layout"], x.shape))
            axis = self._kwargs["layout"].find("C")
            check_input_size(self, "in_channels", x.shape[axis],
                             self._weight_in_channels(weight.shape),
                             "channels (axis %d):" % axis)
        op = getattr(F, self._op_name)
        if bias is None:
            out = op(x, weight, name="fwd", **self._kwargs)
        else:
            out = op(x, weight, bias, name="fwd", **self._kwargs)
        if self.act is not None:
            out = self.act(out)
        return out

    def _alias(self):
        return "conv"

    def __repr__(self):
        # As MXNet 1.9.1 prints it: the mapping is weight.shape[1] -> weight.shape[0] for
        # transposed convolutions too, and output_padding is never shown (MXNet looks for an
        # attribute ``out_pad`` that its layers name ``outpad``).
        s = "{name}({mapping}, kernel_size={kernel}, stride={stride}"
        n = len(self._kwargs["kernel"])
        if self._kwargs["pad"] != (0,) * n:
            s += ", padding={pad}"
        if self._kwargs["dilate"] != (1,) * n:
            s += ", dilation={dilate}"
        if self._kwargs["num_group"] != 1:
            s += ", groups={num_group}"
        if self.bias is None:
            s += ", bias=False"
        if self.act:
            s += ", {}".format(self.act)
        s += ")"
        shape = self.weight.shape
        return s.format(name=self.__class__.__name__,
                        mapping="{0} -> {1}".format(shape[1] if shape[1] else None, shape[0]),
                        **self._kwargs)


class Conv1D(_Conv):
    """1-D convolution of ``(N, C, W)`` data (``layout='NCW'``).

    Examples
    --------
    >>> import fastgrad as mx
    >>> from fastgrad.gluon import nn
    >>> conv = nn.Conv1D(4, 3, padding=1)
    >>> conv.initialize()
    >>> conv(mx.nd.ones((2, 3, 10))).shape
    (2, 4, 10)
    """

    def __init__(self, channels, kernel_size, strides=1, padding=0, dilation=1, groups=1,
                 layout="NCW", activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", in_channels=0, **kwargs):
        assert layout == "NCW", "Only supports 'NCW' layout for now"
        kernel_size = _check_tuple(kernel_size, 1, "kernel_size")
        op_name = kwargs.pop("op_name", "Convolution")
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, op_name, **kwargs)


class Conv2D(_Conv):
    """2-D convolution of ``(N, C, H, W)`` data.

    Examples
    --------
    >>> import fastgrad as mx
    >>> from fastgrad.gluon import nn
    >>> conv = nn.Conv2D(8, 3, strides=2, padding=1)
    >>> conv.initialize()
    >>> conv(mx.nd.ones((1, 3, 8, 8))).shape
    (1, 8, 4, 4)
    """

    def __init__(self, channels, kernel_size, strides=(1, 1), padding=(0, 0),
                 dilation=(1, 1), groups=1, layout="NCHW", activation=None, use_bias=True,
                 weight_initializer=None, bias_initializer="zeros", in_channels=0, **kwargs):
        assert layout in ("NCHW", "NHWC"), "Only supports 'NCHW' and 'NHWC' layout for now"
        kernel_size = _check_tuple(kernel_size, 2, "kernel_size")
        op_name = kwargs.pop("op_name", "Convolution")
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, op_name, **kwargs)


class Conv3D(_Conv):
    """3-D convolution of ``(N, C, D, H, W)`` data."""

    def __init__(self, channels, kernel_size, strides=(1, 1, 1), padding=(0, 0, 0),
                 dilation=(1, 1, 1), groups=1, layout="NCDHW", activation=None,
                 use_bias=True, weight_initializer=None, bias_initializer="zeros",
                 in_channels=0, **kwargs):
        assert layout in ("NCDHW", "NDHWC"), "Only supports 'NCDHW' and 'NDHWC' layout for now"
        kernel_size = _check_tuple(kernel_size, 3, "kernel_size")
        op_name = kwargs.pop("op_name", "Convolution")
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, op_name, **kwargs)


class _ConvTranspose(_Conv):
    """A transposed convolution in ``n`` dimensions (``output_padding`` is the ``adj`` of
    ``F.Deconvolution``: extra output positions at the end of each axis)."""

    def __init__(self, n, channels, kernel_size, strides, padding, output_padding, dilation,
                 groups, layout, activation, use_bias, weight_initializer, bias_initializer,
                 in_channels, **kwargs):
        kernel_size = _check_tuple(kernel_size, n, "kernel_size")
        output_padding = _check_tuple(output_padding, n, "output_padding")
        op_name = kwargs.pop("op_name", "Deconvolution")
        super().__init__(channels, kernel_size, strides, padding, dilation, groups, layout,
                         in_channels, activation, use_bias, weight_initializer,
                         bias_initializer, op_name=op_name, adj=output_padding, **kwargs)
        self.outpad = output_padding


class Conv1DTranspose(_ConvTranspose):
    """1-D transposed convolution (``NCW``), the adjoint of ``Conv1D``."""

    def __init__(self, channels, kernel_size, strides=1, padding=0, output_padding=0,
                 dilation=1, groups=1, layout="NCW", activation=None, use_bias=True,
                 weight_initializer=None, bias_initializer="zeros", in_channels=0, **kwargs):
        assert layout == "NCW", "Only supports 'NCW' layout for now"
        super().__init__(1, channels, kernel_size, strides, padding, output_padding, dilation,
                         groups, layout, activation, use_bias, weight_initializer,
                         bias_initializer, in_channels, **kwargs)


class Conv2DTranspose(_ConvTranspose):
    """2-D transposed convolution (``NCHW``), the adjoint of ``Conv2D``.

    Examples
    --------
    >>> import fastgrad as mx
    >>> from fastgrad.gluon import nn
    >>> up = nn.Conv2DTranspose(2, 4, strides=2, padding=1)
    >>> up.initialize()
    >>> up(mx.nd.ones((1, 3, 5, 5))).shape
    (1, 2, 10, 10)
    """

    def __init__(self, channels, kernel_size, strides=(1, 1), padding=(0, 0),
                 output_padding=(0, 0), dilation=(1, 1), groups=1, layout="NCHW",
                 activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", in_channels=0, **kwargs):
        assert layout in ("NCHW", "NHWC"), "Only supports 'NCHW' and 'NHWC' layout for now"
        super().__init__(2, channels, kernel_size, strides, padding, output_padding, dilation,
                         groups, layout, activation, use_bias, weight_initializer,
                         bias_initializer, in_channels, **kwargs)


class Conv3DTranspose(_ConvTranspose):
    """3-D transposed convolution (``NCDHW``), the adjoint of ``Conv3D``."""

    def __init__(self, channels, kernel_size, strides=(1, 1, 1), padding=(0, 0, 0),
                 output_padding=(0, 0, 0), dilation=(1, 1, 1), groups=1, layout="NCDHW",
                 activation=None, use_bias=True, weight_initializer=None,
                 bias_initializer="zeros", in_channels=0, **kwargs):
        assert layout in ("NCDHW", "NDHWC"), "Only supports 'NCDHW' and 'NDHWC' layout for now"
        super().__init__(3, channels, kernel_size, strides, padding, output_padding, dilation,
                         groups, layout, activation, use_bias, weight_initializer,
                         bias_initializer, in_channels, **kwargs)


class _Pooling(HybridBlock):
    """Max or average pooling; ``strides`` default to ``pool_size``, ``ceil_mode=True`` is
    MXNet's ``pooling_convention='full'`` (Note [Pooling windows] in ``_npx_composites.py``)."""

    def __init__(self, pool_size, strides, padding, ceil_mode, global_pool, pool_type, layout,
                 count_include_pad=None, **kwargs):
        super().__init__(**kwargs)
        if strides is None:
            strides = pool_size
        strides = _tuple_of(strides, len(pool_size))
        padding = _tuple_of(padding, len(pool_size))
        self._kwargs = {"kernel": pool_size, "stride": strides, "pad": padding,
                        "global_pool": global_pool, "pool_type": pool_type, "layout": layout,
                        "pooling_convention": "full" if ceil_mode else "valid"}
        if count_include_pad is not None:
            self._kwargs["count_include_pad"] = count_include_pad

    def _alias(self):
        return "pool"

    def hybrid_forward(self, F, x):
        if not _is_symbol(x) and len(x.shape) != len(self._kwargs["kernel"]) + 2:
            raise MXNetValueError("%s '%s': expects %d-D input (%s), got shape %s"
                             % (type(self).__name__, self.name, len(self._kwargs["kernel"]) + 2,
                                self._kwargs["layout"], x.shape))
        return F.Pooling(x, name="fwd", **self._kwargs)

    def __repr__(self):
        s = "{name}(size={kernel}, stride={stride}, padding={pad}, ceil_mode={ceil_mode}"
        s += ", global_pool={global_pool}, pool_type={pool_type}, layout={layout})"
        return s.format(name=self.__class__.__name__,
                        ceil_mode=self._kwargs["pooling_convention"] == "full",
                        **self._kwargs)


def _pool_size(pool_size, n):
    return _check_tuple(pool_size, n, "pool_size")


class MaxPool1D(_Pooling):
    """1-D max pooling of ``(N, C, W)`` data."""

    def __init__(self, pool_size=2, strides=None, padding=0, layout="NCW", ceil_mode=False,
                 **kwargs):
        assert layout in ("NCW", "NWC"), "Only NCW and NWC layouts are valid for 1D Pooling"
        super().__init__(_pool_size(pool_size, 1), strides, padding, ceil_mode, False, "max",
                         layout, **kwargs)


class MaxPool2D(_Pooling):
    """2-D max pooling of ``(N, C, H, W)`` data.

    Examples
    --------
    >>> import fastgrad as mx
    >>> from fastgrad.gluon import nn
    >>> nn.MaxPool2D()(mx.nd.ones((1, 1, 4, 4))).shape
    (1, 1, 2, 2)
    """

    def __init__(self, pool_size=(2, 2), strides=None, padding=0, layout="NCHW",
                 ceil_mode=False, **kwargs):
        assert layout in ("NCHW", "NHWC"), "Only NCHW and NHWC layouts are valid for 2D Pooling"
        super().__init__(_pool_size(pool_size, 2), strides, padding, ceil_mode, False, "max",
                         layout, **kwargs)


class MaxPool3D(_Pooling):
    """3-D max pooling of ``(N, C, D, H, W)`` data."""

    def __init__(self, pool_size=(2, 2, 2), strides=None, padding=0, ceil_mode=False,
                 layout="NCDHW", **kwargs):
        assert layout in ("NCDHW", "NDHWC"), \
            "Only NCDHW and NDHWC layouts are valid for 3D Pooling"
        super().__init__(_pool_size(pool_size, 3), strides, padding, ceil_mode, False, "max",
                         layout, **kwargs)


class AvgPool1D(_Pooling):
    """1-D average pooling; ``count_include_pad=False`` divides by the data elements only."""

    def __init__(self, pool_size=2, strides=None, padding=0, layout="NCW", ceil_mode=False,
                 count_include_pad=True, **kwargs):
        assert layout in ("NCW", "NWC"), "Only NCW and NWC layouts are valid for 1D Pooling"
        super().__init__(_pool_size(pool_size, 1), strides, padding, ceil_mode, False, "avg",
                         layout, count_include_pad, **kwargs)


class AvgPool2D(_Pooling):
    """2-D average pooling; ``count_include_pad=False`` divides by the data elements only."""

    def __init__(self, pool_size=(2, 2), strides=None, padding=0, ceil_mode=False,
                 layout="NCHW", count_include_pad=True, **kwargs):
        assert layout in ("NCHW", "NHWC"), "Only NCHW and NHWC layouts are valid for 2D Pooling"
        super().__init__(_pool_size(pool_size, 2), strides, padding, ceil_mode, False, "avg",
                         layout, count_include_pad, **kwargs)


class AvgPool3D(_Pooling):
    """3-D average pooling; ``count_include_pad=False`` divides by the data elements only."""

    def __init__(self, pool_size=(2, 2, 2), strides=None, padding=0, ceil_mode=False,
                 layout="NCDHW", count_include_pad=True, **kwargs):
        assert layout in ("NCDHW", "NDHWC"), \
            "Only NCDHW and NDHWC layouts are valid for 3D Pooling"
        super().__init__(_pool_size(pool_size, 3), strides, padding, ceil_mode, False, "avg",
                         layout, count_include_pad, **kwargs)


class _GlobalPooling(_Pooling):
    """Pooling over the whole of every spatial axis (output length 1 on each)."""

    def __init__(self, dims, pool_type, layout, layouts, **kwargs):
        assert layout in layouts, "Only %s and %s layouts are valid for %dD Pooling" \
            % (layouts + (dims,))
        super().__init__((1,) * dims, None, 0, True, True, pool_type, layout, **kwargs)


class GlobalMaxPool1D(_GlobalPooling):
    """Maximum over the whole width of ``(N, C, W)`` data: ``(N, C, 1)``."""

    def __init__(self, layout="NCW", **kwargs):
        super().__init__(1, "max", layout, ("NCW", "NWC"), **kwargs)


class GlobalMaxPool2D(_GlobalPooling):
    """Maximum over each whole image of ``(N, C, H, W)`` data: ``(N, C, 1, 1)``."""

    def __init__(self, layout="NCHW", **kwargs):
        super().__init__(2, "max", layout, ("NCHW", "NHWC"), **kwargs)


class GlobalMaxPool3D(_GlobalPooling):
    """Maximum over each whole volume of ``(N, C, D, H, W)`` data."""

    def __init__(self, layout="NCDHW", **kwargs):
        super().__init__(3, "max", layout, ("NCDHW", "NDHWC"), **kwargs)


class GlobalAvgPool1D(_GlobalPooling):
    """Mean over the whole width of ``(N, C, W)`` data: ``(N, C, 1)``."""

    def __init__(self, layout="NCW", **kwargs):
        super().__init__(1, "avg", layout, ("NCW", "NWC"), **kwargs)


class GlobalAvgPool2D(_GlobalPooling):
    """Mean over each whole image of ``(N, C, H, W)`` data: ``(N, C, 1, 1)``."""

    def __init__(self, layout="NCHW", **kwargs):
        super().__init__(2, "avg", layout, ("NCHW", "NHWC"), **kwargs)


class GlobalAvgPool3D(_GlobalPooling):
    """Mean over each whole volume of ``(N, C, D, H, W)`` data."""

    def __init__(self, layout="NCDHW", **kwargs):
        super().__init__(3, "avg", layout, ("NCDHW", "NDHWC"), **kwargs)


class ReflectionPad2D(HybridBlock):
    """Pads the height and width of ``(N, C, H, W)`` data by reflection (the edge itself not
    repeated): ``padding`` is a number for all four sides, or MXNet's flat ``pad_width`` of
    eight values (two per axis).

    Examples
    --------
    >>> import fastgrad as mx
    >>> from fastgrad.gluon import nn
    >>> nn.ReflectionPad2D(1)(mx.nd.ones((1, 1, 3, 3))).shape
    (1, 1, 5, 5)
    """

    def __init__(self, padding=0, **kwargs):
        super().__init__(**kwargs)
        if isinstance(padding, Number):
            padding = (0, 0, 0, 0, padding, padding, padding, padding)
        assert len(padding) == 8
        self._padding = padding

    def hybrid_forward(self, F, x):
        return F.pad(x, mode="reflect", pad_width=self._padding)
