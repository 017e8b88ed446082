"""Differentiable discrete Fourier transforms: ``fastgrad.np.fft`` (``numpy.fft``).

The implementations live in ``fastgrad._api._fft``; every transform is differentiable to any
order, for real and complex inputs (Note [FFT adjoints] in ``_table_fft.py``).
"""

from fastgrad._api._fft import (fft, ifft, fft2, ifft2, fftn, ifftn, rfft, irfft, rfft2, irfft2,
                                rfftn, irfftn, hfft, ihfft, fftshift, ifftshift, fftfreq,
                                rfftfreq, __all__)
