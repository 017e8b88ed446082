"""Recurrent cells of MXNet 1.9.1's ``gluon.contrib.rnn``: variational dropout and the
projected LSTM cell (written with ``F`` as the cells of ``gluon.rnn``: Note [Cells on nd and
sym] in ``fastgrad/gluon/rnn/rnn_cell.py``)."""

from fastgrad.gluon.parameter import tensor_types
from fastgrad.gluon.rnn.rnn_cell import (BidirectionalCell, ModifierCell, HybridRecurrentCell,
                                         _format_sequence, _get_begin_state, _named, _as_list,
                                         _mask_sequence_variable_length, mx_like,
                                         _add_gate_biases, _add_gate_weights, _step_features)

__all__ = ["VariationalDropoutCell", "LSTMPCell"]


class VariationalDropoutCell(ModifierCell):
    """Variational dropout (Gal and Ghahramani, 2016) on a base cell: one dropout mask per
    sequence, shared by all its steps, for the inputs, the first state and the outputs
    (training mode only). The masks are drawn at the first step and kept until ``reset()``
    (``unroll`` resets).

    Parameters
    ----------
    base_cell : RecurrentCell
    drop_inputs, drop_states, drop_outputs : float, default 0
        Dropout rates (0: none).
    """

    def __init__(self, base_cell, drop_inputs=0., drop_states=0., drop_outputs=0.):
        if drop_states and isinstance(base_cell, BidirectionalCell):
            raise AssertionError("BidirectionalCell doesn't support variational state dropout. "
                                 "Please add VariationalDropoutCell to the cells underneath "
                                 "instead.")
        super().__init__(base_cell)
        self.drop_inputs = drop_inputs
        self.drop_states = drop_states
        self.drop_outputs = drop_outputs
        self.drop_inputs_mask = None
        self.drop_states_mask = None
        self.drop_outputs_mask = None

    def _alias(self):
        return "vardrop"

    def reset(self):
        super().reset()
        self.drop_inputs_mask = None
        self.drop_states_mask = None
        self.drop_outputs_mask = None

    def hybrid_forward(self, F, inputs, states):
        if self.drop_states and self.drop_states_mask is None:
            self.drop_states_mask = F.Dropout(mx_like(F, states[0], 1), p=self.drop_states)
        if self.drop_inputs and self.drop_inputs_mask is None:
            self.drop_inputs_mask = F.Dropout(mx_like(F, inputs, 1), p=self.drop_inputs)
        if self.drop_states:
            states = list(states)
            states[0] = states[0] * self.drop_states_mask
        if self.drop_inputs:
            inputs = inputs * self.drop_inputs_mask
        next_output, next_states = self.base_cell(inputs, states)
        if self.drop_outputs and self.drop_outputs_mask is None:
            self.drop_outputs_mask = F.Dropout(mx_like(F, next_output, 1), p=self.drop_outputs)
        if self.drop_outputs:
            next_output = next_output * self.drop_outputs_mask
        return next_output, next_states

    def __repr__(self):
        return "%s(p_out = %s, p_state = %s)" % (type(self).__name__, self.drop_outputs,
                                                 self.drop_states)

    def unroll(self, length, inputs, begin_state=None, layout="NTC", merge_outputs=None,
               valid_length=None):
        """As :meth:`RecurrentCell.unroll`; without state dropout, the input and output
        masks are applied to the whole sequence at once (shared along the time axis)."""
        if self.drop_states:
            return super().unroll(length, inputs, begin_state, layout, merge_outputs,
                                  valid_length=valid_length)
        self.reset()
        inputs, axis, F, batch_size = _format_sequence(length, inputs, layout, True)
        states = _get_begin_state(self, F, begin_state, inputs, batch_size, layout)
        if self.drop_inputs:
            inputs = F.Dropout(inputs, p=self.drop_inputs, axes=(axis,))
        self.base_cell._modified = False
        try:
            outputs, states = self.base_cell.unroll(length, inputs, states, layout,
                                                    merge_outputs=True,
                                                    valid_length=valid_length)
        finally:
            self.base_cell._modified = True
        if self.drop_outputs:
            outputs = F.Dropout(outputs, p=self.drop_outputs, axes=(axis,))
        if merge_outputs is None:
            merge_outputs = isinstance(outputs, tensor_types)
        outputs, _, _, _ = _format_sequence(length, outputs, layout, merge_outputs)
        if valid_length is not None:
            outputs = _mask_sequence_variable_length(F, outputs, length, valid_length, axis,
                                                     merge_outputs)
        return outputs, states


class LSTMPCell(HybridRecurrentCell):
    r"""LSTM cell with a projection (Sak et al., 2014): the LSTM step of :class:`LSTMCell`
    on the projected state ``r_{t-1}``, then ``r_t = W_{hr} h_t``. States: ``[r, c]`` of
    sizes ``projection_size`` and ``hidden_size``; the output is ``r_t``.

    Parameters
    ----------
    hidden_size : int
    projection_size : int
    i2h_weight_initializer, h2h_weight_initializer, h2r_weight_initializer : optional
    i2h_bias_initializer, h2h_bias_initializer : default 'zeros'
    input_size : int, default 0 (inferred from the first input)
    prefix : str, optional
    params : ParameterDict, optional
    """

    def __init__(self, hidden_size, projection_size, i2h_weight_initializer=None,
                 h2h_weight_initializer=None, h2r_weight_initializer=None,
                 i2h_bias_initializer="zeros", h2h_bias_initializer="zeros", input_size=0,
                 prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._hidden_size = hidden_size
        self._input_size = input_size
        self._projection_size = projection_size
        rows = 4 * hidden_size
        # MXNet's order of the parameters: h2r_weight between the weights and the biases.
        _add_gate_weights(self, rows, input_size, projection_size, i2h_weight_initializer,
                          h2h_weight_initializer)
        self.h2r_weight = self.params.get("h2r_weight", shape=(projection_size, hidden_size),
                                          init=h2r_weight_initializer,
                                          allow_deferred_init=True)
        _add_gate_biases(self, rows, i2h_bias_initializer, h2h_bias_initializer)

    def state_info(self, batch_size=0):
        return [{"shape": (batch_size, self._projection_size), "__layout__": "NC"},
                {"shape": (batch_size, self._hidden_size), "__layout__": "NC"}]

    def _alias(self):
        return "lstmp"

    def __repr__(self):
        shape = self.i2h_weight.shape
        return "%s(%s -> %s -> %s)" % (type(self).__name__, shape[1] if shape[1] else None,
                                       shape[0], self.h2r_weight.shape[0])

    def infer_shape(self, inputs, states=None, *args):
        self.i2h_weight.shape = (self.i2h_weight.shape[0], _step_features(inputs))

    def hybrid_forward(self, F, inputs, states, i2h_weight, h2h_weight, h2r_weight, i2h_bias,
                       h2h_bias):
        prefix = "t%d_" % self._counter
        rows = 4 * self._hidden_size
        i2h = F.FullyConnected(data=inputs, weight=i2h_weight, bias=i2h_bias, num_hidden=rows,
                               **_named(F, prefix + "i2h"))
        h2h = F.FullyConnected(data=states[0], weight=h2h_weight, bias=h2h_bias,
                               num_hidden=rows, **_named(F, prefix + "h2h"))
        gates = i2h + h2h
        in_g, forget_g, cell_g, out_g = _as_list(
            F.SliceChannel(gates, num_outputs=4, **_named(F, prefix + "slice")))
        in_gate = F.Activation(in_g, act_type="sigmoid", **_named(F, prefix + "i"))
        forget_gate = F.Activation(forget_g, act_type="sigmoid", **_named(F, prefix + "f"))
        in_transform = F.Activation(cell_g, act_type="tanh", **_named(F, prefix + "c"))
        out_gate = F.Activation(out_g, act_type="sigmoid", **_named(F, prefix + "o"))
        next_c = F.elemwise_add(forget_gate * states[1], in_gate * in_transform,
                                **_named(F, prefix + "state"))
        hidden = F.elemwise_mul(out_gate, F.Activation(next_c, act_type="tanh"),
                                **_named(F, prefix + "hidden"))
        next_r = F.FullyConnected(data=hidden, num_hidden=self._projection_size,
                                  weight=h2r_weight, no_bias=True, **_named(F, prefix + "out"))
        return next_r, [next_r, next_c]
