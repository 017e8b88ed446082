"""``mx.nd.sparse``: the names of MXNet's sparse NDArrays, so that programs importing them load.

fastgrad's arrays are dense (``docs/coming_from/mxnet.rst``, "No sparse storage"): making a
sparse array raises an ``MXNetValueError`` that says so. ``CSRNDArray`` and
``RowSparseNDArray`` exist for ``isinstance`` checks, which are always False.

>>> import fastgrad as mx
>>> mx.nd.sparse.zeros('csr', (2, 3))  # doctest: +NORMALIZE_WHITESPACE
Traceback (most recent call last):
...
fastgrad.base.MXNetValueError: mx.nd.sparse.zeros: fastgrad has no sparse storage (stype
'csr'); its arrays are dense, use mx.nd.zeros
"""

from fastgrad.base import MXNetValueError

__all__ = ["BaseSparseNDArray", "CSRNDArray", "RowSparseNDArray", "csr_matrix",
           "row_sparse_array", "zeros", "empty", "array"]

# MXNet's storage type codes (mxnet.ndarray.ndarray._STORAGE_TYPE_STR_TO_ID): a Symbol
# variable's __storage_type__ attribute holds one.
_STORAGE_TYPE_STR_TO_ID = {"undefined": -1, "default": 0, "row_sparse": 1, "csr": 2}
_STORAGE_TYPE_ID_TO_STR = {code: name for name, code in _STORAGE_TYPE_STR_TO_ID.items()}


def _refuse(function, stype, dense):
    raise MXNetValueError("mx.nd.sparse.%s: fastgrad has no sparse storage (stype %r); its "
                          "arrays are dense, use %s" % (function, stype, dense))


class BaseSparseNDArray:
    """The base of MXNet's sparse arrays; fastgrad makes none (constructing one raises)."""

    _stype = "sparse"

    def __init__(self, *args, **kwargs):
        _refuse(type(self).__name__, self._stype, "mx.nd.array")


class CSRNDArray(BaseSparseNDArray):
    """MXNet's compressed-sparse-row array; fastgrad makes none."""

    _stype = "csr"


class RowSparseNDArray(BaseSparseNDArray):
    """MXNet's row-sparse array; fastgrad makes none."""

    _stype = "row_sparse"


def csr_matrix(arg1, shape=None, ctx=None, dtype=None):
    """Always raises: fastgrad has no CSR arrays."""
    _refuse("csr_matrix", "csr", "mx.nd.array")


def row_sparse_array(arg1, shape=None, ctx=None, dtype=None):
    """Always raises: fastgrad has no row-sparse arrays."""
    _refuse("row_sparse_array", "row_sparse", "mx.nd.array")


def zeros(stype, shape, ctx=None, dtype=None, **kwargs):
    """Always raises for a sparse ``stype``: fastgrad has no sparse arrays."""
    _refuse("zeros", stype, "mx.nd.zeros")


def empty(stype, shape, ctx=None, dtype=None):
    """Always raises for a sparse ``stype``: fastgrad has no sparse arrays."""
    _refuse("empty", stype, "mx.nd.empty")


def array(source_array, ctx=None, dtype=None):
    """Always raises: fastgrad has no sparse arrays."""
    _refuse("array", getattr(source_array, "format", "sparse"), "mx.nd.array")
