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
``g * 0`` elsewhere (NaN where ``g`` is infinite or NaN, as ``g * (x > y)`` is; the
floating-point flags: Note [Comparisons and the invalid flag] in _fused_loops.h). The gradient
with respect to ``y`` is ``maximum_backward(g, y, x)``, so a constant ``y`` gets its half at a
tie too, and it is dropped with the constant: ``maximum(z, 0)``'s gradient at ``z == 0`` is
``0.5 * g``, where ``npx.relu``'s is 0. ``minimum``'s gradients are the same with ``x`` and
``y`` swapped. The result is linear in ``g`` and piecewise constant in ``x`` and ``y``, so
its derivative is itself in ``g`` and zero (not differentiable at ties) in ``x`` and ``y``.
"""

from fastgrad._kernels._fused import maximum_backward, sigmoid_backward, tanh_backward

HELPERS = {}


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
    ]
