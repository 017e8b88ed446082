"""The FFT section of the derivative table (Note [Table sections] in _derivatives.py).

Three primitives carry every function of ``fastgrad.np.fft``: ``fftn_c2c`` (complex to
complex, forward or inverse), ``rfftn`` (real to half spectrum) and ``irfftn`` (half spectrum
to real). Zero-padding or truncation to ``n``/``s``, conjugation and shifts are done by the
wrappers in ``_fft.py`` with other table ops.

Note [FFT adjoints]
~~~~~~~~~~~~~~~~~~~
An FFT with normalization ``norm`` is ``s F`` with ``F`` the unscaled DFT matrix and ``s`` one
of ``1``, ``1/sqrt(N)``, ``1/N`` (norm "backward", "ortho", "forward"); its inverse with the
same ``norm`` is ``s' conj(F)`` with ``s s' = 1/N``. In PyTorch's convention the gradient of a
linear map ``A`` is ``A^H g``, and ``(s F)^H = s conj(F)`` is the inverse FFT whose scale is
``s``: the one with the *dual* normalization (backward <-> forward, ortho <-> ortho). So

- ``fftn_c2c``'s gradient is the opposite-direction transform with the dual norm;
- ``rfftn`` keeps the first ``N//2 + 1`` outputs of the full transform of a real input: its
  gradient is the real part of the inverse transform (dual norm) of ``g`` zero-padded back to
  ``N`` along the last axis;
- ``irfftn`` reads each of the bins ``1 .. N//2 - 1`` (``(N-1)//2`` for odd ``N``) twice
  (``Z_k`` and ``Z_{N-k} = conj(Z_k)``) and ignores the imaginary part of bin 0 (and of bin
  ``N/2`` for even ``N``): its gradient is ``rfftn(g)`` with the dual norm, doubled on the bins
  read twice. The imaginary parts it ignores get ``rfftn``'s real outputs there, i.e. zero.
"""

import numpy as np

_DUAL = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


def fftn_c2c(x, axes, norm, inverse):
    return (np.fft.ifftn if inverse else np.fft.fftn)(x, axes=axes, norm=norm)


def irfftn(x, axes, n, norm):
    s = [np.shape(x)[a] for a in axes[:-1]] + [n]
    return np.fft.irfftn(x, s=s, axes=axes, norm=norm)


# ---------------------------------------------------------------- rule helpers
def dual_norm(norm):
    """The normalization whose inverse transform is the adjoint (Note [FFT adjoints])."""
    return _DUAL[norm]


def pad_axis(g, n, axis):
    """``g`` zero-padded at the end of ``axis`` to length ``n``."""
    width = [(0, 0)] * np.ndim(g)
    width[axis] = (0, n - np.shape(g)[axis])
    return np.pad(g, width)


def irfft_weights(g, n, axis):
    """2 on the bins ``irfftn`` reads twice, 1 on bin 0 and (even ``n``) bin ``n/2``,
    shaped to broadcast along ``axis`` of ``g``."""
    m = n // 2 + 1
    w = np.full(m, 2.0, dtype=np.finfo(np.asarray(g).dtype).dtype)
    w[0] = 1.0
    if n % 2 == 0:
        w[-1] = 1.0
    shape = [1] * np.ndim(g)
    shape[axis] = m
    return w.reshape(shape)


HELPERS = {"dual_norm": dual_norm, "pad_axis": pad_axis, "irfft_weights": irfft_weights}


def entries(Op, NONDIFF):
    return [
        Op("fftn_c2c", fftn_c2c, "x; axes, norm, inverse",
           x="fftn_c2c(g, axes, dual_norm(norm), not inverse)", complex=True),
        Op("rfftn", np.fft.rfftn, "x; axes, norm", call="x, axes=axes, norm=norm",
           x="real(fftn_c2c(pad_axis(g, x.shape[axes[-1]], axes[-1]), axes, dual_norm(norm), "
             "True))", complex=True),
        Op("irfftn", irfftn, "x; axes, n, norm",
           x="rfftn(g, axes, dual_norm(norm)) * irfft_weights(g, n, axes[-1])", complex=True),
    ]
