"""Differentiable NumPy: ``fastgrad.np`` (MXNet's ``mx.np``).

Every function here takes fastgrad arrays, NumPy arrays or Python numbers, returns fastgrad
arrays, and is recorded inside ``autograd.record()`` when an input depends on a variable.
"""

from fastgrad._core._array import ndarray
from fastgrad._api import _functions
from fastgrad._api._functions import *  # noqa: F401,F403
from fastgrad._api import _numpy_composites
from fastgrad._api._numpy_composites import *  # noqa: F401,F403
from fastgrad._api._creation import genfromtxt  # noqa: F401  (mx.np.genfromtxt)
from fastgrad.numpy import random  # noqa: F401
from fastgrad.numpy import linalg  # noqa: F401
from fastgrad.numpy import fft  # noqa: F401

import numpy as _onp

pi = _onp.pi
e = _onp.e
inf = _onp.inf
nan = _onp.nan
newaxis = None
float16, float32, float64 = _onp.float16, _onp.float32, _onp.float64
int8, int16, int32, int64 = _onp.int8, _onp.int16, _onp.int32, _onp.int64
uint8, bool_ = _onp.uint8, _onp.bool_
bool = _onp.bool_    # MXNet's np.bool (a dtype; the builtin is still ``builtins.bool``)
dtype = _onp.dtype
finfo, iinfo = _onp.finfo, _onp.iinfo

__all__ = ["ndarray", "random", "linalg", "pi", "e", "inf", "nan", "newaxis"]
__all__ += _functions.__all__
__all__ += ["fft", "genfromtxt"]
__all__ += _numpy_composites.__all__
r_ = _numpy_composites.INDEX_BUILDERS["r_"]
c_ = _numpy_composites.INDEX_BUILDERS["c_"]
__all__ += ["r_", "c_"]
