"""The complex-number section of the derivative table (Note [Table sections] in
_derivatives.py): parts of complex arrays and the cast that makes a real array complex.

Rules follow PyTorch's convention: for a real loss ``L`` and ``z = a + ib`` the gradient is
``dL/da + i dL/db``. A real input's gradient is the real part of that.
"""

import numpy as np


def to_complex(x):
    """``x`` as the complex dtype of its precision (complex64 for float32)."""
    return np.asarray(x).astype(np.result_type(np.asarray(x).dtype, np.complex64))


def imag(x):
    return np.array(np.imag(x), copy=True)


def times_i(x):
    """``1j * x``, complex of the precision of ``x``."""
    return to_complex(x) * 1j


HELPERS = {}


def entries(Op, NONDIFF):
    return [
        # z = x + 0i feeds only the real part.
        Op("to_complex", to_complex, "x", x="real(g)", complex={"x": "g"}),
        # Im(z) = b: the gradient is 0 + i g. The pair imag/times_i is closed under
        # differentiation, so no rule multiplies by a complex constant.
        Op("imag", imag, "x", x="times_i(g)", complex=True),
        # w = i x feeds the imaginary part only.
        # (to_complex and times_i are written for real inputs: their complex ones need g
        # itself and -i g, whose real parts are the real rules, so the engine's cast serves both.)
        Op("times_i", times_i, "x", x="imag(g)", complex={"x": "-1j * g"}),
    ]
