"""MXNet's fused recurrent layer, ``npx.rnn`` (vanilla ReLU/tanh, LSTM, GRU; stacked and
bidirectional), with MXNet's flat parameter layout; a composition of table ops, so
differentiable to any order in the data, the parameters and the initial states.

Note [RNN parameter layout]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
``parameters`` is one flat vector, as MXNet (and cuDNN) lay it out: first every weight, for
each layer and, within a layer, each direction (forward, then backward): the input-to-hidden
matrix ``(G*H, in)`` then the hidden-to-hidden matrix ``(G*H, H)``; then every bias in the
same order: input-to-hidden ``(G*H,)`` then hidden-to-hidden ``(G*H,)``. ``G`` is the number
of gates (1 for vanilla, 4 for LSTM in the order input, forget, cell, output; 3 for GRU in
the order reset, update, new), ``in`` is the input size for the first layer and
``directions * H`` after it.

With ``projection_size=P`` (LSTM only, MXNet's LSTMP) each layer and direction also has a
hidden-to-projection matrix ``(P, H)`` after its hidden-to-hidden matrix, which is then
``(G*H, P)``; the state ``h`` has size ``P``, the next layer's input ``directions * P``, and
there is no projection bias.

Note [RNN steps]
~~~~~~~~~~~~~~~~
Per layer and direction, the input-to-hidden products of all steps are one matrix product
over the whole sequence, split once into steps: indexing ``proj[t]`` at every step instead
would give each step's backward a zero-filled gradient of the whole sequence, quadratic in
the sequence length (an LSTM of 35 steps, 2 layers, 128 units: 230 -> 100-165 ms per forward
and backward on one core, MXNet's kernel 84 ms). The hidden-to-hidden matrices are transposed
once, not at every step.

Note [RNN sequence lengths]
~~~~~~~~~~~~~~~~~~~~~~~~~~~
With ``use_sequence_length=True`` sequence ``n`` of the batch has ``sequence_length[n]``
valid steps (cuDNN's semantics, which MXNet 1.9.1 follows on GPU; its CPU kernel ignores the
lengths): a step at or past the length leaves that sequence's state unchanged and outputs
zeros, so the forward direction's final state is the state at the last valid step and the
backward direction starts at the last valid step. Steps are masked with ``where``, so the
gradients of padded steps are exactly zero.
"""

import numpy as _onp

from fastgrad._api import _functions as F
from fastgrad._core._array import unwrap
from fastgrad._ops._registry import REGISTRY as _P
from fastgrad._core._state import is_training

_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def _matrix_shapes(mode, input_size, hidden, layers, directions, projection=None):
    """Per layer and direction, the shapes of ``W_x``, ``W_h`` (and ``W_r``)."""
    gh = _GATES[mode] * hidden
    state = projection or hidden
    shapes = []
    for layer in range(layers):
        size = input_size if layer == 0 else directions * state
        for _ in range(directions):
            shapes.append([(gh, size), (gh, state)] + ([(projection, hidden)] if projection
                                                       else []))
    return shapes


def parameter_count(mode, input_size, hidden, layers, directions, projection=None):
    """The length of the flat parameter vector (Note [RNN parameter layout])."""
    shapes = _matrix_shapes(mode, input_size, hidden, layers, directions, projection)
    return sum(a * b for s in shapes for a, b in s) + 2 * _GATES[mode] * hidden * len(shapes)


def _unpack(parameters, mode, input_size, hidden, layers, directions, projection=None):
    """The per-layer, per-direction ``[W_x, W_h, b_x, b_h, W_r]`` views of the flat vector
    (``W_r`` is None without a projection)."""
    gh = _GATES[mode] * hidden
    shapes = _matrix_shapes(mode, input_size, hidden, layers, directions, projection)
    total = parameter_count(mode, input_size, hidden, layers, directions, projection)
    n = _onp.shape(unwrap(parameters))
    if n != (total,):
        raise ValueError("npx.rnn: parameters has shape %s; mode=%r with %d layer(s), %d "
                         "direction(s), input size %d and state size %d%s needs (%d,)"
                         % (n, mode, layers, directions, input_size, hidden,
                            " (projection size %d)" % projection if projection else "", total))
    out, at = [], 0
    for entry_shapes in shapes:
        entry = []
        for rows, cols in entry_shapes:
            entry.append(F.reshape(parameters[at:at + rows * cols], (rows, cols)))
            at += rows * cols
        out.append(entry)
    for entry in out:
        projection_weight = entry.pop() if projection else None
        entry.append(parameters[at:at + gh])
        entry.append(parameters[at + gh:at + 2 * gh])
        entry.append(projection_weight)
        at += 2 * gh
    return out


def _gates(z, k):
    return F.split(z, k, axis=-1)


def _step(mode, x_proj, h, c, wh_t, bh, wr_t=None, clip=None):
    """One time step from the projected input ``x_proj = W_x x + b_x``; ``wh_t`` and
    ``wr_t`` are the transposed hidden-to-hidden and projection matrices."""
    hp = F.matmul(h, wh_t) + bh
    if mode == "rnn_tanh":
        return F.tanh(x_proj + hp), None
    if mode == "rnn_relu":
        return _P["relu"](x_proj + hp), None
    if mode == "lstm":
        i, f, g, o = _gates(x_proj + hp, 4)
        c = _P["sigmoid"](f) * c + _P["sigmoid"](i) * F.tanh(g)
        if clip is not None:
            c = F.clip(c, clip[0], clip[1])
        h = _P["sigmoid"](o) * F.tanh(c)
        if wr_t is not None:
            h = F.matmul(h, wr_t)
        return h, c
    xr, xz, xn = _gates(x_proj, 3)
    hr, hz, hn = _gates(hp, 3)
    r = _P["sigmoid"](xr + hr)
    z = _P["sigmoid"](xz + hz)
    n = F.tanh(xn + r * hn)
    return (1 - z) * n + z * h, None


def _check_lengths(sequence_length, steps, batch):
    lengths = _onp.asarray(unwrap(sequence_length))
    if lengths.shape != (batch,):
        raise ValueError("npx.rnn: sequence_length has shape %s; the batch needs (%d,)"
                         % (lengths.shape, batch))
    lengths = lengths.astype(_onp.int64)
    if lengths.size and (lengths.min() < 1 or lengths.max() > steps):
        raise ValueError("npx.rnn: every sequence_length must be in [1, %d] (the number of "
                         "steps), got %s" % (steps, lengths.tolist()))
    return lengths


def _sequence_lengths(op, data, sequence_length, use_sequence_length, axis, allow_zero):
    """``(steps, batch, lengths as int64)`` for a Sequence* op on data whose time axis is
    ``axis`` (0 or 1) and batch axis the other of the first two."""
    shape = _onp.shape(unwrap(data))
    if axis not in (0, 1) or len(shape) < 2:
        raise ValueError("%s: axis must be 0 or 1 of data with at least 2 axes, got axis=%r "
                         "for shape %s" % (op, axis, shape))
    steps, batch = shape[axis], shape[1 - axis]
    if not use_sequence_length:
        return steps, batch, _onp.full(batch, steps, dtype=_onp.int64)
    if sequence_length is None:
        raise TypeError("%s() needs sequence_length when use_sequence_length is True" % op)
    lengths = _onp.asarray(unwrap(sequence_length))
    if lengths.shape != (batch,):
        raise ValueError("%s: sequence_length has shape %s; the batch needs (%d,)"
                         % (op, lengths.shape, batch))
    lengths = lengths.astype(_onp.int64)
    low = 0 if allow_zero else 1
    if lengths.size and (lengths.min() < low or lengths.max() > steps):
        raise ValueError("%s: every sequence_length must be in [%d, %d], got %s"
                         % (op, low, steps, lengths.tolist()))
    return steps, batch, lengths


def sequence_last(data, sequence_length=None, use_sequence_length=False, axis=0):
    """The last valid step of every sequence (MXNet's ``SequenceLast``): ``data`` without its
    time axis ``axis``; differentiable in ``data``."""
    steps, batch, lengths = _sequence_lengths("SequenceLast", data, sequence_length,
                                              use_sequence_length, axis, False)
    if axis == 0:
        return data[lengths - 1, _onp.arange(batch)]
    return data[_onp.arange(batch), lengths - 1]


def sequence_reverse(data, sequence_length=None, use_sequence_length=False, axis=0):
    """Every sequence's valid steps in reverse order, the padding left in place (MXNet's
    ``SequenceReverse``; time is axis 0); differentiable in ``data``."""
    if axis != 0:
        raise ValueError("SequenceReverse: axis must be 0 (the time axis), got %r" % (axis,))
    steps, batch, lengths = _sequence_lengths("SequenceReverse", data, sequence_length,
                                              use_sequence_length, 0, True)
    t = _onp.arange(steps)[:, None]
    source = _onp.where(t < lengths[None, :], lengths[None, :] - 1 - t, t)
    return data[source, _onp.arange(batch)[None, :]]


def make_rnn(dropout):
    """``npx.rnn`` with ``dropout(x, p)`` as the dropout between layers (``npx.dropout``, which
    lives in a layer above this module: Note [Layers] in ``_layers.py``)."""

    def rnn(data=None, parameters=None, state=None, state_cell=None, sequence_length=None,
            state_size=None, num_layers=None, bidirectional=False, mode=None, p=0.0,
            state_outputs=False, projection_size=None, lstm_state_clip_min=None,
            lstm_state_clip_max=None, lstm_state_clip_nan=False, use_sequence_length=False):
        """MXNet's fused recurrent layer (``npx.rnn``) on ``(T, N, I)`` data.

        Parameters
        ----------
        data : ndarray, shape (T, N, I)
        parameters : ndarray, flat, in MXNet's layout (Note [RNN parameter layout])
        state : ndarray, shape (num_layers * directions, N, state_size)
            (``projection_size`` instead of ``state_size`` with a projection)
        state_cell : ndarray, shape (num_layers * directions, N, state_size), LSTM only
        sequence_length : ndarray, shape (N,), used when ``use_sequence_length`` is True
            The number of valid steps of each sequence (Note [RNN sequence lengths]).
        mode : 'rnn_relu', 'rnn_tanh', 'lstm' or 'gru'
        p : float
            Dropout on the outputs of every layer but the last, in training mode only.
        state_outputs : bool
            Also return the final states (``[out, h]``, or ``[out, h, c]`` for LSTM).
        projection_size : int, optional
            LSTM only: project the hidden state to this size (LSTMP).
        lstm_state_clip_min, lstm_state_clip_max : float, optional
            LSTM only: clip the cell state to this range after every step.

        Returns
        -------
        ndarray of shape (T, N, directions * state_size), or a list with the final states.
        """
        return _run(dropout, data, parameters, state, state_cell, sequence_length,
                    state_size, num_layers, bidirectional, mode, p, state_outputs,
                    projection_size, lstm_state_clip_min, lstm_state_clip_max,
                    lstm_state_clip_nan, use_sequence_length)
    return rnn


def _run(dropout, data, parameters, state, state_cell, sequence_length, state_size,
         num_layers, bidirectional, mode, p, state_outputs, projection_size, clip_min,
         clip_max, clip_nan, use_sequence_length):
    for name, value in (("data", data), ("parameters", parameters), ("state", state),
                        ("state_size", state_size), ("num_layers", num_layers),
                        ("mode", mode)):
        if value is None:
            raise TypeError("npx.rnn() missing required argument %r" % name)
    if mode not in _GATES:
        raise ValueError("npx.rnn: mode must be 'rnn_relu', 'rnn_tanh', 'lstm' or 'gru', got "
                         "%r" % (mode,))
    if mode == "lstm" and state_cell is None:
        raise TypeError("npx.rnn() missing required argument 'state_cell' (mode='lstm')")
    if mode != "lstm" and (projection_size or clip_min is not None or clip_max is not None):
        raise ValueError("npx.rnn: projection_size and lstm_state_clip_min/max need "
                         "mode='lstm', got mode=%r" % (mode,))
    if (clip_min is None) != (clip_max is None):
        raise ValueError("npx.rnn: lstm_state_clip_min and lstm_state_clip_max go together")
    if clip_nan:
        raise NotImplementedError("npx.rnn: lstm_state_clip_nan is not supported")
    if use_sequence_length and sequence_length is None:
        raise TypeError("npx.rnn() missing required argument 'sequence_length' "
                        "(use_sequence_length=True)")
    if not 0 <= p < 1:
        raise ValueError("npx.rnn: p must be in [0, 1), got %r" % (p,))
    steps, batch, input_size = _onp.shape(unwrap(data))
    hidden, layers = int(state_size), int(num_layers)
    projection = int(projection_size) if projection_size else None
    clip = None if clip_min is None else (float(clip_min), float(clip_max))
    directions = 2 if bidirectional else 1
    weights = _unpack(parameters, mode, input_size, hidden, layers, directions, projection)
    # valid[t]: (N, 1) booleans, whether step t is within each sequence's length
    valid = None
    if use_sequence_length:
        lengths = _check_lengths(sequence_length, steps, batch)
        valid = _onp.arange(steps)[:, None, None] < lengths[None, :, None]
    layer_in = data
    final_h, final_c = [], []
    for layer in range(layers):
        if layer and p and is_training():
            layer_in = dropout(layer_in, p)
        outputs = []
        for d in range(directions):
            k = layer * directions + d
            wx, wh, bx, bh, wr = weights[k]
            h = state[k]
            c = state_cell[k] if mode == "lstm" else None
            # the input projections of all steps at once
            proj = F.matmul(layer_in, F.transpose(wx)) + bx
            # one split, not an index per step: each index's backward would fill a gradient
            # of the whole sequence (Note [RNN steps])
            proj = [F.reshape(p, p.shape[1:]) for p in F.split(proj, steps, axis=0)]
            # transposed once, so that every step's product reads the same matrix
            wh_t = F.transpose(wh)
            wr_t = None if wr is None else F.transpose(wr)
            order = range(steps) if d == 0 else range(steps - 1, -1, -1)
            hs = [None] * steps
            for t in order:
                h_new, c_new = _step(mode, proj[t], h, c, wh_t, bh, wr_t, clip)
                if valid is None:
                    h, c = h_new, c_new
                    hs[t] = h
                else:
                    h = F.where(valid[t], h_new, h)
                    if c is not None:
                        c = F.where(valid[t], c_new, c)
                    hs[t] = F.where(valid[t], h_new, 0.0)
            outputs.append(F.stack(hs, axis=0))
            final_h.append(h)
            final_c.append(c)
        layer_in = outputs[0] if directions == 1 else F.concatenate(outputs, axis=-1)
    if not state_outputs:
        return layer_in
    result = [layer_in, F.stack(final_h, axis=0)]
    if mode == "lstm":
        result.append(F.stack(final_c, axis=0))
    return result


__all__ = ["make_rnn", "parameter_count", "sequence_last", "sequence_reverse"]
