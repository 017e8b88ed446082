"""NumPy function -> fastgrad function, for NumPy calls on fastgrad arrays
(``__array_function__``): the functions of ``_functions`` and ``_linalg`` under the names of
NumPy's, with the tables of the modules that define their own (FFTs, ``_numpy_composites``)."""

import numpy as _np

from fastgrad._api import _creation, _fft, _functions, _numpy_composites
from fastgrad._api._linalg import linalg


def _dispatch_table():
    """NumPy function -> fastgrad function, for every NumPy function fastgrad implements
    (ufuncs are dispatched through the registry's ufunc map instead)."""
    table = {}
    for name in _functions.__all__:
        fn = getattr(_np, name, None)
        if callable(fn) and not isinstance(fn, (_np.ufunc, type)):
            table[fn] = getattr(_functions, name)
    for name, fn in vars(linalg).items():
        ref = getattr(_np.linalg, name, None)
        if callable(ref) and not isinstance(ref, type):
            table[ref] = fn
    return table


FUNCS = {**_dispatch_table(), **_fft.FUNCS, **_numpy_composites.FUNCS,
         # reached only through like= (its arguments are file names and options)
         _np.genfromtxt: _creation.genfromtxt}
