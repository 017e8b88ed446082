"""The fused-kernel section of the derivative table (Note [Table sections] in _derivatives.py):
derivatives that NumPy's composition computes in several passes over memory, computed in one
by the ufuncs of ``_fused.pyx`` (Note [Fused kernels] there).

Each is an op with a rule of its own, written with table ops, so that a gradient computed
with a fused kernel can be differentiated again. They are internal ops: the rules of
``maximum``, ``minimum`` and ``sigmoid`` call them, users call those.

Note [Ties of maximum]
~~~~~~~~~~~~~~~~~~~~~~
``maximum(x, y)`` splits its gradient evenly where ``x == y``, as the ``max`` reduction does:
``maximum_backward(g, x, y)`` is ``g`` where ``x > y``, ``0.5 * g`` where ``x == y`` and
``g * 0`` elsewhere (NaN where ``g`` is infinite or NaN, as ``g * (x > y)`` is). The gradient
with respect to ``y`` is ``maximum_backward(g, y, x)``, so a constant ``y`` gets its half at a
tie too, and it is dropped with the constant: ``maximum(z, 0)``'s gradient at ``z == 0`` is
``0.5 * g``, where ``npx.relu``'s is 0. ``minimum``'s gradients are the same with ``x`` and
``y`` swapped. The result is linear in ``g`` and piecewise constant in ``x`` and ``y``, so
its derivative is itself in ``g`` and zero (not differentiable at ties) in ``x`` and ``y``.
"""

import numpy as np

from fastgrad._fused import (lstm_backward, lstm_dc, lstm_state, maximum_backward,
                             sigmoid_backward, tanh_backward)


# Note [The fused LSTM cell]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~
# ``lstm_cell(z, c)`` is the pointwise step of an LSTM cell from the gate pre-activations
# ``z = [a, b, u, v]`` (input, forget, cell, output gates along the last axis, MXNet's order)
# and the previous cell state ``c``: ``i, f, o = sigmoid(a, b, v)``, ``gg = tanh(u)``,
# ``c_new = f * c + i * gg``, ``h = o * tanh(c_new)``. Its outputs are ``h``, ``c_new`` and
# the activations ``[i, f, gg, o, tanh(c_new)]`` that its backward reads, an output that
# carries no gradient. The forward is NumPy's (SIMD) sigmoid and tanh on the whole gate block
# plus one fused pass for ``c_new``, with the operations of the composition, so ``h`` and
# ``c_new`` equal the composition's bit for bit (a -0.0 of the cell input's tanh comes out as
# +0.0: tanh(x) * 1 + 0). The backward is one pass over the saved
# activations without a transcendental function: ``lstm_cell_backward`` for ``z`` and
# ``lstm_cell_dc`` for ``c`` (the loops' formulas are in ``_fused_loops.h``); the order of its
# sums differs from the composition's, so its gradients agree to rounding (float32: 1e-6).
# The two backward ops are ops of their own: their rules (``lstm_cell_vjp``) recompute the
# activations from ``z`` and ``c`` with table ops, so every order is differentiable; the
# activations they are given are a cache, not an input that carries a gradient.
#
# ``npx.rnn`` does not call it (yet): at workload 9's size a step of npx.rnn's LSTM took as
# many instructions with it as with the composition, and no less time: the gate products
# dominate, and NumPy's passes over the strided gate blocks cost more than its passes over
# contiguous arrays (docs/benchmarks.rst). It is
# here for callers that see the whole cell, such as the executor's fusion of elementwise
# chains; the sigmoid and tanh gradients inside it are fused kernels already.


def lstm_cell(z, c):
    """``(h, c_new, activations)`` of an LSTM cell (Note [The fused LSTM cell])."""
    z, c = np.asarray(z), np.asarray(c)
    hidden = _hidden(z)
    lead = np.broadcast_shapes(z.shape[:-1], c.shape[:-1])
    if c.shape[-1:] != (hidden,):
        raise ValueError("lstm_cell: the cell state has shape %s; gates of shape %s need a "
                         "last axis of %d" % (c.shape, z.shape, hidden))
    dtype = np.result_type(z, c, np.float32)
    acts = np.empty(lead + (5 * hidden,), dtype)
    gates = acts[..., :4 * hidden]
    # sigmoid as _kernels.sigmoid computes it (Note [Stable sigmoid]): 0.5 * tanh(0.5 * x)
    # + 0.5, on the input, forget and output gates, and on the cell input 1 * tanh(1 * x) + 0,
    # which is tanh(x): four NumPy passes over the gate block
    scale, shift = _gate_constants(hidden, dtype)
    np.multiply(z, scale, out=gates)
    np.tanh(gates, out=gates)
    gates *= scale
    gates += shift
    i, f, gg, o, tc = _blocks(acts, hidden)
    c_new = lstm_state(i, f, gg, c)
    np.tanh(c_new, out=tc)
    return np.multiply(o, tc), c_new, acts


def lstm_cell_backward(z, c, acts, dh, dc):
    """The gradient of ``lstm_cell``'s gates ``z`` from its activations."""
    hidden = _hidden(np.asarray(z))
    acts = np.asarray(acts)
    dz = np.empty(acts.shape[:-1] + (4 * hidden,),
                  np.result_type(acts, c, dh, dc))
    lstm_backward(*_blocks(acts, hidden), _value(c), _value(dh), _value(dc),
                  out=_blocks(dz, hidden, 4))
    return dz


def lstm_cell_dc(z, c, acts, dh, dc):
    """The gradient of ``lstm_cell``'s previous cell state ``c`` from its activations."""
    i, f, gg, o, tc = _blocks(np.asarray(acts), _hidden(np.asarray(z)))
    return lstm_dc(f, o, tc, _value(dh), _value(dc))


def _value(x):
    """``x`` as a NumPy array for the fused ufuncs (a ``Filled`` gradient as its broadcast
    view, Note [Filled gradients]), a Python number left weak (Note [Weak scalars])."""
    return x if type(x) in (float, int) else np.asarray(x)


_GATE_CONSTANTS = {}


def _gate_constants(hidden, dtype):
    """The rows ``[0.5, 0.5, 1, 0.5]`` and ``[0.5, 0.5, 0, 0.5]`` by gate block."""
    key = (hidden, dtype)
    found = _GATE_CONSTANTS.get(key)
    if found is None:
        scale = np.repeat(np.array([0.5, 0.5, 1, 0.5], dtype), hidden)
        shift = np.repeat(np.array([0.5, 0.5, 0, 0.5], dtype), hidden)
        scale.flags.writeable = shift.flags.writeable = False
        found = _GATE_CONSTANTS[key] = (scale, shift)
    return found


def _hidden(z):
    if z.ndim == 0 or z.shape[-1] % 4:
        raise ValueError("lstm_cell: the gates' last axis must hold 4 blocks of the hidden "
                         "size, got shape %s" % (z.shape,))
    return z.shape[-1] // 4


def _blocks(x, hidden, n=5):
    return tuple(x[..., k * hidden:(k + 1) * hidden] for k in range(n))


def lstm_cell_vjp(z, c, dh, dc, gz, gdc):
    """The derivatives of ``<gz, lstm_cell_backward(z, c, ., dh, dc)> + <gdc, lstm_cell_dc(z,
    c, ., dh, dc)>`` in ``(z, c, dh, dc)``, written with differentiable ops (a missing ``gz``
    or ``gdc`` is 0): the rules of the two backward ops (Note [The fused LSTM cell])."""
    hidden = z.shape[-1] // 4
    a, b, u, v = _blocks(z, hidden, 4)
    i, f, o = _sigmoid(a), _sigmoid(b), _sigmoid(v)
    gg = np.tanh(u)
    tc = np.tanh(f * c + i * gg)
    di, df, do = i * (1 - i), f * (1 - f), o * (1 - o)
    dgg, dtc = 1 - gg * gg, 1 - tc * tc
    ga, gb, gu, gv = _blocks(gz, hidden, 4) if gz is not None else (0, 0, 0, 0)
    gdc = 0 if gdc is None else gdc
    dcn = dc + dh * o * dtc                     # the gradient of c_new
    w = ga * gg * di + gb * c * df + gu * i * dgg + gdc * f     # the coefficient of dcn
    p = dh * dtc * (gv * do - 2 * w * o * tc)   # ... of c_new's value, through tc
    gz_a = (dcn * (ga * gg * (1 - 2 * i) + gu * dgg) + p * gg) * di
    gz_b = (dcn * (gb * c * (1 - 2 * f) + gdc) + p * c) * df
    gz_u = (dcn * (ga * di - 2 * gu * i * gg) + p * i) * dgg
    gz_v = do * dh * (w * dtc + gv * tc * (1 - 2 * o))
    return (np.concatenate([gz_a, gz_b, gz_u, gz_v], axis=-1), dcn * gb * df + p * f,
            w * o * dtc + gv * tc * do, w)


def _sigmoid(x):
    return 0.5 * np.tanh(0.5 * x) + 0.5


HELPERS = {"lstm_cell_vjp": lstm_cell_vjp}


def entries(Op, NONDIFF):
    return [
        Op("maximum_backward", maximum_backward, "dz, x, y",
           dz="maximum_backward(g, x, y)", x=NONDIFF, y=NONDIFF),
        # g * y * (1 - y): linear in g; in y its derivative is g * (1 - 2 y).
        Op("sigmoid_backward", sigmoid_backward, "dy, y",
           dy="sigmoid_backward(g, y)", y="g * dy * (1 - 2 * y)"),
        # g * (1 - y * y): linear in g; in y its derivative is -2 g y.
        Op("tanh_backward", tanh_backward, "dy, y",
           dy="tanh_backward(g, y)", y="-2 * g * dy * y"),
        # Note [The fused LSTM cell]
        Op("lstm_cell", lstm_cell, "z, c", n_out=3, differentiable_outputs=(True, True, False),
           z="lstm_cell_backward(z, c, result[2], g[0], g[1])",
           c="lstm_cell_dc(z, c, result[2], g[0], g[1])"),
        Op("lstm_cell_backward", lstm_cell_backward, "z, c, acts, dh, dc",
           z="lstm_cell_vjp(z, c, dh, dc, g, None)[0]",
           c="lstm_cell_vjp(z, c, dh, dc, g, None)[1]", acts=NONDIFF,
           dh="lstm_cell_vjp(z, c, dh, dc, g, None)[2]",
           dc="lstm_cell_vjp(z, c, dh, dc, g, None)[3]"),
        Op("lstm_cell_dc", lstm_cell_dc, "z, c, acts, dh, dc",
           z="lstm_cell_vjp(z, c, dh, dc, None, g)[0]",
           c="lstm_cell_vjp(z, c, dh, dc, None, g)[1]", acts=NONDIFF,
           dh="lstm_cell_vjp(z, c, dh, dc, None, g)[2]",
           dc="lstm_cell_vjp(z, c, dh, dc, None, g)[3]"),
    ]
