"""The linear-algebra section of the derivative table that goes beyond ``_derivatives.py``
(Note [Table sections] there): the general eigendecomposition, the completion of an
orthonormal basis that ``svd(full_matrices=True)`` needs for non-square input, and the
complex log-determinant behind ``slogdet`` of complex input.

Note [eig to any order]
~~~~~~~~~~~~~~~~~~~~~~~
``eig_backward`` is written with differentiable functions, so ``create_graph=True`` records
it like any rule; its own derivative goes through the complex rules of ``matmul``, ``solve``
and ``conjugate``, which follow PyTorch's convention (Note [Complex gradients] in
``_complex.py``). The registry-driven tests check its second order against finite differences
on real and complex input.
"""

import numpy as np



def eig(x):
    """Eigenvalues and unit eigenvectors, always complex (as PyTorch and JAX return them;
    NumPy returns real arrays when every eigenvalue happens to be real)."""
    w, v = np.linalg.eig(x)
    kind = np.result_type(np.asarray(x).dtype, np.complex64)
    return w.astype(kind), v.astype(kind)


def logdet(x):
    """The complex logarithm of the determinant, ``log|det x| + i angle(det x)``, from
    ``slogdet`` (no overflow); for real ``x`` the real logarithm (NaN where ``det x <= 0``,
    as ``numpy.log``).

    Note [Complex slogdet]
    ~~~~~~~~~~~~~~~~~~~~~~
    For complex input the sign that ``slogdet`` returns, ``det / |det|``, depends on ``x``
    (for real input it is locally constant, and the ``slogdet`` op declares it
    non-differentiable). ``linalg.slogdet`` of complex input is therefore computed from this
    holomorphic op, whose derivative is ``inv(x)^T``: the log is its real part and the sign
    ``exp(i imag(logdet))``, both differentiable by their own complex rules.
    """
    sign, logabs = np.linalg.slogdet(x)
    if np.iscomplexobj(sign):
        return logabs + 1j * np.angle(sign)
    with np.errstate(invalid="ignore"):
        return np.where(sign > 0, logabs, np.nan)


def complete_basis(u):
    """``u`` (orthonormal columns, ``m x k``) followed by ``m - k`` orthonormal columns
    spanning the rest of the space."""
    u = np.asarray(u)
    m, k = u.shape[-2:]
    q = np.linalg.qr(u, mode="complete")[0]
    return np.concatenate([u, q[..., k:]], axis=-1)


# ---------------------------------------------------------------- rule helpers
def eig_backward(g, result, x):
    """Gradient of ``eig`` (distinct eigenvalues, unit eigenvectors), in PyTorch's
    convention: ``V^-H (diag(gw) + (V^H gV - V^H V Re(diag(V^H gV))) / conj(w_j - w_i))
    V^H``, the real part for a real input. The loss must not depend on the phase of the
    eigenvectors (the imaginary part of ``diag(V^H gV)`` is then zero)."""
    gw, gv = g
    w, v = result
    vh = np.conj(np.swapaxes(v, -1, -2))
    vhgv = np.matmul(vh, gv)
    diag = np.diagonal(vhgv, 0, -2, -1)
    phase = np.abs(np.imag(np.asarray(diag)))
    if phase.size and phase.max() > 1e-6 * max(1.0, float(np.abs(np.asarray(vhgv)).max())):
        raise ValueError("fastgrad.linalg.eig: the loss depends on the phase of the "
                         "eigenvectors, which eig does not define; its gradient is undefined")
    n = np.shape(w)[-1]
    eye = np.eye(n, dtype=bool)
    inner = vhgv - np.matmul(vh, v * np.expand_dims(np.real(diag), -2))
    cw = np.conj(w)
    gaps = np.expand_dims(cw, -2) - np.expand_dims(cw, -1)
    inner = np.where(eye, np.expand_dims(gw, -2), inner / np.where(eye, 1, gaps))
    ga = np.linalg.solve(vh, np.matmul(inner, vh))
    return ga if x.dtype.kind == "c" else np.real(ga)


def extra_columns_unused(g, k):
    """The gradient of ``u`` from that of ``complete_basis(u)``, when the completed columns
    (not unique) have no gradient; an error otherwise."""
    extra = np.asarray(g)[..., k:]
    if extra.size and np.any(extra != 0):
        raise ValueError("fastgrad.linalg.svd: the loss depends on the extra singular vectors "
                         "of full_matrices=True for non-square input, which are not unique; "
                         "use full_matrices=False")
    return g[..., :k]


def logdet_backward(g, x):
    """Gradient of ``logdet``: ``g inv(x)^H`` (the conjugate of the holomorphic derivative
    ``inv(x)^T``, Note [Complex gradients] in _complex.py)."""
    inv = np.linalg.inv(x)
    inv_h = np.swapaxes(np.conj(inv) if x.dtype.kind == "c" else inv, -1, -2)
    return np.expand_dims(g, (-1, -2)) * inv_h


HELPERS = {"eig_backward": eig_backward, "extra_columns_unused": extra_columns_unused,
           "logdet_backward": logdet_backward}


def entries(Op, NONDIFF):
    return [
        # Note [eig to any order]
        Op("eig", eig, "x", n_out=2, x="eig_backward(g, result, x)", complex=True),
        Op("complete_basis", complete_basis, "u", u="extra_columns_unused(g, u.shape[-1])",
           complex=True),
        # Note [Complex slogdet]
        Op("logdet", logdet, "x", x="logdet_backward(g, x)", complex=True),
    ]
