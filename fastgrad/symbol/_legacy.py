"""MXNet 1.x's symbolic layer operators (``sym.FullyConnected``, ``sym.BatchNorm``, ...).

Note [MXNet 1.x operators]
~~~~~~~~~~~~~~~~~~~~~~~~~~
MXNet 1.x programs build networks from operators named and parametrized as in MXNet's C++
registry: ``FullyConnected(data, weight, bias, num_hidden=, no_bias=, flatten=)``,
``BatchNorm(data, gamma, beta, moving_mean, moving_var, ...)`` and so on. This module is
their catalogue: per operator, its input names, which inputs are *auxiliary states*, its
parameters with their kinds and defaults, its number of outputs, and a function that computes
it with fastgrad's differentiable ops (``fastgrad.npx``/``fastgrad.np``).

A node of such an operator is a composite node (Note [Symbol ops] in ``_ops.py``) whose op is
``'mx.<Name>'``: its stored call is the inputs followed by the parameters the user gave (only
those: defaults are filled in when it runs, so writing MXNet's JSON gives back the attributes
MXNet wrote). Parameters are parsed from Python values or from MXNet's attribute strings
(``"(3, 3)"``, ``"True"``, ``"0.5"``) by a small parser that never evaluates text.

Inputs the user does not pass are created as variables named ``<node name>_<input name>``
(``fc1_weight``, ``bn_moving_mean``, ``softmax_label``), as MXNet does, with the operator's
attributes copied onto them as MXNet does. A variable fed into an auxiliary position
(``BatchNorm``'s moving statistics) is an auxiliary state: ``list_arguments`` leaves it out
and ``list_auxiliary_states`` lists it. The executor passes auxiliary arrays to the operator
itself, which updates them in place in a training forward (``npx.batch_norm`` does).

Loss heads (``SoftmaxOutput``, ``LinearRegressionOutput``, ``LogisticRegressionOutput``,
``MAERegressionOutput``, ``MakeLoss``) have MXNet's backward: the gradient of the loss they
stand for, which ignores the gradient arriving from above (Note [Loss heads]).
"""

import numpy as _onp

from fastgrad._api import _functions as F
from fastgrad import numpy_extension as npx
from fastgrad._api import _npx_composites as npx_more
from fastgrad._api._ctc import ctc_loss as _ctc_loss
from fastgrad._core._array import unwrap, _wrap
from fastgrad._core._custom_function import Function
from fastgrad._api._reshape_codes import legacy_shape
from fastgrad._api import _rnn
from fastgrad.ndarray._mxnet_names import rnn_input_names

REQUIRED = object()


# ---------------------------------------------------------------- attribute parsing

def _parse_bool(v, where):
    if isinstance(v, (bool, _onp.bool_)):
        return bool(v)
    if isinstance(v, (int, _onp.integer)) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip() in ("True", "true", "1", "False", "false", "0"):
        return v.strip() in ("True", "true", "1")
    raise ValueError("%s must be a bool, got %r" % (where, v))


def _parse_int(v, where):
    if isinstance(v, (bool, _onp.bool_)):
        raise ValueError("%s must be an int, got %r" % (where, v))
    if isinstance(v, (int, _onp.integer)):
        return int(v)
    if isinstance(v, (float, _onp.floating)) and float(v).is_integer():
        return int(v)
    if isinstance(v, str):
        try:
            return int(v.strip())
        except ValueError:
            pass
    raise ValueError("%s must be an int, got %r" % (where, v))


def _parse_float(v, where):
    if isinstance(v, (bool, _onp.bool_)):
        raise ValueError("%s must be a number, got %r" % (where, v))
    if isinstance(v, (int, float, _onp.integer, _onp.floating)):
        return float(v)
    if isinstance(v, str):
        try:
            return float(v.strip())
        except ValueError:
            pass
    raise ValueError("%s must be a number, got %r" % (where, v))


def _parse_shape(v, where):
    """A tuple of ints from a tuple/list/int or MXNet's ``"(3, 3)"``/``"[3,3]"``/``"3"``."""
    if isinstance(v, (int, _onp.integer)) and not isinstance(v, bool):
        return (int(v),)
    if isinstance(v, (tuple, list)):
        return tuple(_parse_int(x, where) for x in v)
    if isinstance(v, str):
        text = v.strip()
        if text.startswith(("(", "[")) and text.endswith((")", "]")):
            text = text[1:-1]
        parts = [p.strip() for p in text.split(",")]
        parts = [p for p in parts if p and p not in ("None", "L")]
        return tuple(_parse_int(p.rstrip("L"), where) for p in parts)
    raise ValueError("%s must be a shape (tuple of ints), got %r" % (where, v))


def _parse_axis(v, where):
    """``None``, an int or a tuple of ints (MXNet writes ``"None"``, ``"1"``, ``"(0, 1)"``)."""
    if v is None or (isinstance(v, str) and v.strip() in ("None", "")):
        return None
    if isinstance(v, str) and not v.strip().startswith(("(", "[")):
        return _parse_int(v, where)
    if isinstance(v, (int, _onp.integer)) and not isinstance(v, bool):
        return int(v)
    shape = _parse_shape(v, where)
    return shape if shape else None


def _parse_str(v, where):
    if isinstance(v, str):
        return v
    raise ValueError("%s must be a string, got %r" % (where, v))


def _parse_opt_float(v, where):
    if v is None or (isinstance(v, str) and v.strip() == "None"):
        return None
    return _parse_float(v, where)


def _parse_opt_int(v, where):
    if v is None or (isinstance(v, str) and v.strip() == "None"):
        return None
    return _parse_int(v, where)


def _parse_opt_str(v, where):
    if v is None or (isinstance(v, str) and v.strip() == "None"):
        return None
    return _parse_str(v, where)


def _parse_opt_bool(v, where):
    if v is None or (isinstance(v, str) and v.strip() == "None"):
        return None
    return _parse_bool(v, where)


def _parse_dtype(v, where):
    if v is None or (isinstance(v, str) and v.strip() == "None"):
        return None
    try:
        return _onp.dtype(v).name
    except TypeError:
        raise ValueError("%s: unknown dtype %r" % (where, v)) from None


_KINDS = {"bool": _parse_bool, "int": _parse_int, "float": _parse_float, "shape": _parse_shape,
          "axis": _parse_axis, "str": _parse_str, "opt_float": _parse_opt_float,
          "opt_str": _parse_opt_str, "opt_bool": _parse_opt_bool, "dtype": _parse_dtype,
          "opt_int": _parse_opt_int, "any": lambda v, where: v}


def format_attr(value):
    """A parameter value as MXNet writes it in its JSON attributes."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, tuple):
        return "(" + ", ".join(str(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if value is None:
        return "None"
    return str(value)


# ---------------------------------------------------------------- the catalogue

class LegacyOp:
    """One MXNet 1.x operator (see Note [MXNet 1.x operators])."""

    def __init__(self, name, inputs, params, compute, aux=(), outputs=1, total_outputs=None,
                 variadic=False, auto=True, aliases=(), var_attrs=None, shape_rule=None):
        self.name = name
        self._inputs = inputs
        self.params = params
        self.compute = compute
        self.aux = tuple(aux)
        self._outputs = outputs
        self._total = total_outputs
        self.variadic = variadic
        self.auto = auto
        self.aliases = tuple(aliases)
        self.var_attrs = dict(var_attrs or {})
        # ``rule(known input shapes (None if unknown), params) -> {input position: shape}``
        self.shape_rule = shape_rule

    def input_names(self, p):
        """The input names for the full parameters ``p`` (``bias`` only without ``no_bias``)."""
        if callable(self._inputs):
            return list(self._inputs(p))
        return list(self._inputs)

    def num_outputs(self, p):
        return self._outputs(p) if callable(self._outputs) else self._outputs

    def total_outputs(self, p):
        """Outputs including MXNet's hidden ones (``node_row_ptr`` in the JSON)."""
        if self._total is None:
            return self.num_outputs(p)
        return self._total(p) if callable(self._total) else self._total

    def parse(self, given, where):
        """The parsed values of the parameters in ``given`` (names checked)."""
        out = {}
        for key, value in given.items():
            spec = self.params.get(key)
            if spec is None:
                raise TypeError("%s: unknown parameter %r (parameters: %s)"
                                % (where, key, ", ".join(sorted(self.params)) or "none"))
            out[key] = _KINDS[spec[0]](value, "%s parameter %r" % (where, key))
        return out

    def full(self, given, where="sym.<op>"):
        """``given`` with the defaults of the parameters it does not set."""
        p = {}
        for key, (kind, default) in self.params.items():
            if key in given:
                p[key] = given[key]
            elif default is REQUIRED:
                raise TypeError("%s: missing required parameter %r" % (where, key))
            else:
                p[key] = default
        return p

    def function(self):
        """The composite function the executor calls: ``f(*inputs, **given params)``."""
        op = self

        def run(*inputs, **given):
            p = op.full(given, "sym." + op.name)
            out = op.compute(list(inputs), p)
            outs = list(out) if isinstance(out, (list, tuple)) else [out]
            # A node's outputs are new arrays (an identity op returns a copy).
            outs = [F.copy(o) if any(o is x for x in inputs) else o for o in outs]
            return outs if len(outs) != 1 else outs[0]
        run.__name__ = run.__qualname__ = op.name
        run.__doc__ = "MXNet 1.x operator ``%s`` (see fastgrad.sym.%s)." % (op.name, op.name)
        return run


CATALOGUE = {}


def _fc_shapes(s, p):
    d = s[0]
    n_in = 1
    for k in (d[1:] if p["flatten"] else d[-1:]):
        n_in *= k
    return {1: (p["num_hidden"], n_in), 2: (p["num_hidden"],)}


def _channels_last(p):
    return p.get("layout") in ("NWC", "NHWC", "NDHWC")


def _conv_shapes(s, p):
    if _channels_last(p):       # Note [Channels-last layouts] in numpy_extension.py
        return {1: (p["num_filter"],) + tuple(p["kernel"]) + (s[0][-1] // p["num_group"],),
                2: (p["num_filter"],)}
    c = s[0][1]
    return {1: (p["num_filter"], c // p["num_group"]) + tuple(p["kernel"]),
            2: (p["num_filter"],)}


def _channel_shapes(axis_key, count):
    def rule(s, p):
        axis = p.get(axis_key, 1) if axis_key else 1
        c = s[0][axis]
        return {i: (c,) for i in range(1, count)}
    return rule


def _softmax_label_shape(s, p):
    d = s[0]
    if p["preserve_shape"]:
        return {1: d[:-1]}
    if p["multi_output"]:
        return {1: (d[0],) + tuple(d[2:])}
    return {1: (d[0],)}


def _same_as_data(s, p):
    return {1: s[0]}


def _elemwise_shapes(s, p):
    return {0: s[1], 1: s[0]}


def _rnn_shapes(s, p):
    """The flat parameters', the states' and the lengths' shapes from the data's ``(T, N, I)``."""
    steps, batch, size = s[0]
    directions = 2 if p["bidirectional"] else 1
    projection = int(p["projection_size"]) if p["projection_size"] else None
    layers, hidden = p["num_layers"] * directions, p["state_size"]
    wanted = {1: (_rnn.parameter_count(p["mode"], size, hidden, p["num_layers"], directions,
                                       projection),),
              2: (layers, batch, projection or hidden)}
    names = rnn_input_names(p["mode"], p["use_sequence_length"])
    if "state_cell" in names:
        wanted[names.index("state_cell")] = (layers, batch, hidden)
    if "sequence_length" in names:
        wanted[names.index("sequence_length")] = (batch,)
    return wanted


def _register(op):
    for n in (op.name,) + op.aliases:
        CATALOGUE[n] = op
    return op


def _pairs(value):
    """MXNet's empty tuple (the default) as ``None``."""
    return value if value else None


# ---------------------------------------------------------------- computations

def _ctc(x, p):
    rest = iter(x[2:])
    data_lengths = next(rest) if p["use_data_lengths"] else None
    label_lengths = next(rest) if p["use_label_lengths"] else None
    return _ctc_loss(x[0], x[1], data_lengths, label_lengths, p["use_data_lengths"],
                     p["use_label_lengths"], p["blank_label"], _name="sym.CTCLoss")


def _fully_connected(x, p):
    data, weight = x[0], x[1]
    bias = None if p["no_bias"] else x[2]
    if unwrap(weight).shape[0] != p["num_hidden"]:
        raise ValueError("FullyConnected: num_hidden=%d but the weight has shape %s"
                         % (p["num_hidden"], unwrap(weight).shape))
    if p["flatten"] and data.ndim == 1:
        data = F.reshape(data, (-1, 1))     # as MXNet: (N,) data is N examples of one value
    return npx.fully_connected(data, weight, bias, no_bias=p["no_bias"], flatten=p["flatten"])


def _convolution(x, p):
    data, weight = x[0], x[1]
    bias = None if p["no_bias"] else x[2]
    return npx.convolution(data, weight, bias, kernel=p["kernel"], stride=_pairs(p["stride"]),
                           dilate=_pairs(p["dilate"]), pad=_pairs(p["pad"]),
                           num_filter=p["num_filter"], num_group=p["num_group"],
                           no_bias=bias is None, layout=p["layout"])


def _deconvolution(x, p):
    """MXNet's Deconvolution: the transpose of a convolution (its data gradient)."""
    data, weight = x[0], x[1]
    bias = None if p["no_bias"] else x[2]
    return npx.deconvolution(data, weight, bias, kernel=p["kernel"], stride=_pairs(p["stride"]),
                             dilate=_pairs(p["dilate"]), pad=_pairs(p["pad"]),
                             adj=_pairs(p["adj"]), target_shape=_pairs(p["target_shape"]),
                             num_filter=p["num_filter"], num_group=p["num_group"],
                             no_bias=bias is None, layout=p["layout"])


def _deconv_shapes(s, p):
    if _channels_last(p):
        return {1: (s[0][-1],) + tuple(p["kernel"]) + (p["num_filter"] // p["num_group"],),
                2: (p["num_filter"],)}
    c = s[0][1]
    return {1: (c, p["num_filter"] // p["num_group"]) + tuple(p["kernel"]),
            2: (p["num_filter"],)}


def _conv_inputs(p):
    return ["data", "weight"] + ([] if p["no_bias"] else ["bias"])


def _lrn(x, p):
    """MXNet's LRN: ``x / (knorm + alpha / nsize * sum of x**2 over nsize channels)**beta``."""
    n = p["nsize"]
    half = n // 2
    nd = unwrap(x[0]).ndim
    sq = F.square(x[0])
    widths = [(0, 0)] * nd
    widths[1] = (half, half)
    padded = F.pad(sq, tuple(widths))
    c = unwrap(x[0]).shape[1]
    total = padded[:, 0:c]
    for k in range(1, n):
        total = total + padded[:, k:k + c]
    return x[0] / (p["knorm"] + p["alpha"] / n * total) ** p["beta"]


def _pooling(x, p):
    cip = True if p["count_include_pad"] is None else p["count_include_pad"]
    return npx.pooling(x[0], kernel=p["kernel"] or None, stride=_pairs(p["stride"]),
                       pad=_pairs(p["pad"]), pool_type=p["pool_type"],
                       pooling_convention=p["pooling_convention"],
                       global_pool=p["global_pool"], count_include_pad=cip,
                       layout=p["layout"])


def _pad(x, p):
    width = p["pad_width"]
    if p["mode"] not in ("constant", "edge", "reflect"):
        raise ValueError("Pad: mode must be 'constant', 'edge' or 'reflect', got %r"
                         % (p["mode"],))
    nd = unwrap(x[0]).ndim
    if len(width) != 2 * nd:
        raise ValueError("Pad: pad_width needs two values per axis (%d), got %d"
                         % (2 * nd, len(width)))
    return F.pad(x[0], [width[i:i + 2] for i in range(0, len(width), 2)], mode=p["mode"],
                 **({"constant_values": p["constant_value"]} if p["mode"] == "constant"
                    else {}))


def _batch_norm(x, p):
    if p["output_mean_var"]:
        raise NotImplementedError("BatchNorm: output_mean_var=True is not supported")
    data, gamma, beta, mean, var = x
    return npx.batch_norm(data, gamma, beta, mean, var, eps=p["eps"], momentum=p["momentum"],
                          fix_gamma=p["fix_gamma"], use_global_stats=p["use_global_stats"],
                          axis=p["axis"])


def _leaky_inputs(p):
    return ["data", "gamma"] if p["act_type"] == "prelu" else ["data"]


def _leaky(x, p):
    if p["act_type"] == "rrelu":
        raise NotImplementedError("LeakyReLU: act_type='rrelu' is not supported")
    return npx.leaky_relu(x[0], x[1] if len(x) > 1 else None, act_type=p["act_type"],
                          slope=p["slope"])


def _embedding(x, p):
    w = unwrap(x[1])
    if w.shape != (p["input_dim"], p["output_dim"]):
        raise ValueError("Embedding: the weight has shape %s, not (input_dim, output_dim) = "
                         "(%d, %d)" % (w.shape, p["input_dim"], p["output_dim"]))
    return npx.embedding(x[0], x[1])


def _same_shape(name):
    def check(x):
        a, b = unwrap(x[0]).shape, unwrap(x[1]).shape
        if a != b:
            raise ValueError("%s: the inputs have shapes %s and %s; elemwise ops need equal "
                             "shapes (use broadcast_%s to broadcast)" % (name, a, b,
                                                                          name.split("_")[-1]))
    return check


def _elemwise(name, fn):
    check = _same_shape(name)

    def compute(x, p):
        check(x)
        return fn(x[0], x[1])
    return compute


def _reduce_axes(data, axis, exclude):
    nd = unwrap(data).ndim
    if axis is None:
        return None     # MXNet: no axes means all of them, with or without exclude
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    bad = [a for a in axes if not -max(nd, 1) <= a < max(nd, 1)]
    if bad:     # MXNet refuses them too; wrapping would reduce another axis silently
        raise ValueError("axis %s is out of range for data with %d dimensions"
                         % (bad[0] if len(bad) == 1 else tuple(bad), nd))
    axes = tuple(a % nd for a in axes) if nd else axes
    if exclude:
        axes = tuple(d for d in range(nd) if d not in axes)
    return axes


def _legacy_shape(out):
    # MXNet 1.x's operators have no 0-d results: a full reduction has shape (1,).
    return F.reshape(out, (1,)) if unwrap(out).ndim == 0 else out


def _reduction(fn):
    def compute(x, p):
        axes = _reduce_axes(x[0], p["axis"], p["exclude"])
        if axes == ():
            return F.copy(x[0])
        return _legacy_shape(fn(x[0], axis=axes, keepdims=p["keepdims"]))
    return compute


def _norm(x, p):
    if p["ord"] not in (1, 2):
        raise ValueError("norm: ord must be 1 or 2, got %r" % (p["ord"],))
    axes = _reduce_axes(x[0], p["axis"], False)
    if p["ord"] == 1:
        out = F.sum(F.abs(x[0]), axis=axes, keepdims=p["keepdims"])
    else:
        out = F.sqrt(F.sum(F.square(x[0]), axis=axes, keepdims=p["keepdims"]))
    return _legacy_shape(out)


def _arg_reduce(fn):
    def compute(x, p):
        out = fn(_onp.asarray(unwrap(x[0])), axis=p["axis"], keepdims=p["keepdims"])
        # MXNet returns the indices as floats of the data's dtype; no gradient.
        return _wrap(_onp.atleast_1d(_onp.asarray(out, dtype=unwrap(x[0]).dtype)))
    return compute


def _batch_take(x, p):
    a = x[0]
    idx = _onp.asarray(unwrap(x[1])).astype(_onp.int64).reshape(-1)
    n, k = unwrap(a).shape[0], unwrap(a).shape[1]
    idx = _onp.clip(idx, 0, k - 1)[:n]
    return F.reshape(F.take_along_axis(a, idx.reshape(n, 1), 1), (n,))


def _take(x, p):
    idx = _onp.asarray(unwrap(x[1])).astype(_onp.int64)
    n = unwrap(x[0]).shape[p["axis"]]
    idx = _onp.clip(idx, 0, n - 1) if p["mode"] == "clip" else idx % n
    return F.take(x[0], idx, axis=p["axis"])


def _reshape(x, p):
    shape = p["shape"]
    if not shape and p["target_shape"]:
        shape = p["target_shape"]
    target = legacy_shape(unwrap(x[0]).shape, shape, p["reverse"], op="Reshape")
    return F.reshape(x[0], target)


def _dot(x, p):
    a, b = x
    if p["transpose_a"]:
        a = F.transpose(a)
    if p["transpose_b"]:
        b = F.transpose(b)
    sa, sb = unwrap(a).shape, unwrap(b).shape
    if len(sa) <= 2 and len(sb) <= 2:
        return F.dot(a, b)
    out = F.matmul(F.reshape(a, (-1, sa[-1])), F.reshape(b, (sb[0], -1)))
    return F.reshape(out, sa[:-1] + sb[1:])


def _split(x, p):
    n, axis = p["num_outputs"], p["axis"]
    size = unwrap(x[0]).shape[axis]
    if size % n:
        raise ValueError("SliceChannel: axis %d of length %d does not split into %d parts"
                         % (axis, size, n))
    parts = F.split(x[0], n, axis=axis)
    if p["squeeze_axis"]:
        parts = [F.squeeze(q, axis=axis) for q in parts]
    return list(parts)


def _slice_axis(x, p):
    axis = p["axis"] % unwrap(x[0]).ndim
    key = [slice(None)] * unwrap(x[0]).ndim
    key[axis] = slice(p["begin"], p["end"])
    return x[0][tuple(key)]


def _softmax(fn):
    def compute(x, p):
        if p["use_length"]:
            raise NotImplementedError("softmax: use_length=True is not supported")
        out = fn(x[0], axis=p["axis"], temperature=p["temperature"])
        return out if p["dtype"] is None else F.astype(out, p["dtype"])
    return compute


# ---------------------------------------------------------------- loss heads

class _Head(Function):
    """Note [Loss heads]
    ~~~~~~~~~~~~~~~~~~~
    MXNet's output layers compute one thing forward (a softmax, a sigmoid, the identity) and
    return a different thing backward: the gradient of the loss they stand for (cross-entropy,
    squared error, ...) with respect to their input, scaled by ``grad_scale`` and normalized.
    The gradient arriving from above is ignored, so ``backward()`` with no head gradient
    trains the network. Each head is a ``Function`` whose backward returns that gradient and
    zeros for the label.
    """

    def __init__(self, kind, p):
        super().__init__()
        self.kind = kind
        self.p = p

    def forward(self, data, label):
        d = _onp.asarray(unwrap(data))
        if self.kind == "softmax":
            out = _softmax_output_forward(d, self.p)
        elif self.kind == "logistic":
            out = 1.0 / (1.0 + _onp.exp(-d))
        else:
            out = d.copy()
        out = _onp.asarray(out, dtype=d.dtype)
        self.save_for_backward(_wrap(out), label)
        return _wrap(out)

    def backward(self, head_grad):
        out, label = self.saved_tensors
        o = _onp.asarray(unwrap(out))
        lab = _onp.asarray(unwrap(label))
        label_shape = lab.shape     # (N,) for data (N, 1) is allowed: its gradient keeps it
        if self.kind == "softmax":
            g = _softmax_output_backward(o, lab, self.p)
            if self.p["out_grad"]:
                # out_grad=True: MXNet scales by the gradient arriving from above.
                g = g * _onp.asarray(unwrap(head_grad))
        else:
            lab = lab.reshape(o.shape) if lab.size == o.size else lab
            if lab.shape != o.shape:
                raise ValueError("%sRegressionOutput: label shape %s does not match the data "
                                 "shape %s" % (self.kind.capitalize(), lab.shape, o.shape))
            diff = o - lab if self.kind != "mae" else _onp.sign(o - lab)
            num_output = lab.size // lab.shape[0] if lab.ndim and lab.shape[0] else 1
            g = diff * (self.p["grad_scale"] / num_output)
        return (_wrap(_onp.asarray(g, dtype=o.dtype)),
                _wrap(_onp.zeros(label_shape, dtype=lab.dtype)))


def _softmax_axis(d, p):
    if p["preserve_shape"]:
        return d, -1
    if p["multi_output"]:
        return d, 1
    return d.reshape(d.shape[0], -1) if d.ndim != 2 else d, 1


def _softmax_output_forward(d, p):
    if p["smooth_alpha"]:
        raise NotImplementedError("SoftmaxOutput: smooth_alpha is not supported")
    flat, axis = _softmax_axis(d, p)
    z = flat - flat.max(axis=axis, keepdims=True)
    e = _onp.exp(z)
    return (e / e.sum(axis=axis, keepdims=True)).reshape(d.shape)


def _softmax_output_backward(o, lab, p):
    flat, axis = _softmax_axis(o, p)
    if lab.shape == flat.shape or lab.shape == o.shape and lab.size == o.size \
            and not p["multi_output"] and lab.ndim == o.ndim and lab.ndim > 1:
        g = flat - lab.reshape(flat.shape)
        valid = None
    else:
        moved = _onp.moveaxis(flat, axis, -1)
        if lab.size * moved.shape[-1] != moved.size:
            raise ValueError("SoftmaxOutput: label shape %s does not match the data shape %s"
                             % (lab.shape, o.shape))
        idx = lab.reshape(moved.shape[:-1])
        k = moved.shape[-1]
        ii = _onp.rint(idx).astype(_onp.int64)
        onehot = (ii[..., None] == _onp.arange(k)).astype(o.dtype)
        g = moved - onehot
        valid = _onp.ones(idx.shape, dtype=bool)
        if p["use_ignore"]:
            valid = idx != p["ignore_label"]
            g = g * valid[..., None]
        g = _onp.moveaxis(g, -1, axis)
    scale = p["grad_scale"]
    norm = p["normalization"]
    if norm == "batch":
        scale = scale / o.shape[0]
    elif norm == "valid":
        count = int(valid.sum()) if valid is not None else flat.size // flat.shape[axis]
        scale = scale / max(count, 1)
    elif norm != "null":
        raise ValueError("SoftmaxOutput: unknown normalization %r (null, batch, valid)" % norm)
    return (g * scale).reshape(o.shape)


def _head(kind):
    def compute(x, p):
        return _Head(kind, p)(x[0], x[1])
    return compute


class _MakeLoss(Function):
    def __init__(self, p):
        super().__init__()
        self.p = p

    def forward(self, data):
        d = _onp.asarray(unwrap(data))
        self.save_for_backward(data)
        return _wrap(d.copy())

    def backward(self, head_grad):
        d = _onp.asarray(unwrap(self.saved_tensors[0]))
        scale = self.p["grad_scale"]
        if self.p["normalization"] == "batch":
            scale = scale / (d.shape[0] if d.ndim else 1)
        elif self.p["normalization"] == "valid":
            scale = scale / max(int((d > self.p["valid_thresh"]).sum()), 1)
        return _wrap(_onp.full(d.shape, scale, dtype=d.dtype))


# ---------------------------------------------------------------- registrations

_B, _I, _F, _S = "bool", "int", "float", "str"

_register(LegacyOp("FullyConnected", lambda p: ["data", "weight"] + ([] if p["no_bias"] else
                                                                     ["bias"]),
                   {"num_hidden": (_I, REQUIRED), "no_bias": (_B, False),
                    "flatten": (_B, True)}, _fully_connected, shape_rule=_fc_shapes))
_register(LegacyOp("Convolution", _conv_inputs,
                   {"kernel": ("shape", REQUIRED), "stride": ("shape", ()),
                    "dilate": ("shape", ()), "pad": ("shape", ()), "num_filter": (_I, REQUIRED),
                    "num_group": (_I, 1), "workspace": (_I, 1024), "no_bias": (_B, False),
                    "cudnn_tune": ("opt_str", None), "cudnn_off": (_B, False),
                    "layout": ("opt_str", None)}, _convolution, shape_rule=_conv_shapes))
_register(LegacyOp("Deconvolution", _conv_inputs,
                   {"kernel": ("shape", REQUIRED), "stride": ("shape", ()),
                    "dilate": ("shape", ()), "pad": ("shape", ()), "adj": ("shape", ()),
                    "target_shape": ("shape", ()), "num_filter": (_I, REQUIRED),
                    "num_group": (_I, 1), "workspace": (_I, 512), "no_bias": (_B, True),
                    "cudnn_tune": ("opt_str", None), "cudnn_off": (_B, False),
                    "layout": ("opt_str", None)}, _deconvolution, shape_rule=_deconv_shapes))
_register(LegacyOp("Pooling", ["data"],
                   {"kernel": ("shape", ()), "pool_type": (_S, "max"),
                    "global_pool": (_B, False), "cudnn_off": (_B, False),
                    "pooling_convention": (_S, "valid"), "stride": ("shape", ()),
                    "pad": ("shape", ()), "p_value": ("any", None),
                    "count_include_pad": ("opt_bool", None), "layout": ("opt_str", None)},
                   _pooling,
                   # MXNet 1.9.1 (MKL-DNN build) counts a hidden workspace for max pooling.
                   total_outputs=lambda p: 2 if p["pool_type"] == "max" else 1))
_register(LegacyOp("LRN", ["data"],
                   {"alpha": (_F, 1e-4), "beta": (_F, 0.75), "knorm": (_F, 2.0),
                    "nsize": (_I, REQUIRED)}, _lrn, total_outputs=2))
_register(LegacyOp("Activation", ["data"], {"act_type": (_S, REQUIRED)},
                   lambda x, p: npx.activation(x[0], act_type=p["act_type"])))
_register(LegacyOp("BatchNorm", ["data", "gamma", "beta", "moving_mean", "moving_var"],
                   {"eps": (_F, 1e-3), "momentum": (_F, 0.9), "fix_gamma": (_B, True),
                    "use_global_stats": (_B, False), "output_mean_var": (_B, False),
                    "axis": (_I, 1), "cudnn_off": (_B, False),
                    "min_calib_range": ("opt_float", None),
                    "max_calib_range": ("opt_float", None)},
                   _batch_norm, aux=("moving_mean", "moving_var"), total_outputs=3,
                   var_attrs={"moving_mean": '["zero", {}]', "moving_var": '["one", {}]'},
                   shape_rule=_channel_shapes("axis", 5)))
_register(LegacyOp("Dropout", ["data"],
                   {"p": (_F, 0.5), "mode": (_S, "training"), "axes": ("shape", ()),
                    "cudnn_off": ("opt_bool", False)},
                   lambda x, p: npx.dropout(x[0], p=p["p"], mode=p["mode"], axes=p["axes"]),
                   total_outputs=2))
_register(LegacyOp("Flatten", ["data"], {}, lambda x, p: npx.batch_flatten(x[0]),
                   aliases=("flatten",)))
_register(LegacyOp("Concat", None, {"num_args": (_I, REQUIRED), "dim": (_I, 1)},
                   lambda x, p: F.concatenate(x, axis=p["dim"]), variadic=True,
                   # MXNet's fused RNN layers join their flattened weights with
                   # _rnn_param_concat (Concat with a laxer shape inference) in their exports
                   aliases=("concat", "_rnn_param_concat", "_npi_rnn_param_concat")))
_register(LegacyOp("add_n", None, {"num_args": (_I, REQUIRED)},
                   lambda x, p: _add_all(x), variadic=True, aliases=("ElementWiseSum",)))
_SOFTMAX_OUTPUT = {"grad_scale": (_F, 1.0), "ignore_label": (_F, -1.0),
                   "multi_output": (_B, False), "use_ignore": (_B, False),
                   "preserve_shape": (_B, False), "normalization": (_S, "null"),
                   "out_grad": (_B, False), "smooth_alpha": (_F, 0.0)}
_register(LegacyOp("SoftmaxOutput", ["data", "label"], _SOFTMAX_OUTPUT, _head("softmax"),
                   aliases=("Softmax",), shape_rule=_softmax_label_shape))
for _name, _kind in (("LinearRegressionOutput", "linear"),
                     ("LogisticRegressionOutput", "logistic"),
                     ("MAERegressionOutput", "mae")):
    _register(LegacyOp(_name, ["data", "label"], {"grad_scale": (_F, 1.0)}, _head(_kind),
                       shape_rule=_same_as_data))
_register(LegacyOp("MakeLoss", ["data"],
                   {"grad_scale": (_F, 1.0), "valid_thresh": (_F, 0.0),
                    "normalization": (_S, "null")},
                   lambda x, p: _MakeLoss(p)(x[0]), aliases=("make_loss",)))
_register(LegacyOp("BlockGrad", ["data"], {}, lambda x, p: x[0].detach(),
                   aliases=("stop_gradient",)))
_register(LegacyOp("_copy", ["data"], {}, lambda x, p: F.copy(x[0]), aliases=("identity",)))
_register(LegacyOp("Embedding", ["data", "weight"],
                   {"input_dim": (_I, REQUIRED), "output_dim": (_I, REQUIRED),
                    "dtype": ("dtype", "float32"), "sparse_grad": (_B, False)}, _embedding,
                   shape_rule=lambda s, p: {1: (p["input_dim"], p["output_dim"])}))
_register(LegacyOp("LeakyReLU", _leaky_inputs,
                   {"act_type": (_S, "leaky"), "slope": (_F, 0.25),
                    "lower_bound": (_F, 0.125), "upper_bound": (_F, 0.334)}, _leaky,
                   shape_rule=_channel_shapes(None, 2)))
_register(LegacyOp("LayerNorm", ["data", "gamma", "beta"],
                   {"axis": (_I, -1), "eps": (_F, 1e-5), "output_mean_var": (_B, False)},
                   lambda x, p: npx.layer_norm(x[0], x[1], x[2], axis=p["axis"], eps=p["eps"]),
                   total_outputs=3, shape_rule=_channel_shapes("axis", 3)))
_register(LegacyOp("InstanceNorm", ["data", "gamma", "beta"], {"eps": (_F, 1e-3)},
                   lambda x, p: npx.instance_norm(x[0], x[1], x[2], eps=p["eps"]),
                   total_outputs=3, shape_rule=_channel_shapes(None, 3)))
_register(LegacyOp("GroupNorm", ["data", "gamma", "beta"],
                   {"num_groups": (_I, 1), "eps": (_F, 1e-5), "output_mean_var": (_B, False)},
                   lambda x, p: npx_more.group_norm_per_group(x[0], x[1], x[2],
                                                              num_groups=p["num_groups"],
                                                              eps=p["eps"]),
                   total_outputs=3,
                   shape_rule=lambda s, p: {1: (p["num_groups"],), 2: (p["num_groups"],)}))
_register(LegacyOp("Pad", ["data"],
                   {"mode": (_S, "constant"), "pad_width": ("shape", REQUIRED),
                    "constant_value": (_F, 0.0)}, _pad, aliases=("pad",)))
_register(LegacyOp("L2Normalization", ["data"], {"eps": (_F, 1e-10), "mode": (_S, "instance")},
                   lambda x, p: npx.l2_normalization(x[0], eps=p["eps"], mode=p["mode"])))

for _name, _fn in (("elemwise_add", F.add), ("elemwise_sub", F.subtract),
                   ("elemwise_mul", F.multiply), ("elemwise_div", F.divide)):
    _alias = {"elemwise_add": ("_plus", "_Plus", "_add"),
              "elemwise_sub": ("_minus", "_Minus", "_sub"),
              "elemwise_mul": ("_mul", "_Mul"), "elemwise_div": ("_div", "_Div")}[_name]
    _register(LegacyOp(_name, ["lhs", "rhs"], {}, _elemwise(_name, _fn), aliases=_alias,
                       shape_rule=_elemwise_shapes))
for _name, _fn in (("broadcast_add", F.add), ("broadcast_sub", F.subtract),
                   ("broadcast_mul", F.multiply), ("broadcast_div", F.divide),
                   ("broadcast_maximum", F.maximum), ("broadcast_minimum", F.minimum),
                   ("broadcast_power", F.power), ("_maximum", F.maximum),
                   ("_minimum", F.minimum), ("_power", F.power)):
    _register(LegacyOp(_name, ["lhs", "rhs"], {},
                       (lambda fn: lambda x, p: fn(x[0], x[1]))(_fn),
                       aliases={"broadcast_add": ("broadcast_plus",),
                                "broadcast_sub": ("broadcast_minus",)}.get(_name, ())))
_SCALAR = {"scalar": (_F, REQUIRED), "is_int": (_B, False)}
for _name, _fn in (("_plus_scalar", lambda a, s: a + s), ("_minus_scalar", lambda a, s: a - s),
                   ("_rminus_scalar", lambda a, s: s - a), ("_mul_scalar", lambda a, s: a * s),
                   ("_div_scalar", lambda a, s: a / s), ("_rdiv_scalar", lambda a, s: s / a),
                   ("_power_scalar", lambda a, s: a ** s),
                   ("_rpower_scalar", lambda a, s: F.power(s, a)),
                   ("_maximum_scalar", lambda a, s: F.maximum(a, s)),
                   ("_minimum_scalar", lambda a, s: F.minimum(a, s))):
    _register(LegacyOp(_name, ["data"], _SCALAR,
                       (lambda fn: lambda x, p: fn(x[0], _scalar_of(x[0], p["scalar"])))(_fn)))
for _name, _fn in (("relu", npx.relu), ("sigmoid", npx.sigmoid), ("tanh", F.tanh),
                   ("exp", F.exp), ("log", F.log), ("sqrt", F.sqrt), ("square", F.square),
                   ("abs", F.abs), ("negative", F.negative), ("softsign", npx.softsign),
                   ("sin", F.sin), ("cos", F.cos), ("log1p", F.log1p), ("expm1", F.expm1),
                   ("reciprocal", F.reciprocal), ("sign", F.sign), ("floor", F.floor),
                   ("ceil", F.ceil), ("round", F.round), ("erf", npx.erf),
                   ("rsqrt", lambda a: 1.0 / F.sqrt(a)), ("cbrt", F.cbrt)):
    _register(LegacyOp(_name, ["data"], {}, (lambda fn: lambda x, p: fn(x[0]))(_fn)))
_SOFTMAX = {"axis": (_I, -1), "temperature": ("opt_float", None), "dtype": ("dtype", None),
            "use_length": ("opt_bool", False)}
_register(LegacyOp("softmax", ["data"], _SOFTMAX, _softmax(npx.softmax)))
_register(LegacyOp("log_softmax", ["data"], _SOFTMAX, _softmax(npx.log_softmax)))
_register(LegacyOp("dot", ["lhs", "rhs"],
                   {"transpose_a": (_B, False), "transpose_b": (_B, False),
                    "forward_stype": ("opt_str", None)}, _dot))
_register(LegacyOp("batch_dot", ["lhs", "rhs"],
                   {"transpose_a": (_B, False), "transpose_b": (_B, False),
                    "forward_stype": ("opt_str", None)},
                   lambda x, p: npx.batch_dot(x[0], x[1], p["transpose_a"], p["transpose_b"])))
_register(LegacyOp("Reshape", ["data"],
                   {"shape": ("shape", ()), "reverse": (_B, False),
                    "target_shape": ("shape", ()), "keep_highest": (_B, False)}, _reshape,
                   aliases=("reshape",)))
_register(LegacyOp("transpose", ["data"], {"axes": ("shape", ())},
                   lambda x, p: F.transpose(x[0], p["axes"] or None)))
_REDUCE = {"axis": ("axis", None), "keepdims": (_B, False), "exclude": (_B, False)}
for _name, _fn in (("sum", F.sum), ("mean", F.mean), ("max", F.max), ("min", F.min),
                   ("prod", F.prod)):
    _register(LegacyOp(_name, ["data"], _REDUCE, _reduction(_fn),
                       aliases={"sum": ("sum_axis",)}.get(_name, ())))
_register(LegacyOp("norm", ["data"],
                   {"ord": (_I, 2), "axis": ("axis", None), "keepdims": (_B, False),
                    "out_dtype": ("opt_str", None)}, _norm))
_ARG = {"axis": ("axis", None), "keepdims": (_B, False)}
_register(LegacyOp("argmax", ["data"], _ARG, _arg_reduce(_onp.argmax)))
_register(LegacyOp("argmin", ["data"], _ARG, _arg_reduce(_onp.argmin)))
_register(LegacyOp("batch_take", ["a", "indices"], {}, _batch_take))
_register(LegacyOp("take", ["a", "indices"], {"axis": (_I, 0), "mode": (_S, "clip")}, _take))
_register(LegacyOp("one_hot", ["indices"],
                   {"depth": (_I, REQUIRED), "on_value": (_F, 1.0), "off_value": (_F, 0.0),
                    "dtype": ("dtype", "float32")},
                   lambda x, p: npx.one_hot(x[0], p["depth"], p["on_value"], p["off_value"],
                                            p["dtype"])))
_register(LegacyOp("stack", None, {"num_args": (_I, REQUIRED), "axis": (_I, 0)},
                   lambda x, p: F.stack(x, axis=p["axis"]), variadic=True))
_register(LegacyOp("zeros_like", ["data"], {}, lambda x, p: F.zeros_like(x[0])))
_register(LegacyOp("ones_like", ["data"], {}, lambda x, p: F.ones_like(x[0])))
_register(LegacyOp("reverse", ["data"], {"axis": ("shape", REQUIRED)},
                   lambda x, p: F.flip(x[0], axis=p["axis"]), aliases=("flip",)))
_register(LegacyOp("tile", ["data"], {"reps": ("shape", REQUIRED)},
                   lambda x, p: F.tile(x[0], p["reps"])))
_register(LegacyOp("repeat", ["data"], {"repeats": (_I, REQUIRED), "axis": ("axis", None)},
                   lambda x, p: F.repeat(x[0], p["repeats"], axis=p["axis"])))
_register(LegacyOp("SliceChannel", ["data"],
                   {"num_outputs": (_I, REQUIRED), "axis": (_I, 1),
                    "squeeze_axis": (_B, False)}, _split,
                   outputs=lambda p: p["num_outputs"], aliases=("split",)))
_register(LegacyOp("slice_axis", ["data"],
                   {"axis": (_I, REQUIRED), "begin": (_I, REQUIRED), "end": ("opt_int", None)},
                   _slice_axis))
_register(LegacyOp("expand_dims", ["data"], {"axis": (_I, REQUIRED)},
                   lambda x, p: F.expand_dims(x[0], p["axis"])))
_register(LegacyOp("Cast", ["data"], {"dtype": ("dtype", REQUIRED)},
                   lambda x, p: F.astype(x[0], p["dtype"]), aliases=("cast",)))
_register(LegacyOp("clip", ["data"], {"a_min": (_F, REQUIRED), "a_max": (_F, REQUIRED)},
                   lambda x, p: F.clip(x[0], p["a_min"], p["a_max"])))
_register(LegacyOp("SwapAxis", ["data"], {"dim1": (_I, 0), "dim2": (_I, 0)},
                   lambda x, p: F.swapaxes(x[0], p["dim1"], p["dim2"]), aliases=("swapaxes",)))
_register(LegacyOp("squeeze", ["data"], {"axis": ("axis", None)},
                   lambda x, p: F.squeeze(x[0], axis=p["axis"])))
_register(LegacyOp("broadcast_to", ["data"], {"shape": ("shape", REQUIRED)},
                   lambda x, p: F.broadcast_to(x[0], tuple(
                       d if d else s for d, s in zip(p["shape"], unwrap(x[0]).shape)))))
_register(LegacyOp("pick", ["data", "index"],
                   {"axis": ("axis", -1), "keepdims": (_B, False), "mode": (_S, "clip")},
                   lambda x, p: npx.pick(x[0], x[1], axis=p["axis"], keepdims=p["keepdims"],
                                         mode=p["mode"])))
_register(LegacyOp("smooth_l1", ["data"], {"scalar": (_F, 1.0)},
                   lambda x, p: npx.smooth_l1(x[0], p["scalar"])))
_register(LegacyOp("where", ["condition", "x", "y"], {},
                   lambda x, p: F.where(_onp.asarray(unwrap(x[0])) != 0, x[1], x[2])))
_register(LegacyOp("CTCLoss", lambda p: ["data", "label"]
                   + (["data_lengths"] if p["use_data_lengths"] else [])
                   + (["label_lengths"] if p["use_label_lengths"] else []),
                   {"use_data_lengths": (_B, False), "use_label_lengths": (_B, False),
                    "blank_label": (_S, "first")}, _ctc, total_outputs=2,
                   aliases=("ctc_loss", "_contrib_CTCLoss", "_contrib_ctc_loss")))
_register(LegacyOp("RNN", lambda p: rnn_input_names(p["mode"], p["use_sequence_length"]),
                   {"state_size": (_I, REQUIRED), "num_layers": (_I, REQUIRED),
                    "bidirectional": (_B, False), "mode": (_S, REQUIRED), "p": (_F, 0.0),
                    "state_outputs": (_B, False), "projection_size": ("opt_int", None),
                    "lstm_state_clip_min": ("opt_float", None),
                    "lstm_state_clip_max": ("opt_float", None),
                    "lstm_state_clip_nan": (_B, False), "use_sequence_length": (_B, False)},
                   lambda x, p: npx.rnn(*x[:3], **_rnn_optional_inputs(x, p), **p),
                   outputs=lambda p: (1 if not p["state_outputs"] else
                                      3 if p["mode"] == "lstm" else 2),
                   shape_rule=_rnn_shapes))
for _name, _fn in (("SequenceMask", lambda x, p: npx.sequence_mask(
                        x[0], x[1] if len(x) > 1 else None, p["use_sequence_length"],
                        p["value"], p["axis"])),
                   ("SequenceLast", lambda x, p: _rnn.sequence_last(
                       x[0], x[1] if len(x) > 1 else None, p["use_sequence_length"], p["axis"])),
                   ("SequenceReverse", lambda x, p: _rnn.sequence_reverse(
                       x[0], x[1] if len(x) > 1 else None, p["use_sequence_length"],
                       p["axis"]))):
    _register(LegacyOp(_name, lambda p: ["data"] + (["sequence_length"]
                                                    if p["use_sequence_length"] else []),
                       dict({"use_sequence_length": (_B, False), "axis": (_I, 0)},
                            **({"value": (_F, 0.0)} if _name == "SequenceMask" else {})),
                       _fn))
_CREATE = {"shape": ("shape", ()), "dtype": ("dtype", "float32"), "ctx": ("opt_str", None)}
_register(LegacyOp("_zeros", [], _CREATE,
                   lambda x, p: F.zeros(p["shape"], dtype=p["dtype"] or "float32")))
_register(LegacyOp("_ones", [], _CREATE,
                   lambda x, p: F.ones(p["shape"], dtype=p["dtype"] or "float32")))
del _name, _fn, _kind, _alias

# MXNet 2.x writes its NumPy operators under these names (same inputs and, for the scalar
# forms, the same ``scalar``/``is_int`` parameters); they read as their 1.x twins.
_MXNET2_NAMES = {
    "_npi_add": "broadcast_add", "_npi_subtract": "broadcast_sub",
    "_npi_multiply": "broadcast_mul", "_npi_true_divide": "broadcast_div",
    "_npi_power": "broadcast_power", "_npi_maximum": "broadcast_maximum",
    "_npi_minimum": "broadcast_minimum", "_npi_add_scalar": "_plus_scalar",
    "_npi_subtract_scalar": "_minus_scalar", "_npi_rsubtract_scalar": "_rminus_scalar",
    "_npi_multiply_scalar": "_mul_scalar", "_npi_true_divide_scalar": "_div_scalar",
    "_npi_rtrue_divide_scalar": "_rdiv_scalar", "_npi_power_scalar": "_power_scalar",
    "_npi_rpower_scalar": "_rpower_scalar", "_npi_absolute": "abs",
    "_npx_relu": "relu", "_npx_sigmoid": "sigmoid"}
_MXNET2_NAMES.update({"_npi_" + n: n for n in (
    "exp", "log", "sqrt", "square", "tanh", "sin", "cos", "negative", "sign", "floor", "ceil",
    "log1p", "expm1", "reciprocal", "cbrt")})
for _alias, _canonical in _MXNET2_NAMES.items():
    CATALOGUE[_alias] = CATALOGUE[_canonical]
del _alias, _canonical


def _rnn_optional_inputs(x, p):
    names = rnn_input_names(p["mode"], p["use_sequence_length"])
    return dict(zip(names[3:], x[3:]))


def _add_all(xs):
    out = xs[0]
    for x in xs[1:]:
        out = out + x
    return out


def _scalar_of(data, value):
    # MXNet keeps the array's dtype for scalar ops.
    return _onp.asarray(value, dtype=_onp.asarray(unwrap(data)).dtype)[()]



def functions():
    """``{'mx.<Name>': composite function}`` for every name and alias of the catalogue."""
    return {"mx." + op.name: op.function() for op in set(CATALOGUE.values())}
