"""Recurrent cells (MXNet 1.9.1's ``gluon.rnn`` cells): one time step per call, ``unroll`` for
a whole sequence.

A cell is called as ``output, new_states = cell(x_t, states)`` on one step ``x_t`` of shape
``(batch, features)``; ``cell.unroll(length, inputs, ...)`` runs it over a sequence. The gate
order and parameter names (``i2h_weight``, ``h2h_weight``, ``i2h_bias``, ``h2h_bias``) are
MXNet's, so a cell holds exactly the parameters of one layer and direction of the fused
layers in ``rnn_layer.py``.

Note [Cells on nd and sym]
~~~~~~~~~~~~~~~~~~~~~~~~~~
Every computation here is written with ``F`` (``mx.nd`` on arrays, ``mx.sym`` on Symbols, as
MXNet 1.x does), using only operators whose ``nd`` and ``sym`` forms take the same
arguments: ``FullyConnected``, ``SliceChannel``, ``elemwise_*``, ``Activation``, ``stack``
given a list, ``concat``, ``split`` with ``num_outputs``, ``swapaxes`` with positional axes,
``SequenceMask``/``SequenceLast``/``SequenceReverse``. Node names (``t0_i2h``, ``t0_out``...,
so that a traced cell's outputs are named ``rnn_t0_out_output`` as in MXNet) are passed to
``sym`` only.

Note [Symbolic begin states]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
MXNet's begin states for Symbols are ``sym.zeros(shape=(0, hidden))``, whose ``0`` its shape
inference later fills with the batch size. fastgrad's Symbols have no unknown dimensions, so
``unroll`` on Symbols without ``begin_state`` builds zeros whose batch axis comes from the
input instead: a ``(batch, 1)`` column of ``zeros_like`` of the first step, reshaped and
tiled to the state's shape (the input's dtype, no value of it read). ``begin_state(func=
mx.sym.zeros)`` called by the user still gives MXNet's ``(0, hidden)`` zeros, which fastgrad
cannot bind: pass ``batch_size`` or use ``unroll`` without ``begin_state``.
"""

import inspect

import numpy as _onp

from fastgrad._core._array import unwrap as _unwrap, _wrap
from fastgrad import ndarray as _nd
from fastgrad import symbol as _sym
from fastgrad.symbol._api import legacy_op as _legacy_op
from fastgrad.gluon.block import Block, HybridBlock
from fastgrad.gluon.parameter import tensor_types, _indent

__all__ = ["RecurrentCell", "HybridRecurrentCell", "RNNCell", "LSTMCell", "GRUCell",
           "SequentialRNNCell", "HybridSequentialRNNCell", "DropoutCell", "ModifierCell",
           "ZoneoutCell", "ResidualCell", "BidirectionalCell"]


def _named(F, name):
    """``{'name': name}`` for ``sym`` operators (Note [Cells on nd and sym])."""
    return {"name": name} if F is _sym else {}


def _is_symbol(x):
    return isinstance(x, _sym.Symbol)


def _as_list(x):
    """A list of arrays or Symbols from one, a list, or a Symbol with several outputs."""
    if isinstance(x, (list, tuple)):
        return list(x)
    if _is_symbol(x) and len(x.list_outputs()) > 1:
        return list(x)
    return [x]


def _accepts_kwargs(func):
    try:
        params = inspect.signature(func).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _make_states(func, infos, names, kwargs):
    """``func(name=..., shape=..., **kwargs)`` per state info (MXNet's ``begin_state``);
    MXNet's ``__layout__`` hint is passed only to functions taking ``**kwargs``."""
    states = []
    for info, name in zip(infos, names):
        info = dict(info or {})
        info.update(kwargs)
        if not _accepts_kwargs(func):
            info.pop("__layout__", None)
        states.append(func(name=name, **info))
    return states


# MXNet's own operators on Symbols (not fastgrad's NumPy ones), so that an exported graph is
# MXNet's JSON (Note [Cells on nd and sym])
def mx_reshape(F, x, shape):
    return _legacy_op("Reshape")(x, shape=shape) if F is _sym else _nd.reshape(x, shape=shape)


def mx_tile(F, x, reps):
    return _legacy_op("tile")(x, reps=reps) if F is _sym else _nd.tile(x, reps)


def mx_swapaxes(F, x, dim1, dim2):
    return (_legacy_op("SwapAxis")(x, dim1=dim1, dim2=dim2) if F is _sym
            else _nd.swapaxes(x, dim1, dim2))


def mx_stack(F, items, axis):
    return _legacy_op("stack")(*items, axis=axis) if F is _sym else _nd.stack(items, axis=axis)


def mx_like(F, x, value, name=None):
    """Zeros or ones (``value``) shaped like ``x``: MXNet's ``zeros_like``/``ones_like`` on
    Symbols, an array of ``x``'s own type (``nd`` or ``np``) on arrays."""
    if F is _sym:
        return _legacy_op("ones_like" if value else "zeros_like")(x, **_named(F, name))
    return _wrap(_onp.full_like(_unwrap(x), value), type(x))


def symbolic_zeros(F, like, batch_axis, shape):
    """Zeros of ``shape`` (whose ``0`` marks the batch axis) with the batch size and dtype of
    the Symbol ``like`` (Note [Symbolic begin states])."""
    if batch_axis != 0:
        like = mx_swapaxes(F, like, 0, batch_axis)
    column = mx_like(F, F.slice_axis(mx_reshape(F, like, (0, -1)), axis=1, begin=0, end=1), 0)
    k = list(shape).index(0)
    column = mx_reshape(F, column, tuple(-1 if i == k else 1 for i in range(len(shape))))
    return mx_tile(F, column, tuple(1 if i == k else int(d) for i, d in enumerate(shape)))


def _cells_state_info(cells, batch_size):
    return sum([c.state_info(batch_size) for c in cells], [])


def _cells_begin_state(cells, **kwargs):
    return sum([c.begin_state(**kwargs) for c in cells], [])


def _get_begin_state(cell, F, begin_state, inputs, batch_size, layout="NTC"):
    """``begin_state`` or the cell's zero states for ``inputs``: a list of steps, or one
    array/Symbol in ``layout`` (Note [Symbolic begin states])."""
    if begin_state is not None:
        return begin_state
    steps = isinstance(inputs, (list, tuple))
    first = inputs[0] if steps else inputs
    if F is _nd:
        states = cell.begin_state(func=_nd.zeros, batch_size=batch_size, dtype=first.dtype)
        if not isinstance(first, _nd.NDArray):      # mx.np inputs get mx.np states
            states = [s.as_np_ndarray() for s in states]
        return states
    batch_axis = 0 if steps else layout.find("N")
    return [symbolic_zeros(F, first, batch_axis, info["shape"])
            for info in cell.state_info(0)]


def _format_sequence(length, inputs, layout, merge, in_layout=None):
    """``(inputs as merge asks, time axis, F, batch size)``: ``merge=False`` gives a list of
    steps, ``True`` one array/Symbol in ``layout``, ``None`` leaves the form as given."""
    if inputs is None:
        raise ValueError("unroll(inputs=None) is not supported: create the input arrays or "
                         "Symbols outside unroll")
    if layout not in ("NTC", "TNC"):
        raise ValueError("unroll: layout must be 'NTC' or 'TNC', got %r" % (layout,))
    axis = layout.find("T")
    batch_axis = layout.find("N")
    batch_size = 0
    in_axis = in_layout.find("T") if in_layout is not None else axis
    if _is_symbol(inputs):
        F = _sym
        if merge is False:
            if len(inputs.list_outputs()) != 1:
                raise ValueError("unroll doesn't allow grouped symbol as input. Please convert "
                                 "to list with list(inputs) first or let unroll handle "
                                 "splitting.")
            inputs = list(_sym.split(inputs, axis=in_axis, num_outputs=length,
                                     squeeze_axis=1))
    elif isinstance(inputs, tensor_types):
        F = _nd
        batch_size = inputs.shape[batch_axis]
        if merge is False:
            steps = inputs.shape[in_axis]
            if length is not None and length != steps:
                raise ValueError("unroll: length=%d but the inputs have %d steps along axis %d "
                                 "(layout %r, shape %s)" % (length, steps, in_axis, layout,
                                                            inputs.shape))
            inputs = _as_list(_nd.split(inputs, axis=in_axis, num_outputs=steps,
                                        squeeze_axis=1))
    else:
        inputs = list(inputs)
        if length is not None and len(inputs) != length:
            raise ValueError("unroll: length=%d but %d input steps were given"
                             % (length, len(inputs)))
        if _is_symbol(inputs[0]):
            F = _sym
        else:
            F = _nd
            batch_size = inputs[0].shape[0]
        if merge is True:
            inputs = mx_stack(F, inputs, axis)
            in_axis = axis
    if isinstance(inputs, tensor_types) and axis != in_axis:
        inputs = mx_swapaxes(F, inputs, axis, in_axis)
    return inputs, axis, F, batch_size


def _mask_sequence_variable_length(F, data, length, valid_length, time_axis, merge):
    """Steps past each sequence's valid length set to zero (a list of steps if not
    ``merge``)."""
    if not isinstance(data, tensor_types):
        data = mx_stack(F, list(data), time_axis)
    outputs = F.SequenceMask(data, sequence_length=valid_length, use_sequence_length=True,
                             axis=time_axis)
    if not merge:
        outputs = _as_list(F.split(outputs, num_outputs=length, axis=time_axis,
                                   squeeze_axis=True))
    return outputs


def _reverse_sequences(sequences, unroll_step, valid_length=None):
    """The list of steps reversed (only each sequence's valid steps, with ``valid_length``)."""
    F = _sym if _is_symbol(sequences[0]) else _nd
    if valid_length is None:
        return list(reversed(sequences))
    reversed_sequences = F.SequenceReverse(mx_stack(F, list(sequences), 0),
                                           sequence_length=valid_length,
                                           use_sequence_length=True)
    return _as_list(F.split(reversed_sequences, axis=0, num_outputs=unroll_step,
                            squeeze_axis=True))


class RecurrentCell(Block):
    """The base class of recurrent cells (MXNet's ``gluon.rnn.RecurrentCell``).

    Parameters
    ----------
    prefix : str, optional
        Prefix of the cell's parameter names.
    params : ParameterDict, optional
        Parameters to share (another cell's ``params``).
    """

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._modified = False
        self.reset()

    def reset(self):
        """Reset the step counters before using the cell for another sequence."""
        self._init_counter = -1
        self._counter = -1
        for cell in self._children.values():
            cell.reset()

    def state_info(self, batch_size=0):
        """The shape and layout of each state, as a list of dicts."""
        raise NotImplementedError()

    def _check_not_modified(self):
        if self._modified:
            raise AssertionError("After applying modifier cells (e.g. ZoneoutCell) the base "
                                 "cell cannot be called directly. Call the modifier cell "
                                 "instead.")

    def begin_state(self, batch_size=0, func=_nd.zeros, **kwargs):
        """The initial states: ``func(name=..., shape=(batch_size, ...), **kwargs)`` per
        state (``mx.nd.zeros`` by default; ``mx.nd.ones``, ``mx.sym.var``...).

        Examples
        --------
        >>> import fastgrad as mx
        >>> cell = mx.gluon.rnn.LSTMCell(4)
        >>> [s.shape for s in cell.begin_state(batch_size=2)]
        [(2, 4), (2, 4)]
        """
        self._check_not_modified()
        names = []
        infos = self.state_info(batch_size)
        for _ in infos:
            self._init_counter += 1
            names.append("%sbegin_state_%d" % (self._prefix, self._init_counter))
        return _make_states(func, infos, names, kwargs)

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        """Run the cell over ``length`` steps.

        Parameters
        ----------
        length : int
            Number of steps.
        inputs : array, Symbol, or list of them
            One array of shape ``(batch, length, ...)`` (``layout='NTC'``) or ``(length,
            batch, ...)`` (``'TNC'``), or a list of ``length`` steps of shape ``(batch,
            ...)``.
        begin_state : list, optional
            The initial states (default: zeros from :meth:`begin_state`).
        layout : 'NTC' or 'TNC'
        merge_outputs : bool, optional
            True: one array in ``layout``; False: a list of steps; None: whichever is
            natural.
        valid_length : array of shape (batch,), optional
            The number of valid steps of each sequence: outputs past it are zero and the
            returned states are those of its last valid step.

        Returns
        -------
        outputs, states
        """
        self.reset()
        inputs, axis, F, batch_size = _format_sequence(length, inputs, layout, False)
        states = _get_begin_state(self, F, begin_state, inputs, batch_size)
        outputs, all_states = [], []
        for i in range(length):
            output, states = self(inputs[i], states)
            outputs.append(output)
            if valid_length is not None:
                all_states.append(states)
        if valid_length is not None:
            states = [F.SequenceLast(mx_stack(F, list(step_states), 0),
                                     sequence_length=valid_length, use_sequence_length=True,
                                     axis=0)
                      for step_states in zip(*all_states)]
            outputs = _mask_sequence_variable_length(F, outputs, length, valid_length, axis,
                                                     True)
        outputs, _, _, _ = _format_sequence(length, outputs, layout, merge_outputs)
        return outputs, states

    def _get_activation(self, F, inputs, activation, **kwargs):
        """``activation`` (a name, or a callable such as a block) applied to ``inputs``."""
        func = {"tanh": F.tanh, "relu": F.relu, "sigmoid": F.sigmoid,
                "softsign": F.softsign}.get(activation)
        if func is not None:
            return func(inputs, **kwargs)
        if isinstance(activation, str):
            return F.Activation(inputs, act_type=activation, **kwargs)
        return activation(inputs)

    def forward(self, inputs, states):
        """One step: ``(output, new_states)``."""
        self._counter += 1
        return super().forward(inputs, states)


class HybridRecurrentCell(RecurrentCell, HybridBlock):
    """A recurrent cell that can be hybridized."""

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)

    def hybrid_forward(self, F, x, *args, **kwargs):
        raise NotImplementedError("%s must define hybrid_forward" % type(self).__name__)


def _step_features(inputs):
    """The number of input features of one step: ``inputs.shape[1:]`` flattened, as
    ``FullyConnected`` flattens them."""
    size = 1
    for d in inputs.shape[1:]:
        size *= int(d)
    return size


def _add_gate_weights(cell, rows, input_size, state_size, i2h_weight_initializer,
                      h2h_weight_initializer):
    """Register ``cell``'s ``i2h_weight`` ``(rows, input_size)`` and ``h2h_weight``
    ``(rows, state_size)`` (deferred while a size is 0)."""
    cell.i2h_weight = cell.params.get("i2h_weight", shape=(rows, input_size),
                                      init=i2h_weight_initializer, allow_deferred_init=True)
    cell.h2h_weight = cell.params.get("h2h_weight", shape=(rows, state_size),
                                      init=h2h_weight_initializer, allow_deferred_init=True)


def _add_gate_biases(cell, rows, i2h_bias_initializer, h2h_bias_initializer):
    """Register ``cell``'s ``i2h_bias`` and ``h2h_bias``, both ``(rows,)``."""
    cell.i2h_bias = cell.params.get("i2h_bias", shape=(rows,), init=i2h_bias_initializer,
                                    allow_deferred_init=True)
    cell.h2h_bias = cell.params.get("h2h_bias", shape=(rows,), init=h2h_bias_initializer,
                                    allow_deferred_init=True)


class _GatedCell(HybridRecurrentCell):
    """The parameters and checks shared by RNNCell, LSTMCell and GRUCell: ``gates`` blocks of
    ``hidden_size`` rows in ``i2h``/``h2h`` (Note [RNN parameter layout] in
    ``fastgrad/_api/_rnn.py``). Its constructor is GRUCell's (the others add arguments)."""

    _gates = 1
    _num_states = 1

    def __init__(self, hidden_size, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", input_size=0,
                 prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._hidden_size = hidden_size
        self._input_size = input_size
        rows = self._gates * hidden_size
        _add_gate_weights(self, rows, input_size, hidden_size, i2h_weight_initializer,
                          h2h_weight_initializer)
        _add_gate_biases(self, rows, i2h_bias_initializer, h2h_bias_initializer)

    def state_info(self, batch_size=0):
        return [{"shape": (batch_size, self._hidden_size), "__layout__": "NC"}
                for _ in range(self._num_states)]

    def infer_shape(self, inputs, states=None, *args):
        """The input size from the first step's features (``inputs.shape[1:]`` flattened, as
        ``FullyConnected`` does)."""
        self.i2h_weight.shape = (self.i2h_weight.shape[0], _step_features(inputs))

    def _mapping(self):
        shape = self.i2h_weight.shape
        return "{0} -> {1}".format(shape[1] if shape[1] else None, shape[0])

    def _check_input(self, F, inputs, i2h_weight):
        if F is _nd:
            size = _step_features(inputs)
            if size != i2h_weight.shape[1]:
                raise ValueError("%s %s: the input step has shape %s (%d features) but "
                                 "%si2h_weight has shape %s, for %d input features"
                                 % (type(self).__name__, self.name, inputs.shape, size,
                                    self.prefix, i2h_weight.shape, i2h_weight.shape[1]))

    def _projections(self, F, inputs, h, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        prefix = "t%d_" % self._counter
        rows = self._gates * self._hidden_size
        self._check_input(F, inputs, i2h_weight)
        i2h = F.FullyConnected(data=inputs, weight=i2h_weight, bias=i2h_bias, num_hidden=rows,
                               **_named(F, prefix + "i2h"))
        h2h = F.FullyConnected(data=h, weight=h2h_weight, bias=h2h_bias, num_hidden=rows,
                               **_named(F, prefix + "h2h"))
        return prefix, i2h, h2h


class RNNCell(_GatedCell):
    r"""Elman RNN cell: ``h_t = activation(W_i x_t + b_i + W_h h_{t-1} + b_h)``.

    Parameters
    ----------
    hidden_size : int
    activation : str or callable, default 'tanh'
    i2h_weight_initializer, h2h_weight_initializer : Initializer or str, optional
    i2h_bias_initializer, h2h_bias_initializer : Initializer or str, default 'zeros'
    input_size : int, default 0 (inferred from the first input)
    prefix : str, optional
    params : ParameterDict, optional

    Examples
    --------
    >>> import fastgrad as mx
    >>> cell = mx.gluon.rnn.RNNCell(3, input_size=2)
    >>> cell.initialize()
    >>> out, states = cell(mx.nd.ones((4, 2)), cell.begin_state(batch_size=4))
    >>> out.shape
    (4, 3)
    """

    def __init__(self, hidden_size, activation="tanh", i2h_weight_initializer=None,
                 h2h_weight_initializer=None, i2h_bias_initializer="zeros",
                 h2h_bias_initializer="zeros", input_size=0, prefix=None, params=None):
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer,
                         i2h_bias_initializer, h2h_bias_initializer, input_size, prefix, params)
        self._activation = activation

    def _alias(self):
        return "rnn"

    def __repr__(self):
        return "%s(%s, %s)" % (type(self).__name__, self._mapping(), self._activation)

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        prefix, i2h, h2h = self._projections(F, inputs, states[0], i2h_weight, h2h_weight,
                                             i2h_bias, h2h_bias)
        total = F.elemwise_add(i2h, h2h, **_named(F, prefix + "plus0"))
        output = self._get_activation(F, total, self._activation, **_named(F, prefix + "out"))
        return output, [output]


class LSTMCell(_GatedCell):
    r"""Long short-term memory cell, gates in MXNet's order (input, forget, cell, output):

    ``i, f, g, o = split(W_i x_t + b_i + W_h h_{t-1} + b_h, 4)``,
    ``c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)``, ``h_t = sigmoid(o) * tanh(c_t)``.
    States: ``[h, c]``.

    Parameters
    ----------
    hidden_size : int
    i2h_weight_initializer, h2h_weight_initializer : Initializer or str, optional
    i2h_bias_initializer, h2h_bias_initializer : Initializer or str, default 'zeros'
    input_size : int, default 0 (inferred from the first input)
    prefix : str, optional
    params : ParameterDict, optional
    activation : str, default 'tanh'
    recurrent_activation : str, default 'sigmoid'
    """

    _gates = 4
    _num_states = 2

    def __init__(self, hidden_size, i2h_weight_initializer=None, h2h_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", input_size=0,
                 prefix=None, params=None, activation="tanh", recurrent_activation="sigmoid"):
        super().__init__(hidden_size, i2h_weight_initializer, h2h_weight_initializer,
                         i2h_bias_initializer, h2h_bias_initializer, input_size, prefix, params)
        self._activation = activation
        self._recurrent_activation = recurrent_activation

    def _alias(self):
        return "lstm"

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, self._mapping())

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        prefix, i2h, h2h = self._projections(F, inputs, states[0], i2h_weight, h2h_weight,
                                             i2h_bias, h2h_bias)
        gates = F.elemwise_add(i2h, h2h, **_named(F, prefix + "plus0"))
        in_g, forget_g, cell_g, out_g = _as_list(
            F.SliceChannel(gates, num_outputs=4, **_named(F, prefix + "slice")))
        act, rec = self._activation, self._recurrent_activation
        in_gate = self._get_activation(F, in_g, rec, **_named(F, prefix + "i"))
        forget_gate = self._get_activation(F, forget_g, rec, **_named(F, prefix + "f"))
        in_transform = self._get_activation(F, cell_g, act, **_named(F, prefix + "c"))
        out_gate = self._get_activation(F, out_g, rec, **_named(F, prefix + "o"))
        next_c = F.elemwise_add(
            F.elemwise_mul(forget_gate, states[1], **_named(F, prefix + "mul0")),
            F.elemwise_mul(in_gate, in_transform, **_named(F, prefix + "mul1")),
            **_named(F, prefix + "state"))
        next_h = F.elemwise_mul(
            out_gate, F.Activation(next_c, act_type=act, **_named(F, prefix + "activation0")),
            **_named(F, prefix + "out"))
        return next_h, [next_h, next_c]


class GRUCell(_GatedCell):
    r"""Gated recurrent unit cell in cuDNN's form (the reset gate applied after the
    hidden-to-hidden product), gates in MXNet's order (reset, update, new):

    ``r = sigmoid(x_r + h_r)``, ``z = sigmoid(x_z + h_z)``, ``n = tanh(x_n + r * h_n)``,
    ``h_t = (1 - z) * n + z * h_{t-1}``, where ``x_* = W_i x_t + b_i`` and ``h_* = W_h
    h_{t-1} + b_h`` split in three.

    Parameters
    ----------
    hidden_size : int
    i2h_weight_initializer, h2h_weight_initializer : Initializer or str, optional
    i2h_bias_initializer, h2h_bias_initializer : Initializer or str, default 'zeros'
    input_size : int, default 0 (inferred from the first input)
    prefix : str, optional
    params : ParameterDict, optional
    """

    _gates = 3

    def _alias(self):
        return "gru"

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, self._mapping())

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, i2h_bias, h2h_bias):
        prev_h = states[0]
        prefix, i2h, h2h = self._projections(F, inputs, prev_h, i2h_weight, h2h_weight,
                                             i2h_bias, h2h_bias)
        i2h_r, i2h_z, i2h_n = _as_list(F.SliceChannel(i2h, num_outputs=3,
                                                      **_named(F, prefix + "i2h_slice")))
        h2h_r, h2h_z, h2h_n = _as_list(F.SliceChannel(h2h, num_outputs=3,
                                                      **_named(F, prefix + "h2h_slice")))
        reset_gate = F.Activation(F.elemwise_add(i2h_r, h2h_r, **_named(F, prefix + "plus0")),
                                  act_type="sigmoid", **_named(F, prefix + "r_act"))
        update_gate = F.Activation(F.elemwise_add(i2h_z, h2h_z, **_named(F, prefix + "plus1")),
                                   act_type="sigmoid", **_named(F, prefix + "z_act"))
        candidate = F.Activation(
            F.elemwise_add(i2h_n, F.elemwise_mul(reset_gate, h2h_n,
                                                 **_named(F, prefix + "mul0")),
                           **_named(F, prefix + "plus2")),
            act_type="tanh", **_named(F, prefix + "h_act"))
        ones = mx_like(F, update_gate, 1, prefix + "ones_like0")
        next_h = F.elemwise_add(
            F.elemwise_mul(F.elemwise_sub(ones, update_gate, **_named(F, prefix + "minus0")),
                           candidate, **_named(F, prefix + "mul1")),
            F.elemwise_mul(update_gate, prev_h, **_named(F, prefix + "mul20")),
            **_named(F, prefix + "out"))
        return next_h, [next_h]


class _StackMixin:
    """What SequentialRNNCell and HybridSequentialRNNCell share: a stack of cells, each
    taking the previous one's outputs, with their states concatenated in order."""

    def __repr__(self):
        return "{name}(\n{modstr}\n)".format(
            name=type(self).__name__,
            modstr="\n".join("({i}): {m}".format(i=i, m=_indent(repr(m), 2))
                             for i, m in self._children.items()))

    def add(self, cell):
        """Append ``cell`` to the stack."""
        self.register_child(cell)

    def state_info(self, batch_size=0):
        return _cells_state_info(self._children.values(), batch_size)

    def begin_state(self, **kwargs):
        self._check_not_modified()
        return _cells_begin_state(self._children.values(), **kwargs)

    def _step(self, inputs, states):
        self._counter += 1
        next_states = []
        p = 0
        for cell in self._children.values():
            if isinstance(cell, BidirectionalCell):
                raise NotImplementedError("%s: a BidirectionalCell in the stack cannot be "
                                          "stepped; use unroll" % type(self).__name__)
            n = len(cell.state_info())
            inputs, state = cell(inputs, states[p:p + n])
            p += n
            next_states.append(state)
        return inputs, sum(next_states, [])

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        self.reset()
        inputs, _, F, batch_size = _format_sequence(length, inputs, layout, None)
        num_cells = len(self._children)
        begin_state = _get_begin_state(self, F, begin_state, inputs, batch_size, layout)
        p = 0
        next_states = []
        for i, cell in enumerate(self._children.values()):
            n = len(cell.state_info())
            states = begin_state[p:p + n]
            p += n
            inputs, states = cell.unroll(length, inputs=inputs, begin_state=states,
                                         layout=layout,
                                         merge_outputs=None if i < num_cells - 1
                                         else merge_outputs,
                                         valid_length=valid_length)
            next_states.extend(states)
        return inputs, next_states

    def __getitem__(self, i):
        return self._children[str(i)]

    def __len__(self):
        return len(self._children)


class SequentialRNNCell(_StackMixin, RecurrentCell):
    """A stack of recurrent cells run one after the other (``add`` appends one)."""

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)

    def __call__(self, inputs, states):
        return self._step(inputs, states)


class HybridSequentialRNNCell(_StackMixin, HybridRecurrentCell):
    """A stack of hybridizable recurrent cells run one after the other."""

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)

    def __call__(self, inputs, states):
        return self._step(inputs, states)

    def hybrid_forward(self, F, inputs, states):
        return self._step(inputs, states)


class DropoutCell(HybridRecurrentCell):
    """Dropout on the inputs (training mode only); states pass through.

    Parameters
    ----------
    rate : float
        The fraction of elements dropped.
    axes : tuple of int, default ()
        Axes along which the dropout mask is shared.
    """

    def __init__(self, rate, axes=(), prefix=None, params=None):
        super().__init__(prefix, params)
        if isinstance(rate, bool) or not isinstance(rate, (int, float)):
            raise TypeError("DropoutCell: rate must be a number, got %r" % (rate,))
        self._rate = rate
        self._axes = axes

    def __repr__(self):
        return "%s(rate=%s, axes=%s)" % (type(self).__name__, self._rate, self._axes)

    def state_info(self, batch_size=0):
        return []

    def _alias(self):
        return "dropout"

    def hybrid_forward(self, F, inputs, states):
        if self._rate > 0:
            inputs = F.Dropout(data=inputs, p=self._rate, axes=self._axes,
                               **_named(F, "t%d_fwd" % self._counter))
        return inputs, states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        self.reset()
        inputs, _, F, _ = _format_sequence(length, inputs, layout, merge_outputs)
        if isinstance(inputs, tensor_types):
            return self.hybrid_forward(F, inputs, begin_state if begin_state else [])
        return super().unroll(length, inputs, begin_state=begin_state, layout=layout,
                              merge_outputs=merge_outputs, valid_length=None)


class ModifierCell(HybridRecurrentCell):
    """The base class of cells that modify another cell (``base_cell``), which must then be
    used only through the modifier."""

    def __init__(self, base_cell):
        if base_cell._modified:
            raise AssertionError("Cell %s is already modified. One cell cannot be modified "
                                 "twice" % base_cell.name)
        base_cell._modified = True
        super().__init__(prefix=base_cell.prefix + self._alias(), params=None)
        self.base_cell = base_cell

    @property
    def params(self):
        return self.base_cell.params

    def state_info(self, batch_size=0):
        return self.base_cell.state_info(batch_size)

    def begin_state(self, func=_nd.zeros, **kwargs):
        self._check_not_modified()
        self.base_cell._modified = False
        try:
            return self.base_cell.begin_state(func=func, **kwargs)
        finally:
            self.base_cell._modified = True

    def hybrid_forward(self, F, inputs, states):
        raise NotImplementedError("%s must define hybrid_forward" % type(self).__name__)

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, self.base_cell)


class ZoneoutCell(ModifierCell):
    """Zoneout (Krueger et al., 2016) on a base cell: in training, each output and state
    element keeps its previous value with probability ``zoneout_outputs`` /
    ``zoneout_states``."""

    def __init__(self, base_cell, zoneout_outputs=0., zoneout_states=0.):
        if isinstance(base_cell, BidirectionalCell):
            raise AssertionError("BidirectionalCell doesn't support zoneout since it doesn't "
                                 "support step. Please add ZoneoutCell to the cells underneath "
                                 "instead.")
        super().__init__(base_cell)
        self.zoneout_outputs = zoneout_outputs
        self.zoneout_states = zoneout_states
        self._prev_output = None

    def __repr__(self):
        return "%s(p_out=%s, p_state=%s, %s)" % (type(self).__name__, self.zoneout_outputs,
                                                 self.zoneout_states, self.base_cell)

    def _alias(self):
        return "zoneout"

    def reset(self):
        super().reset()
        self._prev_output = None

    def hybrid_forward(self, F, inputs, states):
        p_outputs, p_states = self.zoneout_outputs, self.zoneout_states
        next_output, next_states = self.base_cell(inputs, states)

        def mask(p, like):
            # 1/(1-p) where kept, 0 where dropped (training mode only): where() keeps the new
            # value where the mask is nonzero
            return F.Dropout(mx_like(F, like, 1), p=p)

        prev_output = self._prev_output
        if prev_output is None:
            prev_output = mx_like(F, next_output, 0)
        output = (F.where(mask(p_outputs, next_output), next_output, prev_output)
                  if p_outputs != 0. else next_output)
        states = ([F.where(mask(p_states, new_s), new_s, old_s)
                   for new_s, old_s in zip(next_states, states)]
                  if p_states != 0. else next_states)
        self._prev_output = output
        return output, states


class ResidualCell(ModifierCell):
    """The base cell's output plus its input (Wu et al., 2016)."""

    def __init__(self, base_cell):
        super().__init__(base_cell)

    def hybrid_forward(self, F, inputs, states):
        output, states = self.base_cell(inputs, states)
        output = F.elemwise_add(output, inputs, **_named(F, "t%d_fwd" % self._counter))
        return output, states

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        self.reset()
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(length, inputs=inputs,
                                                    begin_state=begin_state, layout=layout,
                                                    merge_outputs=merge_outputs,
                                                    valid_length=valid_length)
        finally:
            self.base_cell._modified = True
        if merge_outputs is None:
            merge_outputs = isinstance(outputs, tensor_types)
        inputs, axis, F, _ = _format_sequence(length, inputs, layout, merge_outputs)
        if valid_length is not None:
            inputs = _mask_sequence_variable_length(F, inputs, length, valid_length, axis,
                                                    merge_outputs)
        if merge_outputs:
            outputs = F.elemwise_add(outputs, inputs)
        else:
            outputs = [F.elemwise_add(i, j) for i, j in zip(outputs, inputs)]
        return outputs, states


class BidirectionalCell(HybridRecurrentCell):
    """A forward cell ``l_cell`` and a backward cell ``r_cell`` over the same sequence, their
    outputs concatenated on the feature axis (``unroll`` only: it cannot be stepped).

    Parameters
    ----------
    l_cell : RecurrentCell
        Runs forward in time.
    r_cell : RecurrentCell
        Runs backward in time.
    output_prefix : str, default ``'bi_'``
    """

    def __init__(self, l_cell, r_cell, output_prefix="bi_"):
        super().__init__(prefix="", params=None)
        self.register_child(l_cell, "l_cell")
        self.register_child(r_cell, "r_cell")
        self._output_prefix = output_prefix

    def __call__(self, inputs, states):
        raise NotImplementedError("Bidirectional cannot be stepped. Please use unroll")

    def __repr__(self):
        return "%s(forward=%s, backward=%s)" % (type(self).__name__, self._children["l_cell"],
                                                self._children["r_cell"])

    def state_info(self, batch_size=0):
        return _cells_state_info(self._children.values(), batch_size)

    def begin_state(self, **kwargs):
        self._check_not_modified()
        return _cells_begin_state(self._children.values(), **kwargs)

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        self.reset()
        inputs, axis, F, batch_size = _format_sequence(length, inputs, layout, False)
        reversed_inputs = list(_reverse_sequences(inputs, length, valid_length))
        states = _get_begin_state(self, F, begin_state, inputs, batch_size)
        l_cell, r_cell = self._children.values()
        n_left = len(l_cell.state_info(batch_size))
        l_outputs, l_states = l_cell.unroll(length, inputs=inputs, begin_state=states[:n_left],
                                            layout=layout, merge_outputs=merge_outputs,
                                            valid_length=valid_length)
        r_outputs, r_states = r_cell.unroll(length, inputs=reversed_inputs,
                                            begin_state=states[n_left:], layout=layout,
                                            merge_outputs=False, valid_length=valid_length)
        reversed_r_outputs = _reverse_sequences(r_outputs, length, valid_length)
        if merge_outputs is None:
            merge_outputs = isinstance(l_outputs, tensor_types)
            l_outputs, _, _, _ = _format_sequence(None, l_outputs, layout, merge_outputs)
            reversed_r_outputs, _, _, _ = _format_sequence(None, reversed_r_outputs, layout,
                                                           merge_outputs)
        if merge_outputs:
            reversed_r_outputs = mx_stack(F, list(reversed_r_outputs), axis)
            outputs = F.concat(l_outputs, reversed_r_outputs, dim=2,
                               **_named(F, "%sout" % self._output_prefix))
        else:
            outputs = [F.concat(l_o, r_o, dim=1,
                                **_named(F, "%st%d" % (self._output_prefix, i)))
                       for i, (l_o, r_o) in enumerate(zip(l_outputs, reversed_r_outputs))]
        if valid_length is not None:
            outputs = _mask_sequence_variable_length(F, outputs, length, valid_length, axis,
                                                     merge_outputs)
        return outputs, l_states + r_states
