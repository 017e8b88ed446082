"""Differentiable discrete Fourier transforms: ``fastgrad.np.fft`` (``numpy.fft``).

The implementations live in ``fastgrad._fft``; every transform is differentiable to any
order, for real and complex inputs (Note [FFT adjoints] in ``_table_fft.py``).
"""

from fastgrad._fft import (fft, ifft, fft2, ifft2, fftn, ifftn, rfft, irfft, rfft2,  # noqa: F401
                           irfft2, rfftn, irfftn, hfft, ihfft, fftshift, ifftshift, fftfreq,
                           rfftfreq, __all__)
