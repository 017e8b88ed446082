"""MXNet's error type (``mx.base.MXNetError``).

Note [MXNet errors]
~~~~~~~~~~~~~~~~~~~
MXNet reports misuse of autograd (a backward pass through a freed graph, a variable that is not
in the graph, a write into a recorded array, a custom Function's backward returning something
other than arrays) as ``mxnet.base.MXNetError``, a ``RuntimeError``. fastgrad raises the Python
type that describes the mistake best (``ValueError``, ``TypeError``, ``IndexError``), and at
those places an error class that is *also* an ``MXNetError``, so programs written for MXNet
(``except mx.base.MXNetError``) and programs written for Python (``except ValueError``) both
catch it.
"""

import numpy as _np

__all__ = ["MXNetError", "MXNetValueError", "MXNetTypeError", "MXNetIndexError",
           "NotImplementedForSymbol", "py_str", "string_types", "numeric_types",
           "integer_types"]

# MXNet's small type helpers, which programs and MXNet's tests import from mxnet.base.
string_types = (str,)
numeric_types = (float, int, _np.generic)
integer_types = (int, _np.int32, _np.int64)


def py_str(x):
    """``bytes`` from a C library decoded as UTF-8 into ``str`` (``mxnet.base.py_str``)."""
    return x.decode("utf-8")


class MXNetError(RuntimeError):
    """An error MXNet raises as ``mxnet.base.MXNetError`` (a ``RuntimeError``)."""


class MXNetValueError(MXNetError, ValueError):
    """A ``ValueError`` where MXNet raises ``MXNetError``: catchable as either."""


class MXNetTypeError(MXNetError, TypeError):
    """A ``TypeError`` where MXNet raises ``MXNetError``: catchable as either."""


class MXNetIndexError(MXNetError, IndexError):
    """An ``IndexError`` where MXNet raises ``MXNetError``: catchable as either."""


class NotImplementedForSymbol(MXNetError, TypeError):
    """An operation a ``Symbol`` does not support (``bool(symbol)``), as MXNet's: an
    ``MXNetError`` and a ``TypeError``."""

    def __init__(self, function, alias=None, *args):
        name = getattr(function, "__name__", str(function))
        super().__init__("Function %s%s is not implemented for Symbol: bind it and compute "
                         "values" % (name, " (namely operator %r)" % alias if alias else ""))
        self.function = name
        self.alias = alias
