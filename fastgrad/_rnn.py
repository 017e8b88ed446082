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
"""

import numpy as _onp

from fastgrad import _functions as F
from fastgrad._array import unwrap
from fastgrad._registry import REGISTRY as _P
from fastgrad._state import is_training

_GATES = {"rnn_relu": 1, "rnn_tanh": 1, "lstm": 4, "gru": 3}


def _unpack(parameters, mode, input_size, hidden, layers, directions):
    """The per-layer, per-direction ``(W_x, W_h, b_x, b_h)`` views of the flat vector."""
    gh = _GATES[mode] * hidden
    shapes = []
    for layer in range(layers):
        size = input_size if layer == 0 else directions * hidden
        for _ in range(directions):
            shapes.append(((gh, size), (gh, hidden)))
    total = sum(a[0] * a[1] + b[0] * b[1] for a, b in shapes) + 2 * gh * len(shapes)
    n = _onp.shape(unwrap(parameters))
    if n != (total,):
        raise ValueError("npx.rnn: parameters has shape %s; mode=%r with %d layer(s), %d "
                         "direction(s), input size %d and state size %d needs (%d,)"
                         % (n, mode, layers, directions, input_size, hidden, total))
    out, at = [], 0
    for wx, wh in shapes:
        a = F.reshape(parameters[at:at + wx[0] * wx[1]], wx)
        at += wx[0] * wx[1]
        b = F.reshape(parameters[at:at + wh[0] * wh[1]], wh)
        at += wh[0] * wh[1]
        out.append([a, b])
    for entry in out:
        entry.append(parameters[at:at + gh])
        entry.append(parameters[at + gh:at + 2 * gh])
        at += 2 * gh
    return out


def _gates(z, k):
    return F.split(z, k, axis=-1)


def _step(mode, x_proj, h, c, wh, bh):
    """One time step from the projected input ``x_proj = W_x x + b_x``."""
    hp = F.matmul(h, F.transpose(wh)) + bh
    if mode == "rnn_tanh":
        return F.tanh(x_proj + hp), None
    if mode == "rnn_relu":
        return _P["relu"](x_proj + hp), None
    if mode == "lstm":
        i, f, g, o = _gates(x_proj + hp, 4)
        c = _P["sigmoid"](f) * c + _P["sigmoid"](i) * F.tanh(g)
        return _P["sigmoid"](o) * F.tanh(c), c
    xr, xz, xn = _gates(x_proj, 3)
    hr, hz, hn = _gates(hp, 3)
    r = _P["sigmoid"](xr + hr)
    z = _P["sigmoid"](xz + hz)
    n = F.tanh(xn + r * hn)
    return (1 - z) * n + z * h, None


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
    state_cell : ndarray, same shape, LSTM only
    mode : 'rnn_relu', 'rnn_tanh', 'lstm' or 'gru'
    state_outputs : bool
        Also return the final states (``[out, h]``, or ``[out, h, c]`` for LSTM).

    Returns
    -------
    ndarray of shape (T, N, directions * state_size), or a list with the final states.
    """
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
    unsupported = [n for n, v in (("sequence_length", use_sequence_length or sequence_length
                                   is not None), ("projection_size", projection_size),
                                  ("lstm_state_clip_min", lstm_state_clip_min),
                                  ("lstm_state_clip_max", lstm_state_clip_max)) if v]
    if unsupported:
        raise NotImplementedError("npx.rnn: %s not supported" % ", ".join(unsupported))
    if p and is_training():
        raise NotImplementedError("npx.rnn: dropout between layers (p > 0 in training) is not "
                                  "supported")
    steps, batch, input_size = _onp.shape(unwrap(data))
    hidden, layers = int(state_size), int(num_layers)
    directions = 2 if bidirectional else 1
    weights = _unpack(parameters, mode, input_size, hidden, layers, directions)
    layer_in = data
    final_h, final_c = [], []
    for layer in range(layers):
        outputs = []
        for d in range(directions):
            k = layer * directions + d
            wx, wh, bx, bh = weights[k]
            h = state[k]
            c = state_cell[k] if mode == "lstm" else None
            # the input projections of all steps at once
            proj = F.matmul(layer_in, F.transpose(wx)) + bx
            order = range(steps) if d == 0 else range(steps - 1, -1, -1)
            hs = [None] * steps
            for t in order:
                h, c = _step(mode, proj[t], h, c, wh, bh)
                hs[t] = h
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


__all__ = ["rnn"]
