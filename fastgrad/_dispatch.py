"""NumPy function -> fastgrad function, for NumPy calls on fastgrad arrays
(``__array_function__``): the table of ``_functions`` with those of the modules above it."""

from fastgrad import _array, _fft, _functions, _numpy_more

FUNCS = {**_functions.FUNCS, **_fft.FUNCS, **_numpy_more.FUNCS}
_array.register_numpy_functions(FUNCS)   # Note [Layers] in _layers.py
