"""The fused recurrent layers ``RNN``, ``LSTM`` and ``GRU`` (MXNet 1.9.1's ``gluon.rnn``), on
fastgrad's ``npx.rnn``.

Note [Fused layer parameters]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A layer keeps one Parameter per layer, direction and matrix, named as MXNet 1.9.1 names them:
``l0_i2h_weight``, ``l0_h2h_weight``, ``l0_i2h_bias``, ``l0_h2h_bias`` for the first layer's
forward direction, ``r0_...`` for its backward direction, ``l1_...`` for the second layer
(``lstm0_l0_i2h_weight`` in ``collect_params()``), plus ``l0_h2r_weight`` with an LSTM
projection. Each forward pass flattens them in the fused operator's order (every weight,
layer by layer and within a layer forward then backward, ``i2h`` before ``h2h`` before
``h2r``; then every bias in the same order: Note [RNN parameter layout] in
``fastgrad/_api/_rnn.py``) and concatenates them into the one vector ``RNN`` takes, so gradients
reach each Parameter through the concatenation. ``save_parameters`` keys them as MXNet 1.9.1
writes them (``_unfused.0.i2h_weight``, or ``_unfused.0.l_cell.i2h_weight`` when
bidirectional), so files move between the two both ways.

Called without states, a layer makes zero states (of the input's dtype) and returns only the
output, as MXNet does; its traced graph then has the states as inputs and the output alone as
output, as MXNet exports it. A hybridized layer called once with and once without states
traces again (MXNet would reuse the first graph).
"""

import re

from fastgrad import ndarray as _nd
from fastgrad import symbol as _sym
from fastgrad import numpy_extension as _npx
from fastgrad.gluon.block import HybridBlock
from fastgrad.gluon.parameter import tensor_types
from fastgrad.gluon.rnn import rnn_cell
from fastgrad.gluon.rnn.rnn_cell import symbolic_zeros, mx_reshape, mx_swapaxes

__all__ = ["RNN", "LSTM", "GRU"]

_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


class _RNNLayer(HybridBlock):
    """What RNN, LSTM and GRU share (Note [Fused layer parameters])."""

    def __init__(self, hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                 i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                 h2h_bias_initializer, mode, projection_size, h2r_weight_initializer,
                 lstm_state_clip_min, lstm_state_clip_max, lstm_state_clip_nan, dtype,
                 use_sequence_length=False, **kwargs):
        super().__init__(**kwargs)
        if layout not in ("TNC", "NTC"):
            raise ValueError("Invalid layout %s; must be one of ['TNC' or 'NTC']" % (layout,))
        self._hidden_size = hidden_size
        self._projection_size = projection_size if projection_size else None
        self._num_layers = num_layers
        self._mode = mode
        self._layout = layout
        self._dropout = dropout
        self._dir = 2 if bidirectional else 1
        self._input_size = input_size
        self._i2h_weight_initializer = i2h_weight_initializer
        self._h2h_weight_initializer = h2h_weight_initializer
        self._i2h_bias_initializer = i2h_bias_initializer
        self._h2h_bias_initializer = h2h_bias_initializer
        self._h2r_weight_initializer = h2r_weight_initializer
        self._lstm_state_clip_min = lstm_state_clip_min
        self._lstm_state_clip_max = lstm_state_clip_max
        self._lstm_state_clip_nan = lstm_state_clip_nan
        self._dtype = dtype
        self._use_sequence_length = use_sequence_length
        self.skip_states = None
        self._traced_skip_states = None
        self._gates = _GATES[mode]

        rows, size = self._gates * hidden_size, input_size
        state = self._projection_size or hidden_size
        for i in range(num_layers):
            for d in ["l", "r"][:self._dir]:
                self._register_layer_param("%s%d_i2h_weight" % (d, i), (rows, size),
                                           i2h_weight_initializer, dtype)
                self._register_layer_param("%s%d_h2h_weight" % (d, i), (rows, state),
                                           h2h_weight_initializer, dtype)
                self._register_layer_param("%s%d_i2h_bias" % (d, i), (rows,),
                                           i2h_bias_initializer, dtype)
                self._register_layer_param("%s%d_h2h_bias" % (d, i), (rows,),
                                           h2h_bias_initializer, dtype)
                if self._projection_size:
                    self._register_layer_param("%s%d_h2r_weight" % (d, i),
                                               (self._projection_size, hidden_size),
                                               h2r_weight_initializer, dtype)
            size = state * self._dir

    def _register_layer_param(self, name, shape, init, dtype):
        p = self.params.get(name, shape=shape, init=init, allow_deferred_init=True,
                            dtype=dtype)
        setattr(self, name, p)
        return p

    def __repr__(self):
        s = "{name}({mapping}, {layout}"
        if self._num_layers != 1:
            s += ", num_layers={num_layers}"
        if self._dropout != 0:
            s += ", dropout={dropout}"
        if self._dir == 2:
            s += ", bidirectional"
        s += ")"
        shape = self.l0_i2h_weight.shape
        mapping = "{0} -> {1}".format(shape[1] if shape[1] else None, shape[0] // self._gates)
        return s.format(name=type(self).__name__, mapping=mapping, layout=self._layout,
                        num_layers=self._num_layers, dropout=self._dropout)

    def _collect_params_with_prefix(self, prefix=""):
        # MXNet 1.9.1's structural names, kept from its unfused layers (save_parameters)
        if prefix:
            prefix += "."
        pattern = re.compile(r"(l|r)(\d+)_(i2h|h2h|h2r)_(weight|bias)\Z")
        bidirectional = self._dir == 2

        def convert(key):
            d, l, g, t = pattern.match(key).groups()
            if bidirectional:
                return "_unfused.{}.{}_cell.{}_{}".format(l, d, g, t)
            return "_unfused.{}.{}_{}".format(l, g, t)
        ret = {prefix + convert(key): value for key, value in self._reg_params.items()}
        for name, child in self._children.items():
            ret.update(child._collect_params_with_prefix(prefix + name))
        return ret

    def _state_shapes(self, batch_size):
        layers = self._num_layers * self._dir
        h = (layers, batch_size, self._projection_size or self._hidden_size)
        if self._mode == "lstm":
            return [h, (layers, batch_size, self._hidden_size)]
        return [h]

    def state_info(self, batch_size=0):
        """The shape, layout and dtype of each state."""
        return [{"shape": shape, "__layout__": "LNC", "dtype": self._dtype}
                for shape in self._state_shapes(batch_size)]

    def _unfuse(self):
        """The same network as a stack of cells sharing this layer's Parameters."""
        if self._projection_size:
            raise NotImplementedError("_unfuse does not support projection layer yet!")
        if self._lstm_state_clip_min is not None or self._lstm_state_clip_max is not None:
            raise NotImplementedError("_unfuse does not support state clipping yet!")
        hidden = self._hidden_size

        def make_cell(**kwargs):
            if self._mode in ("rnn_relu", "rnn_tanh"):
                return rnn_cell.RNNCell(hidden, activation=self._mode[4:], **kwargs)
            if self._mode == "lstm":
                return rnn_cell.LSTMCell(hidden, **kwargs)
            return rnn_cell.GRUCell(hidden, **kwargs)

        stack = rnn_cell.HybridSequentialRNNCell(prefix=self.prefix, params=self.params)
        with stack.name_scope():
            size = self._input_size
            for i in range(self._num_layers):
                kwargs = {"input_size": size,
                          "i2h_weight_initializer": self._i2h_weight_initializer,
                          "h2h_weight_initializer": self._h2h_weight_initializer,
                          "i2h_bias_initializer": self._i2h_bias_initializer,
                          "h2h_bias_initializer": self._h2h_bias_initializer}
                if self._dir == 2:
                    stack.add(rnn_cell.BidirectionalCell(make_cell(prefix="l%d_" % i, **kwargs),
                                                         make_cell(prefix="r%d_" % i, **kwargs)))
                else:
                    stack.add(make_cell(prefix="l%d_" % i, **kwargs))
                if self._dropout > 0 and i != self._num_layers - 1:
                    stack.add(rnn_cell.DropoutCell(self._dropout))
                size = hidden * self._dir
        return stack

    def cast(self, dtype):
        super().cast(dtype)
        self._dtype = dtype

    def begin_state(self, batch_size=0, func=_nd.zeros, **kwargs):
        """The initial states: ``func(name=..., shape=(layers * directions, batch_size,
        hidden), dtype=..., **kwargs)`` per state (``[h]``, or ``[h, c]`` for LSTM).

        Examples
        --------
        >>> import fastgrad as mx
        >>> layer = mx.gluon.rnn.LSTM(4, num_layers=2)
        >>> [s.shape for s in layer.begin_state(batch_size=3)]
        [(2, 3, 4), (2, 3, 4)]
        """
        infos = self.state_info(batch_size)
        names = ["%sh0_%d" % (self.prefix, i) for i in range(len(infos))]
        states = rnn_cell._make_states(func, infos, names, kwargs)
        if _npx.is_np_array_requested():
            states = [s.as_np_ndarray() if hasattr(s, "as_np_ndarray") else s for s in states]
        return states

    def __call__(self, inputs, states=None, sequence_length=None, **kwargs):
        self.skip_states = states is None
        if states is None:
            if isinstance(inputs, _sym.Symbol):
                batch_axis = self._layout.find("N")
                states = [symbolic_zeros(_sym, inputs, batch_axis, info["shape"])
                          for info in self.state_info(0)]
            else:
                batch_size = inputs.shape[self._layout.find("N")]
                states = self.begin_state(batch_size, dtype=inputs.dtype)
        if isinstance(states, tensor_types):
            states = [states]
        if self._traced_skip_states not in (None, self.skip_states):
            self._clear_cached_op()     # the traced graph returns the other form
        self._traced_skip_states = self.skip_states
        if self._use_sequence_length:
            return super().__call__(inputs, states, sequence_length, **kwargs)
        return super().__call__(inputs, states, **kwargs)

    def infer_shape(self, inputs, *args):
        """The input size from the inputs' last axis."""
        size = inputs.shape[2]
        for d in ["l", "r"][:self._dir]:
            param = getattr(self, "%s0_i2h_weight" % d)
            param.shape = (param.shape[0], size)

    def _check_arrays(self, inputs, states, i2h_weight):
        layout = self._layout
        if len(inputs.shape) != 3:
            raise ValueError("%s %s: the input must have 3 axes (layout %s), got shape %s"
                             % (type(self).__name__, self.name, layout, inputs.shape))
        if inputs.shape[2] != i2h_weight.shape[1]:
            raise ValueError("%s %s: the input has %d features (shape %s, layout %s) but %s "
                             "has shape %s, for %d input features"
                             % (type(self).__name__, self.name, inputs.shape[2], inputs.shape,
                                layout, self.l0_i2h_weight.name, i2h_weight.shape,
                                i2h_weight.shape[1]))
        batch_size = inputs.shape[layout.find("N")]
        infos = self.state_info(batch_size)
        if len(states) != len(infos):
            raise ValueError("%s %s: expected %d state(s), got %d" % (
                type(self).__name__, self.name, len(infos), len(states)))
        for state, info in zip(states, infos):
            if state.shape != info["shape"]:
                raise ValueError("Invalid recurrent state shape. Expecting %s, got %s."
                                 % (str(info["shape"]), str(state.shape)))

    def hybrid_forward(self, F, inputs, states, sequence_length=None, **kwargs):
        if F is _nd:
            self._check_arrays(inputs, states, kwargs["l0_i2h_weight"])
        out = self._forward_kernel(F, inputs, states, sequence_length, **kwargs)
        return out[0] if self.skip_states else out

    def _forward_kernel(self, F, inputs, states, sequence_length, **kwargs):
        if self._layout == "NTC":
            inputs = mx_swapaxes(F, inputs, 0, 1)
        matrices = ["i2h", "h2h", "h2r"] if self._projection_size else ["i2h", "h2h"]
        flat = [mx_reshape(F, kwargs["%s%d_%s_%s" % (d, l, g, t)], (-1,))
                for t in ["weight", "bias"]
                for l in range(self._num_layers)
                for d in ["l", "r"][:self._dir]
                for g in matrices
                if g != "h2r" or t != "bias"]
        params = F.concat(*flat, dim=0)
        rnn_args = list(states)
        if self._use_sequence_length:
            rnn_args.append(sequence_length)
        rnn = F.RNN(inputs, params, *rnn_args, use_sequence_length=self._use_sequence_length,
                    state_size=self._hidden_size, projection_size=self._projection_size,
                    num_layers=self._num_layers, bidirectional=self._dir == 2,
                    p=self._dropout, state_outputs=True, mode=self._mode,
                    lstm_state_clip_min=self._lstm_state_clip_min,
                    lstm_state_clip_max=self._lstm_state_clip_max,
                    lstm_state_clip_nan=self._lstm_state_clip_nan)
        if self._mode == "lstm":
            outputs, states = rnn[0], [rnn[1], rnn[2]]
        else:
            outputs, states = rnn[0], [rnn[1]]
        if self._layout == "NTC":
            outputs = mx_swapaxes(F, outputs, 0, 1)
        return outputs, states


class RNN(_RNNLayer):
    r"""A multi-layer Elman RNN: ``h_t = activation(W_i x_t + b_i + W_h h_{t-1} + b_h)`` per
    layer, ``activation`` ReLU or tanh.

    Called on ``data`` of shape ``(T, N, C)`` (layout TNC) and optionally ``states``, a list
    with one array of shape ``(num_layers * directions, N, hidden_size)``, it returns the
    output ``(T, N, directions * hidden_size)``, and the final states if states were given
    (the same for LSTM, with states ``[h, c]``, and GRU).

    Parameters
    ----------
    hidden_size : int
    num_layers : int, default 1
    activation : 'relu' or 'tanh', default 'relu'
    layout : 'TNC' or 'NTC', default 'TNC'
    dropout : float, default 0
        Dropout on the outputs of every layer but the last (training only).
    bidirectional : bool, default False
    i2h_weight_initializer, h2h_weight_initializer : Initializer or str, optional
    i2h_bias_initializer, h2h_bias_initializer : Initializer or str, default 'zeros'
    input_size : int, default 0 (inferred from the first input)
    dtype : str, default 'float32'
    prefix : str, optional
    params : ParameterDict, optional

    Examples
    --------
    >>> import fastgrad as mx
    >>> layer = mx.gluon.rnn.RNN(4, num_layers=2)
    >>> layer.initialize()
    >>> layer(mx.nd.ones((5, 3, 2))).shape
    (5, 3, 4)
    >>> out, states = layer(mx.nd.ones((5, 3, 2)), layer.begin_state(3))
    >>> states[0].shape
    (2, 3, 4)
    """

    def __init__(self, hidden_size, num_layers=1, activation="relu", layout="TNC", dropout=0,
                 bidirectional=False, i2h_weight_initializer=None,
                 h2h_weight_initializer=None, i2h_bias_initializer="zeros",
                 h2h_bias_initializer="zeros", input_size=0, dtype="float32", **kwargs):
        if activation not in ("relu", "tanh"):
            raise ValueError("RNN: activation must be 'relu' or 'tanh', got %r" % (activation,))
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "rnn_" + activation, None, None, None, None,
                         False, dtype, **kwargs)


class LSTM(_RNNLayer):
    r"""A multi-layer long short-term memory RNN (gates as :class:`LSTMCell`); states
    ``[h, c]``.

    Parameters
    ----------
    hidden_size : int
    num_layers : int, default 1
    layout : 'TNC' or 'NTC', default 'TNC'
    dropout : float, default 0
        Dropout on the outputs of every layer but the last (training only).
    bidirectional : bool, default False
    input_size : int, default 0 (inferred from the first input)
    i2h_weight_initializer, h2h_weight_initializer : Initializer or str, optional
    i2h_bias_initializer, h2h_bias_initializer : Initializer or str, default 'zeros'
    projection_size : int, optional
        Project the hidden state to this size (LSTMP; ``h`` then has this size).
    h2r_weight_initializer : Initializer or str, optional
    state_clip_min, state_clip_max : float, optional
        Clip the cell state to this range after every step.
    state_clip_nan : bool, default False
        Not supported (raises).
    dtype : str, default 'float32'
    prefix : str, optional
    params : ParameterDict, optional

    Examples
    --------
    >>> import fastgrad as mx
    >>> layer = mx.gluon.rnn.LSTM(4, layout='NTC', bidirectional=True)
    >>> layer.initialize()
    >>> layer(mx.nd.ones((3, 5, 2))).shape
    (3, 5, 8)
    """

    def __init__(self, hidden_size, num_layers=1, layout="TNC", dropout=0,
                 bidirectional=False, input_size=0, i2h_weight_initializer=None,
                 h2h_weight_initializer=None, i2h_bias_initializer="zeros",
                 h2h_bias_initializer="zeros", projection_size=None,
                 h2r_weight_initializer=None, state_clip_min=None, state_clip_max=None,
                 state_clip_nan=False, dtype="float32", **kwargs):
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "lstm", projection_size, h2r_weight_initializer,
                         state_clip_min, state_clip_max, state_clip_nan, dtype, **kwargs)


class GRU(_RNNLayer):
    r"""A multi-layer gated recurrent unit RNN (cuDNN's form, gates as :class:`GRUCell`).

    Parameters
    ----------
    hidden_size : int
    num_layers : int, default 1
    layout : 'TNC' or 'NTC', default 'TNC'
    dropout : float, default 0
        Dropout on the outputs of every layer but the last (training only).
    bidirectional : bool, default False
    input_size : int, default 0 (inferred from the first input)
    i2h_weight_initializer, h2h_weight_initializer : Initializer or str, optional
    i2h_bias_initializer, h2h_bias_initializer : Initializer or str, default 'zeros'
    dtype : str, default 'float32'
    prefix : str, optional
    params : ParameterDict, optional
    """

    def __init__(self, hidden_size, num_layers=1, layout="TNC", dropout=0,
                 bidirectional=False, input_size=0, i2h_weight_initializer=None,
                 h2h_weight_initializer=None, i2h_bias_initializer="zeros",
                 h2h_bias_initializer="zeros", dtype="float32", **kwargs):
        super().__init__(hidden_size, num_layers, layout, dropout, bidirectional, input_size,
                         i2h_weight_initializer, h2h_weight_initializer, i2h_bias_initializer,
                         h2h_bias_initializer, "gru", None, None, None, None, False, dtype,
                         **kwargs)
