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

__all__ = ["MXNetError", "MXNetValueError", "MXNetTypeError", "MXNetIndexError"]


class MXNetError(RuntimeError):
    """An error MXNet raises as ``mxnet.base.MXNetError`` (a ``RuntimeError``)."""


class MXNetValueError(MXNetError, ValueError):
    """A ``ValueError`` where MXNet raises ``MXNetError``: catchable as either."""


class MXNetTypeError(MXNetError, TypeError):
    """A ``TypeError`` where MXNet raises ``MXNetError``: catchable as either."""


class MXNetIndexError(MXNetError, IndexError):
    """An ``IndexError`` where MXNet raises ``MXNetError``: catchable as either."""
