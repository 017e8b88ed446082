"""Testing helpers (MXNet 1.9.1's ``mx.test_utils``): tolerant comparisons with MXNet's
per-dtype tolerances and failure messages, random inputs, finite-difference gradient checks
of a Symbol through its bound Executor, forward/backward checks against expected values.

fastgrad runs on the CPU only: ``list_gpus()`` is empty and ``default_context()`` is
``mx.cpu()``. The sparse helpers (``rand_sparse_ndarray``, ``create_sparse_array``, a
``stype`` other than ``'default'``) raise ``NotImplementedError``: fastgrad has no sparse
storage. Nothing here downloads unless a file is missing; then ``download`` raises naming the
URL (there is no network where fastgrad is tested).

Examples
--------
>>> import numpy as np
>>> import fastgrad as mx
>>> from fastgrad.test_utils import assert_almost_equal, check_numeric_gradient
>>> assert_almost_equal(mx.nd.array([1.0, 2.0]), np.array([1.0, 2.00001]))
>>> x = mx.sym.Variable('x')
>>> check_numeric_gradient(mx.sym.tanh(x), [np.array([[0.1, -0.5], [0.3, 0.9]])])

Note [Comparison tolerances]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
As in MXNet, ``assert_almost_equal`` with ``rtol``/``atol`` left out takes the looser of the
defaults of its two operands' dtypes (float16 1e-2/1e-1, float32 1e-4/1e-3, float64
1e-5/1e-20, integers and bools exact) and passes where ``|a - b| <= atol + rtol * |b|``
(NumPy's ``allclose``); ``almost_equal`` alone uses the float64 defaults. A failure reports the
worst violation ``|a - b| / (atol + rtol * |b|)``, where it is, and the share of mismatching
elements, in MXNet's words. MXNet changes NumPy's global print options when a comparison
fails; fastgrad sets them only while it formats the message.
"""

import bz2
import contextlib
import gzip
import json
import logging
import numbers
import os
import platform
import struct
import sys
import time
import traceback
import zipfile
from collections import OrderedDict

import numpy as np
import numpy.testing as npt

from fastgrad import ndarray as nd
from fastgrad import symbol as sym_module
from fastgrad import io as mx_io
from fastgrad import initializer, autograd
from fastgrad import numpy_extension as npx
from fastgrad.context import Context, cpu, current_context, check_device, num_gpus
from fastgrad.symbol import Symbol
from fastgrad.gluon import utils as gluon_utils
from fastgrad.util import use_np, getenv, setenv  # noqa: F401 -- as MXNet's test_utils

__all__ = [
    "default_context", "set_default_context", "default_dtype", "default_rtols", "default_atols",
    "default_numeric_eps", "effective_dtype", "get_tolerance", "get_tols", "get_atol",
    "get_rtol", "get_etol", "random_arrays", "random_uniform_arrays", "random_sample",
    "rand_ndarray", "rand_sparse_ndarray", "create_sparse_array", "create_sparse_array_zd",
    "shuffle_csr_column_indices", "rand_shape_2d", "rand_shape_3d", "rand_shape_nd",
    "rand_coord_2d", "np_reduce", "same", "checkShapes", "almost_equal", "locationError",
    "assert_almost_equal", "assert_allclose", "assert_almost_equal_with_err",
    "assert_almost_equal_ignore_nan", "assert_exception", "retry", "simple_forward",
    "numeric_grad", "check_numeric_gradient", "check_symbolic_forward",
    "check_symbolic_backward", "check_speed", "check_consistency", "list_gpus", "download",
    "download_model", "get_mnist", "get_mnist_pkl", "get_mnist_ubyte", "get_cifar10",
    "get_mnist_iterator", "get_zip_data", "get_bz2_data", "same_array", "discard_stderr",
    "DummyIter", "compare_ndarray_tuple", "compare_optimizer", "same_symbol_structure",
    "environment", "use_np", "getenv", "setenv", "collapse_sum_like", "is_cd_run",
    "is_aarch64_run", "has_tvm_ops",
    "is_op_runnable", "check_gluon_hybridize_consistency", "assign_each", "assign_each2",
    "create_2d_tensor", "create_vector", "get_identity_mat", "get_identity_mat_batch",
    "new_matrix_with_real_eigvals_2d", "new_matrix_with_real_eigvals_nd",
    "new_orthonormal_matrix_2d", "new_sym_matrix_with_real_eigvals_2d",
    "new_sym_matrix_with_real_eigvals_nd", "get_im2rec_path", "gen_buckets_probs_with_ppf",
    "mean_check", "var_check", "chi_square_check", "verify_generator",
]
# Note [Star import]: MXNet's test_utils has no __all__, so ``from mxnet.test_utils import *``
# also hands out what it imports, and MXNet's own tests use some of it (``np``, ``npt``,
# ``rnd``, ``array``, ``ss``, ``platform``, ``Symbol``, ...). The same names go out here.
rnd = np.random
array = nd.array
contextmanager = contextlib.contextmanager
__all__ += ["np", "npt", "rnd", "array", "ss", "Context", "current_context", "Symbol",
            "OrderedDict", "contextmanager", "os", "sys", "time", "platform", "logging",
            "numbers", "json", "gzip", "struct", "bz2", "zipfile", "traceback"]


def __getattr__(name):
    # ``ss`` is scipy.stats, or None without SciPy, as in MXNet, imported on first use
    # (SciPy is optional).
    if name == "ss":
        try:
            return _scipy_stats("ss")
        except ImportError:
            return None
    raise AttributeError("module %r has no attribute %r" % (__name__, name))

_default_ctx = [None]


# --------------------------------------------------------------------------- contexts, dtypes

def default_context():
    """The context tests run on: the one ``set_default_context`` chose, else
    ``mx.current_context()`` (always a CPU)."""
    return _default_ctx[0] if _default_ctx[0] is not None else current_context()


def set_default_context(ctx):
    """Make ``ctx`` the context ``default_context()`` returns (a CPU: fastgrad has no GPU)."""
    check_device(ctx, "the default test context")
    _default_ctx[0] = Context(ctx)


def default_dtype():
    """The dtype of the arrays the helpers make: ``numpy.float32``."""
    return np.float32


_EXACT = (np.bool_, np.int8, np.uint8, np.int32, np.uint32, np.int64, np.uint64)


def default_rtols():
    """MXNet's default relative tolerance of each dtype (Note [Comparison tolerances])."""
    tols = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-4,
            np.dtype(np.float64): 1e-5}
    tols.update((np.dtype(t), 0) for t in _EXACT)
    return tols


def default_atols():
    """MXNet's default absolute tolerance of each dtype (Note [Comparison tolerances])."""
    tols = {np.dtype(np.float16): 1e-1, np.dtype(np.float32): 1e-3,
            np.dtype(np.float64): 1e-20}
    tols.update((np.dtype(t), 0) for t in _EXACT)
    return tols


def default_numeric_eps():
    """The finite-difference step of each floating dtype (powers of two, as MXNet's)."""
    return {np.dtype(np.float16): 2.0 ** -6, np.dtype(np.float32): 2.0 ** -9,
            np.dtype(np.float64): 2.0 ** -14}


def effective_dtype(dat):
    """The dtype whose tolerances apply to ``dat``: its own (MXNet lowers float32 to float16
    only on Ampere GPUs with TF32, which fastgrad never runs on)."""
    return np.dtype(dat.dtype)


def _table_dtype(dtype, table):
    """``dtype`` as a key of ``table``: other integer widths compare exactly, complex numbers
    take the tolerance of their parts."""
    if dtype in table:
        return dtype
    if dtype.kind in "biu":
        return np.dtype(np.int64)
    if dtype.kind == "c":
        return np.dtype(np.float32) if dtype.itemsize <= 8 else np.dtype(np.float64)
    raise KeyError("test_utils: no default tolerance for dtype %s; pass rtol and atol"
                   % dtype)


def get_tolerance(dat, tol, default_tol):
    """``tol`` if it is a number, else its entry (a dict by dtype) or ``default_tol``'s for
    the dtype of ``dat``."""
    if isinstance(tol, numbers.Number):
        return tol
    dtype = effective_dtype(dat)
    tol = {} if tol is None else tol
    if dtype in tol:
        return tol[dtype]
    return default_tol[_table_dtype(dtype, default_tol)]


def _with_dtype(x):
    return x if hasattr(x, "dtype") else np.asarray(x)


def get_tols(x, y, rtol, atol):
    """The (rtol, atol) comparing ``x`` with ``y``: the looser of the two dtypes' defaults
    where a tolerance is None or a dict without their dtype."""
    x, y = _with_dtype(x), _with_dtype(y)
    rtol = max(get_tolerance(x, rtol, default_rtols()), get_tolerance(y, rtol, default_rtols()))
    atol = max(get_tolerance(x, atol, default_atols()), get_tolerance(y, atol, default_atols()))
    return rtol, atol


def get_atol(atol=None, dtype=np.dtype(np.float64)):
    """``atol``, or the default absolute tolerance of ``dtype`` (float64's: 1e-20)."""
    return default_atols()[_table_dtype(np.dtype(dtype), default_atols())] \
        if atol is None else atol


def get_rtol(rtol=None, dtype=np.dtype(np.float64)):
    """``rtol``, or the default relative tolerance of ``dtype`` (float64's: 1e-5)."""
    return default_rtols()[_table_dtype(np.dtype(dtype), default_rtols())] \
        if rtol is None else rtol


def get_etol(etol=None):
    """``etol`` (the share of elements allowed to mismatch), 0 by default."""
    return 0 if etol is None else etol


# --------------------------------------------------------------------------- random inputs

def random_arrays(*shapes):
    """Standard-normal float32 NumPy arrays of the given shapes (one array for one shape)."""
    arrays = [np.random.randn(*shape).astype(default_dtype()) if len(shape)
              else np.array(np.random.randn(), dtype=default_dtype()) for shape in shapes]
    return arrays[0] if len(arrays) == 1 else arrays


def random_uniform_arrays(*shapes, **kwargs):
    """Uniform NumPy arrays on ``[low, high)`` (keywords ``low=0``, ``high=1``,
    ``dtype=float32``), always a list."""
    low = kwargs.pop("low", 0.0)
    high = kwargs.pop("high", 1.0)
    dtype = kwargs.pop("dtype", default_dtype())
    if kwargs:
        raise TypeError("Got unexpected argument/s : " + str(kwargs.keys()))
    return [np.random.uniform(low, high, size=shape).astype(dtype) for shape in shapes]


def random_sample(population, k):
    """``k`` elements of the list ``population`` in a random order (NumPy's global RNG)."""
    assert 0 <= k <= len(population)
    shuffled = list(population)
    np.random.shuffle(shuffled)
    return shuffled[:k]


def _sorted_dict(d):
    return OrderedDict(sorted(d.items(), key=lambda item: item[0]))


def _no_sparse(name, stype=None):
    raise NotImplementedError(
        "test_utils.%s: fastgrad has no sparse storage%s; use dense arrays (stype='default')"
        % (name, "" if stype is None else " (stype=%r)" % (stype,)))


def rand_sparse_ndarray(shape, stype, *args, **kwargs):
    """MXNet's random CSR/row-sparse array: raises, fastgrad has no sparse storage."""
    _no_sparse("rand_sparse_ndarray", stype)


def create_sparse_array(shape, stype, *args, **kwargs):
    """MXNet's sparse array maker: raises, fastgrad has no sparse storage."""
    _no_sparse("create_sparse_array", stype)


def create_sparse_array_zd(shape, stype, *args, **kwargs):
    """MXNet's sparse array maker: raises, fastgrad has no sparse storage."""
    _no_sparse("create_sparse_array_zd", stype)


def shuffle_csr_column_indices(csr):
    """MXNet's CSR index shuffle: raises, fastgrad has no sparse storage."""
    _no_sparse("shuffle_csr_column_indices")


def rand_ndarray(shape, stype="default", density=None, dtype=None, modifier_func=None,
                 shuffle_csr_indices=False, distribution=None, ctx=None):
    """A standard-normal ``mx.nd`` array of ``shape`` (float32 unless ``dtype``)."""
    if stype != "default":
        _no_sparse("rand_ndarray", stype)
    return nd.array(random_arrays(shape), dtype=dtype, ctx=ctx or default_context())


def rand_shape_2d(dim0=10, dim1=10, allow_zero_size=False):
    """A random 2-D shape, each size in ``[1, dim]`` (``[0, dim]`` with allow_zero_size)."""
    low = 0 if allow_zero_size else 1
    return np.random.randint(low, dim0 + 1), np.random.randint(low, dim1 + 1)


def rand_shape_3d(dim0=10, dim1=10, dim2=10, allow_zero_size=False):
    """A random 3-D shape, each size in ``[1, dim]`` (``[0, dim]`` with allow_zero_size)."""
    low = 0 if allow_zero_size else 1
    return (np.random.randint(low, dim0 + 1), np.random.randint(low, dim1 + 1),
            np.random.randint(low, dim2 + 1))


def rand_shape_nd(num_dim, dim=10, allow_zero_size=False):
    """A random shape of ``num_dim`` sizes in ``[1, dim]`` (``[0, dim]`` with
    allow_zero_size)."""
    low = 0 if allow_zero_size else 1
    return tuple(int(d) for d in np.random.randint(low, dim + 1, size=num_dim))


def rand_coord_2d(x_low, x_high, y_low, y_high):
    """A random integer point of ``[x_low, x_high) x [y_low, y_high)``."""
    return (np.random.randint(x_low, x_high, dtype=np.int64),
            np.random.randint(y_low, y_high, dtype=np.int64))


def np_reduce(dat, axis, keepdims, numpy_reduce_func):
    """``numpy_reduce_func`` (``np.sum``, ``np.max``, ...) over ``axis`` (None, an int or a
    list) one axis at a time, keeping the reduced axes as 1 with ``keepdims``."""
    axes = [axis] if isinstance(axis, int) else \
        list(range(dat.ndim)) if axis is None else list(axis)
    out = dat
    for a in sorted(axes, reverse=True):
        out = numpy_reduce_func(out, axis=a)
    if keepdims:
        out = out.reshape(tuple(1 if i in axes else s for i, s in enumerate(dat.shape)))
    return out


def assign_each(the_input, function):
    """``function`` applied to every element of the NumPy array ``the_input``."""
    return np.vectorize(function)(the_input) if function is not None else np.copy(the_input)


def assign_each2(input1, input2, function):
    """``function(a, b)`` over the elements of two NumPy arrays of one shape."""
    assert input1.shape == input2.shape
    return np.vectorize(function)(input1, input2) if function is not None else np.copy(input1)


def create_2d_tensor(rows, columns, dtype=np.int64):
    """``(rows, columns)`` whose row ``i`` is all ``i`` (MXNet's large-tensor helper)."""
    return nd.broadcast_to(nd.arange(0, rows, dtype=dtype).reshape(rows, 1),
                           shape=(rows, columns))


def create_vector(size, dtype=np.int64):
    """``arange(size)`` as an ``mx.nd`` array."""
    return nd.arange(0, size, dtype=dtype)


def get_identity_mat(size):
    """The ``size x size`` identity as an ``mx.nd`` array."""
    return nd.array(np.eye(size, dtype=np.float32))


def get_identity_mat_batch(size):
    """Two stacked identities, shape ``(2, size, size)``."""
    eye = np.eye(size, dtype=np.float32)
    return nd.array(np.stack([eye, eye]))


# --------------------------------------------------------------------------- comparisons

def _as_numpy(x):
    if hasattr(x, "asnumpy"):
        return x.asnumpy()
    return x if isinstance(x, np.generic) else np.asarray(x)


def same(a, b):
    """Whether two arrays have the same shape and elements."""
    return np.array_equal(_as_numpy(a), _as_numpy(b))


def checkShapes(a, b):
    """Raise ``AssertionError`` (MXNet's message) unless ``a`` and ``b`` have one shape."""
    if a.shape != b.shape:
        raise AssertionError(npt.build_err_msg(
            [a, b], err_msg="a.shape = {} and b.shape = {} are not equal".format(
                str(a.shape), str(b.shape))))


def almost_equal(a, b, rtol=None, atol=None, equal_nan=False, use_broadcast=True):
    """Whether ``|a - b| <= atol + rtol * |b|`` everywhere (float64's defaults 1e-5, 1e-20
    when left out)."""
    a, b = _as_numpy(a), _as_numpy(b)
    if not use_broadcast:
        checkShapes(a, b)
    return bool(np.allclose(a, b, rtol=get_rtol(rtol), atol=get_atol(atol),
                            equal_nan=equal_nan))


def locationError(a, b, index, names, maxError=False):
    """MXNet's line naming where two arrays differ and their values there."""
    return "Location of %serror: %s, %s=%.8f, %s=%.8f" % (
        "maximum " if maxError else "", str(index), names[0], a[index], names[1], b[index])


def _violations(a, b, rtol, atol, equal_nan):
    """``|a - b| / (atol + rtol |b|)`` per element (0 where a == b, including equal
    infinities and, with equal_nan, NaNs at the same place; NaN where either is NaN)."""
    with np.errstate(invalid="ignore", over="ignore"):
        diff = np.where(a == b, 0.0, np.abs(a.astype(np.float64) - b.astype(np.float64)))
        if equal_nan:
            diff = np.where(np.isnan(a) & np.isnan(b), 0.0, diff)
        return diff / (atol + rtol * np.abs(b.astype(np.float64)) + 1e-20)


def assert_almost_equal(a, b, rtol=None, atol=None, names=("a", "b"), equal_nan=False,
                        use_broadcast=True, mismatches=(10, 10)):
    """Raise ``AssertionError`` unless ``|a - b| <= atol + rtol * |b|`` everywhere.

    Parameters
    ----------
    a, b : NumPy arrays, ``mx.nd``/``mx.np`` arrays or numbers
    rtol, atol : float or dict of dtype -> float, optional
        Left out, the looser default of the two dtypes (Note [Comparison tolerances]).
    names : pair of str
        What the message calls ``a`` and ``b``.
    equal_nan : bool
        Whether NaNs at the same place are equal.
    use_broadcast : bool
        False requires one shape.
    mismatches : (int, int)
        How many mismatches to print, and to count before saying "at least".
    """
    if not use_broadcast:
        checkShapes(_with_dtype(a), _with_dtype(b))
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = _as_numpy(a), _as_numpy(b)
    if a.dtype == np.bool_ and b.dtype == np.bool_:
        npt.assert_equal(a, b)
        return
    if np.allclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan):
        return
    shown = (a, b)
    a, b = np.broadcast_arrays(a, b)
    violation = _violations(a, b, rtol, atol, equal_nan)
    if a.ndim == 0:
        message = "Error %f exceeds tolerance rtol=%e, atol=%e.\n" % (violation, rtol, atol)
    else:
        # The worst first, a NaN before any number (as MXNet's argmax finds it).
        order = np.argsort(-np.where(np.isnan(violation), np.inf, violation), axis=None,
                           kind="stable")
        bad = int(np.count_nonzero(~np.isclose(a, b, rtol=rtol, atol=atol,
                                               equal_nan=equal_nan)))
        counted = bad if mismatches[1] <= 0 else min(bad, mismatches[1] + 1)
        worst = tuple(int(i) for i in np.unravel_index(order[0], a.shape))
        print("\n*** Maximum errors for vector of size {}:  rtol={}, atol={}\n".format(
            a.size, rtol, atol))
        for i, flat in enumerate(order[:min(bad, mismatches[0])]):
            index = tuple(int(i) for i in np.unravel_index(flat, a.shape))
            print("%3d: Error %f  %s" % (i + 1, violation[index],
                                         locationError(a, b, index, names)))
        message = "Error %f exceeds tolerance rtol=%e, atol=%e (mismatch %s%f%%).\n%s" % (
            violation[worst], rtol, atol,
            "at least " if 0 < mismatches[1] < bad else "", 100.0 * counted / a.size,
            locationError(a, b, worst, names, maxError=True))
    with np.printoptions(threshold=4, suppress=True):
        raise AssertionError(npt.build_err_msg(list(shown), err_msg=message))


def assert_allclose(a, b, rtol=1e-07, atol=0, equal_nan=True):
    """``assert_almost_equal`` with NumPy's ``assert_allclose`` defaults."""
    assert_almost_equal(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)


def assert_almost_equal_with_err(a, b, rtol=None, atol=None, etol=None, names=("a", "b"),
                                 equal_nan=False, mismatches=(10, 10)):
    """``assert_almost_equal`` that lets a share ``etol`` of the elements mismatch."""
    etol = get_etol(etol)
    if etol <= 0:
        assert_almost_equal(a, b, rtol=rtol, atol=atol, names=names, equal_nan=equal_nan,
                            mismatches=mismatches)
        return
    rtol, atol = get_tols(a, b, rtol, atol)
    a, b = _as_numpy(a), _as_numpy(b)
    close = np.isclose(a, b, rtol=rtol, atol=atol, equal_nan=equal_nan)
    if 1 - np.count_nonzero(close) / close.size > etol:
        assert_almost_equal(a, b, rtol=rtol, atol=atol, names=names, equal_nan=equal_nan,
                            mismatches=mismatches)


def assert_almost_equal_ignore_nan(a, b, rtol=None, atol=None, names=("a", "b")):
    """``assert_almost_equal`` where a NaN in either array matches anything."""
    a, b = np.array(_as_numpy(a)), np.array(_as_numpy(b))
    either = np.isnan(a) | np.isnan(b)
    a[either] = 0
    b[either] = 0
    assert_almost_equal(a, b, rtol, atol, names)


def assert_exception(f, exception_type, *args, **kwargs):
    """Raise ``AssertionError`` unless ``f(*args, **kwargs)`` raises ``exception_type``."""
    try:
        f(*args, **kwargs)
    except exception_type:
        return
    raise AssertionError("%s did not raise %s" % (getattr(f, "__name__", f),
                                                  getattr(exception_type, "__name__",
                                                          exception_type)))


def retry(n):
    """Decorator: run a stochastic test up to ``n`` times until it passes (re-raising the
    last ``AssertionError``)."""
    assert n > 0

    def decorate(f):
        def wrapper(*args, **kwargs):
            for attempt in range(n):
                try:
                    return f(*args, **kwargs)
                except AssertionError:
                    if attempt == n - 1:
                        raise
                    nd.waitall()
        wrapper.__name__ = f.__name__
        wrapper.__doc__ = f.__doc__
        return wrapper
    return decorate


def same_array(array1, array2):
    """Whether two ``mx.nd`` arrays share memory (a change of one shows in the other)."""
    array1[:] += 1
    seen = same(array1.asnumpy(), array2.asnumpy())
    array1[:] -= 1
    return seen and same(array1.asnumpy(), array2.asnumpy())


def compare_ndarray_tuple(t1, t2, rtol=None, atol=None):
    """``assert_almost_equal`` over two (nested) tuples of arrays; None skips."""
    if t1 is None or t2 is None:
        return
    if isinstance(t1, tuple):
        for s1, s2 in zip(t1, t2):
            compare_ndarray_tuple(s1, s2, rtol, atol)
    else:
        assert_almost_equal(t1, t2, rtol=rtol, atol=atol)


def collapse_sum_like(a, shape):
    """The NumPy array ``a`` summed down to ``shape`` (which broadcasts to ``a.shape``)."""
    assert len(a.shape) >= len(shape)
    if np.prod(shape) == 0 or a.size == 0:
        return np.zeros(shape, dtype=a.dtype)
    lead = len(a.shape) - len(shape)
    axes = list(range(lead))
    for i, size in enumerate(shape):
        if size != a.shape[lead + i]:
            assert size == 1
            axes.append(lead + i)
    return np.sum(a, axis=tuple(axes)).reshape(shape)


# --------------------------------------------------------------------------- symbols

def _nd_value(value, ctx, dtype):
    """A NumPy array (or number) as an ``mx.nd`` array of ``dtype`` ("asnumpy": its own)."""
    if isinstance(value, np.ndarray):
        return nd.array(value, ctx=ctx, dtype=value.dtype if dtype == "asnumpy" else dtype)
    if isinstance(value, numbers.Number):
        return nd.array(np.asarray(value), ctx=ctx,
                        dtype=None if dtype == "asnumpy" else dtype)
    return value


def _check_dtype(dtype, function, allow_asnumpy=True):
    if not ((allow_asnumpy and isinstance(dtype, str) and dtype == "asnumpy")
            or dtype in (np.float16, np.float32, np.float64)):
        raise ValueError("%s: dtype must be %snp.float16, np.float32 or np.float64, got %r"
                         % (function, "'asnumpy', " if allow_asnumpy else "", dtype))


def _parse_location(sym, location, ctx, dtype=default_dtype()):
    """``location`` (a list in ``sym.list_arguments()`` order or a dict with every argument)
    as a sorted dict of ``mx.nd`` arrays."""
    if not isinstance(location, (dict, list, tuple)):
        raise TypeError("location must be a list, tuple or dict of arrays, got %s"
                        % type(location).__name__)
    arguments = sym.list_arguments()
    if isinstance(location, dict):
        if set(location) != set(arguments):
            raise ValueError("Symbol arguments and keys of the given location do not match."
                             "symbol args:%s, location.keys():%s"
                             % (str(set(arguments)), str(set(location))))
    else:
        if len(location) != len(arguments):
            raise ValueError("location has %d arrays but the symbol has %d arguments %s"
                             % (len(location), len(arguments), arguments))
        location = dict(zip(arguments, location))
    return _sorted_dict({k: _nd_value(v, ctx, dtype) for k, v in location.items()})


def _parse_aux_states(sym, aux_states, ctx, dtype=default_dtype()):
    """``aux_states`` (a list in ``sym.list_auxiliary_states()`` order or a dict with every
    state) as a dict of ``mx.nd`` arrays, or None."""
    if aux_states is None:
        return None
    names = sym.list_auxiliary_states()
    if isinstance(aux_states, dict):
        if set(aux_states) != set(names):
            raise ValueError("Symbol aux_states names and given aux_states do not match."
                             "symbol aux_names:%s, aux_states.keys:%s"
                             % (str(set(names)), str(set(aux_states))))
    else:
        aux_states = dict(zip(names, aux_states))
    return {k: _nd_value(np.asarray(_as_numpy(v)), ctx, dtype) for k, v in aux_states.items()}


def _assign(arr, value):
    """Write ``value`` into the bound array ``arr`` in place (a 0-d array too)."""
    if arr.ndim == 0:
        arr[()] = value
    else:
        arr[:] = value


def simple_forward(sym, ctx=None, is_train=False, **inputs):
    """The outputs of ``sym`` bound to the NumPy arrays ``inputs`` (one array for one
    output)."""
    exe = sym.bind(ctx or default_context(),
                   args={k: nd.array(v) for k, v in inputs.items()})
    exe.forward(is_train=is_train)
    outputs = [out.asnumpy() for out in exe.outputs]
    return outputs[0] if len(outputs) == 1 else outputs


def numeric_grad(executor, location, aux_states=None, eps=1e-4, use_forward_train=True,
                 dtype=default_dtype()):
    """Central finite differences ``(f(x + eps/2) - f(x - eps/2)) / eps`` of the sum of the
    executor's first output, for each element of each floating array of ``location`` (a
    dict of NumPy arrays, moved in place and restored); ``aux_states`` are reset before each
    evaluation."""
    _check_dtype(dtype, "numeric_grad", allow_asnumpy=False)
    location = {k: np.array(v, order="C") for k, v in location.items()}
    approx = {k: np.zeros(v.shape, dtype=dtype) for k, v in location.items()}
    for k, v in location.items():
        _assign(executor.arg_dict[k], nd.array(v, dtype=dtype))

    def evaluate(k, v):
        _assign(executor.arg_dict[k], nd.array(v, dtype=dtype))
        if aux_states is not None:
            for name, value in aux_states.items():
                _assign(executor.aux_dict[name], nd.array(value, dtype=dtype))
        executor.forward(is_train=use_forward_train)
        return executor.outputs[0].asnumpy()

    for k, v in location.items():
        if v.dtype.kind != "f":
            continue
        flat = v.reshape(-1)
        for i in range(flat.size):
            original = flat[i]
            flat[i] = original + eps / 2.0
            above = evaluate(k, v)
            flat[i] = original - eps / 2.0
            below = evaluate(k, v)
            approx[k].reshape(-1)[i] = (above.astype(np.float64)
                                        - below.astype(np.float64)).sum() / eps
            flat[i] = original
        _assign(executor.arg_dict[k], nd.array(v, dtype=dtype))
    return approx


def check_numeric_gradient(sym, location, aux_states=None, numeric_eps=None, rtol=None,
                           atol=None, grad_nodes=None, use_forward_train=True, ctx=None,
                           grad_stype_dict=None, dtype=default_dtype()):
    """Check the gradients of ``sym`` at ``location`` against finite differences.

    As MXNet does, the single output of ``sym`` is multiplied by a fixed random projection
    (elements in ``[0.1, 1.1)``) and made a loss; its backward through the bound Executor is
    compared with :func:`numeric_grad` of the projected sum, for each argument of
    ``grad_nodes`` (all by default; a dict gives each a ``grad_req``: ``'write'``, ``'add'``
    (the gradient is added to a random buffer) or ``'null'`` (the buffer stays)).

    Raises ``AssertionError`` naming ``NUMERICAL_<arg>`` and ``BACKWARD_<arg>`` where they
    differ by more than ``rtol``/``atol``.
    """
    _check_dtype(dtype, "check_numeric_gradient", allow_asnumpy=False)
    if grad_stype_dict:
        if any(v != "default" for v in grad_stype_dict.values()):
            _no_sparse("check_numeric_gradient (grad_stype_dict)")
    ctx = ctx or default_context()
    location = _parse_location(sym, location, ctx, dtype)
    location_npy = {k: v.asnumpy() for k, v in location.items()}
    aux_states = _parse_aux_states(sym, aux_states, ctx, dtype)
    aux_states_npy = None if aux_states is None else \
        {k: v.asnumpy() for k, v in aux_states.items()}
    if grad_nodes is None:
        grad_nodes = sym.list_arguments()
        grad_req = {k: "write" for k in grad_nodes}
    elif isinstance(grad_nodes, (list, tuple)):
        grad_nodes = list(grad_nodes)
        grad_req = {k: "write" for k in grad_nodes}
    elif isinstance(grad_nodes, dict):
        grad_req = dict(grad_nodes)
        grad_nodes = list(grad_nodes)
    else:
        raise ValueError("check_numeric_gradient: grad_nodes must be None, a list or a dict "
                         "of argument names, got %r" % (grad_nodes,))

    _, out_shapes, _ = sym.infer_shape(**{k: v.shape for k, v in location.items()})
    if len(out_shapes) != 1:
        raise ValueError("check_numeric_gradient: the symbol must have one output, it has %d "
                         "(%s)" % (len(out_shapes), sym.list_outputs()))
    projection = sym_module.Variable("__random_proj")
    loss = sym_module.make_loss(sym * projection)
    location = dict(location)
    location["__random_proj"] = nd.array(np.random.rand(*out_shapes[0]) + 0.1, ctx=ctx,
                                         dtype=dtype)
    grad_buffers_npy = {k: np.random.normal(0, 0.01, size=location[k].shape)
                        for k in grad_nodes}
    grad_buffers_npy["__random_proj"] = np.random.normal(0, 0.01, size=out_shapes[0])
    grad_buffers = {k: nd.array(v, ctx=ctx, dtype=dtype) for k, v in grad_buffers_npy.items()}
    executor = loss.bind(ctx, grad_req=grad_req, args=location, args_grad=grad_buffers,
                         aux_states=aux_states)
    if len(executor.arg_arrays) != len(location):
        raise ValueError("Executor arg_arrays and and location len do not match."
                         "Got %d inputs and %d locations" % (len(executor.arg_arrays),
                                                             len(location)))
    executor.forward(is_train=True)
    eps = get_tolerance(executor.outputs[0], numeric_eps, default_numeric_eps())
    if dtype in (np.float32, np.float16) and eps < 1e-5:
        raise AssertionError("check_numeric_gradient: numeric_eps=%g is too small for %s "
                             "finite differences (at least 1e-5)" % (eps, np.dtype(dtype)))
    executor.backward()
    symbolic = executor.grad_dict
    numeric = numeric_grad(executor, location_npy, aux_states_npy, eps=eps,
                           use_forward_train=use_forward_train, dtype=dtype)
    for name in grad_nodes:
        req = grad_req[name]
        names = ("NUMERICAL_%s" % name, "BACKWARD_%s" % name)
        if req == "write":
            assert_almost_equal(numeric[name], symbolic[name], rtol, atol, names)
        elif req == "add":
            assert_almost_equal(numeric[name],
                                _as_numpy(symbolic[name]) - grad_buffers_npy[name],
                                rtol, atol, names)
        elif req == "null":
            assert_almost_equal(grad_buffers_npy[name], grad_buffers[name], rtol, atol, names)
        else:
            raise ValueError("Invalid grad_req %s for argument %s" % (req, name))


def check_symbolic_forward(sym, location, expected, rtol=None, atol=None, aux_states=None,
                           ctx=None, equal_nan=False, dtype=default_dtype()):
    """Check the outputs of ``sym`` bound at ``location`` (predict mode) against
    ``expected`` (a list in output order or a dict by output name); return the outputs.

    Raises ``AssertionError`` naming ``EXPECTED_<output>`` and ``FORWARD_<output>``.
    """
    _check_dtype(dtype, "check_symbolic_forward")
    ctx = ctx or default_context()
    location = _parse_location(sym, location, ctx, dtype)
    aux_states = _parse_aux_states(sym, aux_states, ctx, dtype)
    if isinstance(expected, dict):
        expected = [expected[k] for k in sym.list_outputs()]
    grads = {k: nd.zeros(v.shape, ctx=ctx, dtype=v.dtype) for k, v in location.items()}
    executor = sym.bind(ctx=ctx, args=location, args_grad=grads, aux_states=aux_states)
    executor.forward(is_train=False)
    if len(expected) != len(executor.outputs):
        raise ValueError("check_symbolic_forward: %d expected arrays for %d outputs %s"
                         % (len(expected), len(executor.outputs), sym.list_outputs()))
    for name, want, got in zip(sym.list_outputs(), expected, executor.outputs):
        assert_almost_equal(want, got, rtol, atol, ("EXPECTED_%s" % name, "FORWARD_%s" % name),
                            equal_nan=equal_nan)
    return executor.outputs


def _head_gradient(value, ctx, dtype):
    return _nd_value(value, ctx, dtype) if isinstance(value, np.ndarray) else value


def check_symbolic_backward(sym, location, out_grads, expected, rtol=None, atol=None,
                            aux_states=None, grad_req="write", ctx=None, grad_stypes=None,
                            equal_nan=False, dtype=default_dtype()):
    """Check the gradients of ``sym`` at ``location`` for head gradients ``out_grads``
    against ``expected`` (a list in argument order or a dict by argument name); return the
    gradient arrays by name.

    The gradient buffers start random (so ``grad_req='add'`` is checked as the added
    amount and ``'null'`` as an untouched buffer). Raises ``AssertionError`` naming
    ``EXPECTED_<arg>`` and ``BACKWARD_<arg>``.
    """
    _check_dtype(dtype, "check_symbolic_backward")
    if grad_stypes and any(v not in (None, "default") for v in grad_stypes.values()):
        _no_sparse("check_symbolic_backward (grad_stypes)")
    ctx = ctx or default_context()
    location = _parse_location(sym, location, ctx, dtype)
    aux_states = _parse_aux_states(sym, aux_states, ctx, dtype)
    if isinstance(expected, (list, tuple)):
        expected = dict(zip(sym.list_arguments(), expected))
    buffers_npy = {k: np.random.normal(size=v.shape)
                   for k, v in sorted(expected.items(), key=lambda item: item[0])}
    buffers = {k: nd.array(v, ctx=ctx, dtype=expected[k].dtype if dtype == "asnumpy"
                           else dtype) for k, v in buffers_npy.items()}
    if isinstance(grad_req, str):
        grad_req = {k: grad_req for k in sym.list_arguments()}
    elif isinstance(grad_req, (list, tuple)):
        grad_req = dict(zip(sym.list_arguments(), grad_req))
    executor = sym.bind(ctx=ctx, args=location, args_grad=buffers, aux_states=aux_states,
                        grad_req=grad_req)
    executor.forward(is_train=True)
    if isinstance(out_grads, (list, tuple)):
        out_grads = [_head_gradient(g, ctx, dtype) for g in out_grads]
    elif isinstance(out_grads, dict):
        out_grads = {k: _head_gradient(g, ctx, dtype) for k, g in out_grads.items()}
    elif out_grads is not None:
        raise TypeError("check_symbolic_backward: out_grads must be None, a list or a dict, "
                        "got %s" % type(out_grads).__name__)
    executor.backward(out_grads)
    for name in expected:
        req = grad_req[name]
        names = ("EXPECTED_%s" % name, "BACKWARD_%s" % name)
        if req == "write":
            assert_almost_equal(expected[name], buffers[name], rtol, atol, names,
                                equal_nan=equal_nan)
        elif req == "add":
            assert_almost_equal(expected[name], buffers[name].asnumpy() - buffers_npy[name],
                                rtol, atol, names, equal_nan=equal_nan)
        elif req == "null":
            assert_almost_equal(buffers_npy[name], buffers[name], rtol, atol, names,
                                equal_nan=equal_nan)
        else:
            raise ValueError("Invalid grad_req %s for argument %s" % (req, name))
    return buffers


def check_speed(sym, location=None, ctx=None, N=20, grad_req=None, typ="whole", **kwargs):
    """Seconds per forward and backward (``typ='whole'``) or per forward (``'forward'``) of
    ``sym`` bound with ``simple_bind`` to ``location`` (random normal values by default; the
    shapes come from ``kwargs`` then)."""
    ctx = ctx or default_context()
    grad_req = grad_req or "write"
    if location is None:
        exe = sym.simple_bind(grad_req=grad_req, ctx=ctx, **kwargs)
        location = {k: np.random.normal(size=arr.shape, scale=1.0)
                    for k, arr in exe.arg_dict.items()}
    else:
        if not isinstance(location, dict):
            raise TypeError('Expect dict, get "location"=%s' % str(location))
        exe = sym.simple_bind(grad_req=grad_req, ctx=ctx,
                              **{k: v.shape for k, v in location.items()})
    for name, value in location.items():
        _assign(exe.arg_dict[name], value.astype(exe.arg_dict[name].dtype))
    if typ not in ("whole", "forward"):
        raise ValueError('typ can only be "whole" or "forward".')
    train = typ == "whole"

    def step():
        exe.forward(is_train=train)
        if train:
            exe.backward(out_grads=exe.outputs)

    step()
    tic = time.time()
    for _ in range(N):
        step()
    nd.waitall()
    return (time.time() - tic) / N


def check_consistency(sym, ctx_list, scale=1.0, grad_req="write", arg_params=None,
                      aux_params=None, rtol=None, atol=None, raise_on_err=True,
                      ground_truth=None, equal_nan=False, use_uniform=False,
                      rand_type=np.float64):
    """Check that ``sym`` gives the same outputs and gradients under each binding of
    ``ctx_list`` (dicts of ``ctx``, input shapes and ``type_dict``, as MXNet's), against the
    most precise one; return the ground truth (outputs and gradients by name).

    fastgrad runs every binding on the CPU, so this compares dtypes; a GPU context raises.
    """
    if len(ctx_list) < 2:
        raise ValueError("check_consistency: ctx_list needs at least two bindings")
    syms = [sym] * len(ctx_list) if isinstance(sym, Symbol) else list(sym)
    if len(syms) != len(ctx_list):
        raise ValueError("check_consistency: %d symbols for %d bindings"
                         % (len(syms), len(ctx_list)))
    output_names = syms[0].list_outputs()
    arg_names = syms[0].list_arguments()
    exes = []
    for s, spec in zip(syms, ctx_list):
        if s.list_arguments() != arg_names or s.list_outputs() != output_names:
            raise ValueError("check_consistency: the symbols differ in their arguments or "
                             "outputs")
        exes.append(s.simple_bind(grad_req=grad_req, **spec))
    arg_params = {} if arg_params is None else arg_params
    aux_params = {} if aux_params is None else aux_params
    for name, arr in sorted(exes[0].arg_dict.items(), key=lambda item: item[0]):
        if name not in arg_params:
            arg_params[name] = (np.random.uniform(-0.92 * scale, 0.92 * scale, size=arr.shape)
                                if use_uniform else
                                np.random.normal(size=arr.shape, scale=scale)).astype(rand_type)
    for name in exes[0].aux_dict:
        aux_params.setdefault(name, 0)
    for exe in exes:
        for name, arr in exe.arg_dict.items():
            _assign(arr, arg_params[name])
        for name, arr in exe.aux_dict.items():
            _assign(arr, aux_params[name])
        if grad_req == "add":
            for arr in exe.grad_arrays:
                if arr is not None:
                    _assign(arr, 0)
    dtypes = [np.dtype(exe.outputs[0].dtype) for exe in exes]
    truth_index = int(np.argmax([d.itemsize for d in dtypes]))
    for exe in exes:
        exe.forward(is_train=False)
    truth = ground_truth
    if truth is None:
        truth = {k: v.copy() for k, v in exes[truth_index].output_dict.items()}

    def compare(got, want, name, what, i, rt, at):
        try:
            assert_almost_equal(got, want, rtol=rt, atol=at, equal_nan=equal_nan)
        except AssertionError as e:
            print("%s Err: ctx %d vs ctx %d at %s" % (what, i, truth_index, name))
            traceback.print_exc()
            if raise_on_err:
                raise e
            print(str(e))

    for i, exe in enumerate(exes):
        if i != truth_index:
            for name, out in zip(output_names, exe.outputs):
                compare(out, truth[name], name, "Predict", i, rtol, atol)
    if grad_req != "null":
        for exe in exes:
            exe.forward(is_train=True)
        least = [min((np.dtype(e.outputs[j].dtype) for e in exes), key=lambda d: d.itemsize)
                 for j in range(len(output_names))]
        heads = [out.asnumpy().astype(d) for out, d in zip(exes[0].outputs, least)]
        for exe in exes:
            exe.backward([nd.array(h, dtype=out.dtype) for h, out in zip(heads, exe.outputs)])
        if ground_truth is None:
            truth.update({k: v.copy() for k, v in exes[truth_index].output_dict.items()})
            truth.update({k: (None if v is None else v.copy())
                          for k, v in exes[truth_index].grad_dict.items()})
        for i, exe in enumerate(exes):
            if i == truth_index:
                continue
            for name, arr in zip(output_names + arg_names, exe.outputs + exe.grad_arrays):
                if truth.get(name) is None:
                    assert arr is None
                    continue
                rt, at = rtol, atol
                if rt is None or atol is None:
                    lower = min(np.dtype(arr.dtype), dtypes[i], key=lambda d: d.itemsize)
                    rt, at = get_tols(np.zeros(0, lower), truth[name], rtol, atol)
                compare(arr, truth[name], name, "Train", i, rt, at)
    return truth


def same_symbol_structure(sym1, sym2):
    """Whether two symbols' graphs have the same operator at every node position."""
    nodes1 = json.loads(sym1.tojson())["nodes"]
    nodes2 = json.loads(sym2.tojson())["nodes"]
    return all(n1["op"] == n2["op"] for n1, n2 in zip(nodes1, nodes2))


# --------------------------------------------------------------------------- gluon, optimizers

class _NumpyValues(initializer.Initializer):
    """Initialise each parameter from a dict of NumPy arrays by parameter name."""

    def __init__(self, values):
        super().__init__()
        self._values = values

    def _init_weight(self, name, arr):
        _assign(arr, self._values[name])

    _init_bias = _init_gamma = _init_beta = _init_default = _init_weight


def check_gluon_hybridize_consistency(net_builder, data_l, numpy_func=None, test_grad=True,
                                      rtol=1E-4, atol=1E-4):
    """Check that a HybridBlock from ``net_builder(prefix='net_')`` gives the same outputs
    (and input gradients, with ``test_grad``) imperatively and hybridized, with one set of
    parameter values, and matches ``numpy_func`` when given. Runs with NumPy semantics
    (``npx.set_np()``) as MXNet's ``@use_np`` does."""
    was_requested, float64 = npx.is_np_array_requested(), npx.is_np_default_dtype()
    npx.set_np(array=True, dtype=float64)
    try:
        _hybridize_consistency(net_builder, data_l, numpy_func, test_grad, rtol, atol)
    finally:
        npx.set_np(array=was_requested, dtype=float64)


def _hybridize_consistency(net_builder, data_l, numpy_func, test_grad, rtol, atol):
    saved_out, saved_grads, values = None, None, None
    for hybridize in (False, True):
        for use_autograd in ((False, True) if test_grad else (False,)):
            net = net_builder(prefix="net_")
            if values is None:
                net.initialize()
            else:
                net.initialize(_NumpyValues(values))
            if hybridize:
                net.hybridize()
            inputs = [x.copy() for x in data_l]
            if use_autograd:
                for x in inputs:
                    x.attach_grad()
                with autograd.record():
                    out = net(*inputs)
                out.backward(out)
            else:
                out = net(*inputs)
            if values is None:
                values = {k: v.data().asnumpy() for k, v in net.collect_params().items()}
            if saved_out is None:
                saved_out = out.asnumpy()
            else:
                assert_almost_equal(out.asnumpy(), saved_out, rtol=rtol, atol=atol)
            if use_autograd:
                grads = [x.grad.asnumpy() for x in inputs]
                if saved_grads is None:
                    saved_grads = grads
                else:
                    for got, want in zip(grads, saved_grads):
                        assert_almost_equal(got, want, rtol=rtol, atol=atol)
    if numpy_func is not None:
        assert_almost_equal(saved_out, numpy_func(*[x.asnumpy() for x in data_l]),
                            rtol=rtol, atol=atol)


def compare_optimizer(opt1, opt2, shape, dtype, w_stype="default", g_stype="default",
                      rtol=1e-4, atol=1e-5, compare_states=True, ntensors=1):
    """Check that two optimizers make the same states and the same update of one random
    weight and gradient of ``shape`` (a list of shapes: ``opt2`` updates them in one
    multi-tensor call, ``opt1`` one by one)."""
    if w_stype != "default" or g_stype != "default":
        _no_sparse("compare_optimizer", w_stype if w_stype != "default" else g_stype)
    ctx = default_context()
    if not isinstance(shape, list):
        assert ntensors == 1
        w2 = nd.random.uniform(shape=shape, ctx=ctx, dtype=dtype)
        w1 = w2.copy()
        g2 = nd.random.uniform(shape=shape, ctx=ctx, dtype=dtype)
        g1 = g2.copy()
        state1 = opt1.create_state_multi_precision(0, w1)
        state2 = opt2.create_state_multi_precision(0, w2)
        if compare_states:
            compare_ndarray_tuple(state1, state2)
        opt1.update_multi_precision(0, w1, g1, state1)
        opt2.update_multi_precision(0, w2, g2, state2)
        if compare_states:
            compare_ndarray_tuple(state1, state2, rtol=rtol, atol=atol)
        assert_almost_equal(w1, w2, rtol=rtol, atol=atol)
        return
    w1 = [nd.random.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shape]
    g1 = [nd.random.uniform(shape=s, ctx=ctx, dtype=dtype) for s in shape]
    w2 = [w.copy() for w in w1]
    g2 = [g.copy() for g in g1]
    state2 = [opt2.create_state_multi_precision(0, w2[i]) for i in range(ntensors)]
    opt2.update_multi_precision(list(range(ntensors)), w2, g2, state2)
    for i in range(ntensors):
        state1 = opt1.create_state_multi_precision(i, w1[i])
        opt1.update_multi_precision(i, w1[i], g1[i], state1)
        if compare_states:
            compare_ndarray_tuple(state1, state2[i], rtol, atol)
        compare_ndarray_tuple(w1[i], w2[i], rtol, atol)


class DummyIter(mx_io.DataIter):
    """A data iterator that returns the first batch of ``real_iter`` forever (for timing)."""

    def __init__(self, real_iter):
        super().__init__()
        self.real_iter = real_iter
        self.provide_data = real_iter.provide_data
        self.provide_label = real_iter.provide_label
        self.batch_size = real_iter.batch_size
        self.the_batch = next(real_iter)

    def __iter__(self):
        return self

    def next(self):
        """The first batch of the real iterator, again."""
        return self.the_batch

    __next__ = next


# --------------------------------------------------------------------------- environment

def list_gpus():
    """The GPUs fastgrad can use: none (``range(0)``, as MXNet without CUDA)."""
    return range(num_gpus())


@contextlib.contextmanager
def environment(*args):
    """``with environment('NAME', 'value'):`` or ``with environment({'A': '1', 'B': None}):``
    sets (None: unsets) environment variables for the block and restores them after."""
    if len(args) == 1 and isinstance(args[0], dict):
        wanted = dict(args[0])
    elif len(args) == 2:
        wanted = {args[0]: args[1]}
    else:
        raise TypeError("environment: expecting one dict arg or two args: env var name and "
                        "value, got %d arguments" % len(args))

    def apply(values):
        for name, value in values.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value

    before = {name: os.environ.get(name) for name in wanted}
    apply(wanted)
    try:
        yield
    finally:
        nd.waitall()
        apply(before)


@contextlib.contextmanager
def discard_stderr():
    """Discard what the block writes to the standard error file descriptor."""
    with open(os.devnull, "w") as devnull:
        try:
            fileno = sys.stderr.fileno()
        except (AttributeError, ValueError, OSError):
            yield
            return
        saved = os.dup(fileno)
        try:
            os.dup2(devnull.fileno(), fileno)
            yield
        finally:
            os.dup2(saved, fileno)
            os.close(saved)


def is_cd_run():
    """Whether the ``CD_JOB`` environment variable is ``'1'``."""
    return os.environ.get("CD_JOB", 0) == "1"


def is_aarch64_run():
    """Whether this machine is aarch64."""
    return platform.machine() == "aarch64"


def has_tvm_ops():
    """Whether operators built with TVM exist: never in fastgrad."""
    return False


def is_op_runnable():
    """Whether operators run on the current context: always (a CPU)."""
    return True


# --------------------------------------------------------------------------- files

def download(url, fname=None, dirname=None, overwrite=False, retries=5):
    """``fname`` (or the URL's last part, in ``dirname``) if it exists and not
    ``overwrite``, else download it with ``gluon.utils.download`` (which raises clearly
    without network access)."""
    if retries < 0:
        raise AssertionError("Number of retries should be at least 0")
    if fname is None:
        fname = url.split("/")[-1]
    if dirname is None:
        dirname = os.path.dirname(fname)
    else:
        fname = os.path.join(dirname, fname)
    if dirname:
        os.makedirs(dirname, exist_ok=True)
    if not overwrite and os.path.exists(fname):
        logging.info("%s exists, skipping download", fname)
        return fname
    return gluon_utils.download(url, path=fname, overwrite=True, retries=retries)


_MODEL_URL = "http://data.mxnet.io/models/"
_MODEL_FILES = {
    "imagenet1k-inception-bn": "imagenet/inception-bn/Inception-BN",
    "imagenet1k-resnet-18": "imagenet/resnet/18-layers/resnet-18",
    "imagenet1k-resnet-34": "imagenet/resnet/34-layers/resnet-34",
    "imagenet1k-resnet-50": "imagenet/resnet/50-layers/resnet-50",
    "imagenet1k-resnet-101": "imagenet/resnet/101-layers/resnet-101",
    "imagenet1k-resnet-152": "imagenet/resnet/152-layers/resnet-152",
    "imagenet1k-resnext-50": "imagenet/resnext/50-layers/resnext-50",
    "imagenet1k-resnext-101": "imagenet/resnext/101-layers/resnext-101",
    "imagenet1k-resnext-101-64x4d": "imagenet/resnext/101-layers/resnext-101-64x4d",
    "imagenet11k-resnet-152": "imagenet-11k/resnet-152/resnet-152",
    "imagenet11k-place365ch-resnet-152": "imagenet-11k-place365-ch/resnet-152",
    "imagenet11k-place365ch-resnet-50": "imagenet-11k-place365-ch/resnet-50",
}


def download_model(model_name, dst_dir="./", meta_info=None):
    """Fetch ``<model_name>-symbol.json`` and ``-0000.params`` into ``dst_dir`` (kept when
    present) from ``meta_info`` (``{name: {'symbol': url, 'params': url}}``, MXNet's
    data.mxnet.io list by default); ``(None, 0)`` for an unknown name, else
    ``(path prefix, 0)``."""
    if meta_info is None:
        meta_info = {name: {"symbol": _MODEL_URL + path + "-symbol.json",
                            "params": _MODEL_URL + path +
                            ("-0126.params" if name == "imagenet1k-inception-bn"
                             else "-0000.params")}
                     for name, path in _MODEL_FILES.items()}
    if model_name not in meta_info:
        return (None, 0)
    os.makedirs(dst_dir, exist_ok=True)
    meta = meta_info[model_name]
    prefix = os.path.join(dst_dir, model_name)
    download(meta["symbol"], prefix + "-symbol.json")
    download(meta["params"], prefix + "-0000.params")
    return (prefix, 0)


def get_mnist():
    """MNIST as a dict of NumPy arrays (``train_data`` (N, 1, 28, 28) float32 in [0, 1],
    ``train_label`` int8, ``test_data``, ``test_label``) from the four ``*-ubyte.gz`` files
    in the current directory (downloaded when missing)."""
    base = "http://data.mxnet.io/data/mnist/"

    def read(label_file, image_file):
        with gzip.open(download(base + label_file)) as f:
            struct.unpack(">II", f.read(8))
            label = np.frombuffer(f.read(), dtype=np.int8)
        with gzip.open(download(base + image_file), "rb") as f:
            _, _, rows, cols = struct.unpack(">IIII", f.read(16))
            image = np.frombuffer(f.read(), dtype=np.uint8).reshape(len(label), 1, rows, cols)
        return label, image.astype(np.float32) / 255

    train_label, train_data = read("train-labels-idx1-ubyte.gz", "train-images-idx3-ubyte.gz")
    test_label, test_data = read("t10k-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz")
    return {"train_data": train_data, "train_label": train_label,
            "test_data": test_data, "test_label": test_label}


def get_mnist_pkl():
    """``data/mnist.pkl.gz`` (downloaded when missing)."""
    os.makedirs("data", exist_ok=True)
    if not os.path.exists("data/mnist.pkl.gz"):
        download("http://deeplearning.net/data/mnist/mnist.pkl.gz", dirname="data")


def _extract_zip_into_data(url, wanted):
    os.makedirs("data", exist_ok=True)
    if not all(os.path.exists(os.path.join("data", f)) for f in wanted):
        with zipfile.ZipFile(download(url, dirname="data")) as zf:
            zf.extractall("data")


def get_mnist_ubyte():
    """MNIST's four ``*-ubyte`` files in ``data/`` (from MXNet's mnist.zip when missing)."""
    _extract_zip_into_data("http://data.mxnet.io/mxnet/data/mnist.zip",
                           ["train-images-idx3-ubyte", "train-labels-idx1-ubyte",
                            "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"])


def get_cifar10():
    """CIFAR-10's RecordIO files in ``data/cifar/`` (from MXNet's cifar10.zip when
    missing)."""
    _extract_zip_into_data("http://data.mxnet.io/mxnet/data/cifar10.zip",
                           ["cifar/train.rec", "cifar/test.rec", "cifar/train.lst",
                            "cifar/test.lst"])


def get_mnist_iterator(batch_size, input_shape, num_parts=1, part_index=0):
    """Training and validation ``mx.io.MNISTIter`` over ``data/`` (see
    :func:`get_mnist_ubyte`)."""
    get_mnist_ubyte()
    flat = len(input_shape) != 3
    train = mx_io.MNISTIter(image="data/train-images-idx3-ubyte",
                            label="data/train-labels-idx1-ubyte", input_shape=input_shape,
                            batch_size=batch_size, shuffle=True, flat=flat,
                            num_parts=num_parts, part_index=part_index)
    val = mx_io.MNISTIter(image="data/t10k-images-idx3-ubyte",
                          label="data/t10k-labels-idx1-ubyte", input_shape=input_shape,
                          batch_size=batch_size, flat=flat, num_parts=num_parts,
                          part_index=part_index)
    return train, val


def get_zip_data(data_dir, url, data_origin_name):
    """Download ``url`` into ``data_dir`` and extract it, unless ``data_origin_name`` is
    there."""
    origin = os.path.join(data_dir, data_origin_name)
    if not os.path.exists(origin):
        download(url, dirname=data_dir, overwrite=False)
        with zipfile.ZipFile(origin) as zf:
            zf.extractall(path=data_dir)


def get_bz2_data(data_dir, data_name, url, data_origin_name):
    """Download the bz2 file ``url`` into ``data_dir`` and decompress it to ``data_name``,
    unless that exists."""
    target = os.path.join(data_dir, data_name)
    origin = os.path.join(data_dir, data_origin_name)
    if not os.path.exists(target):
        download(url, fname=origin, dirname=data_dir, overwrite=False)
        with bz2.BZ2File(origin, "rb") as src, open(target, "wb") as out:
            for line in src:
                out.write(line)


def get_im2rec_path(home_env="MXNET_HOME"):
    """MXNet's ``tools/im2rec.py``: fastgrad does not ship it."""
    raise FileNotFoundError("get_im2rec_path: fastgrad does not ship MXNet's tools/im2rec.py; "
                            "use the one of an MXNet source tree")


# --------------------------------------------------------------------------- matrices

def new_matrix_with_real_eigvals_2d(n):
    """A random ``n x n`` matrix ``Q^-1 D Q`` with real eigenvalues in [-10, 10] and a
    well-conditioned ``Q``."""
    while True:
        v = np.random.uniform(-1.0, 1.0, n).reshape(n, 1)
        v /= np.linalg.norm(v)
        q = (np.eye(n) - 2 * v @ v.T) @ np.diag(np.random.uniform(-1.0, 1.0, n))
        if np.linalg.cond(q, 2) < 3:
            break
    return np.linalg.inv(q) @ np.diag(np.random.uniform(-10.0, 10.0, n)) @ q


def new_matrix_with_real_eigvals_nd(shape):
    """Stacked :func:`new_matrix_with_real_eigvals_2d` of ``shape``."""
    count = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    return np.array([new_matrix_with_real_eigvals_2d(shape[-1])
                     for _ in range(count)]).reshape(shape)


def new_orthonormal_matrix_2d(n):
    """A random orthonormal ``n x n`` matrix."""
    x = np.random.randn(n, n)
    return np.linalg.qr(x.T @ x)[0]


def new_sym_matrix_with_real_eigvals_2d(n):
    """A random symmetric ``n x n`` matrix with eigenvalues in [-10, 10]."""
    q = new_orthonormal_matrix_2d(n)
    return q.T @ np.diag(np.random.uniform(-10.0, 10.0, n)) @ q


def new_sym_matrix_with_real_eigvals_nd(shape):
    """Stacked :func:`new_sym_matrix_with_real_eigvals_2d` of ``shape``."""
    count = int(np.prod(shape[:-2])) if len(shape) > 2 else 1
    return np.array([new_sym_matrix_with_real_eigvals_2d(shape[-1])
                     for _ in range(count)]).reshape(shape)


# --------------------------------------------------------------------------- random generators

def _scipy_stats(function):
    try:
        import scipy.stats  # optional dependency, imported on first use
    except ImportError as e:
        raise ImportError("test_utils.%s needs SciPy (pip install scipy)" % function) from e
    return scipy.stats


def gen_buckets_probs_with_ppf(ppf, nbuckets):
    """``nbuckets`` equally likely buckets ``[(ppf(i/n), ppf((i+1)/n))]`` of a distribution
    given by its quantile function, and their probabilities."""
    probs = [1.0 / nbuckets] * nbuckets
    buckets = [(ppf(i / float(nbuckets)), ppf((i + 1) / float(nbuckets)))
               for i in range(nbuckets)]
    return buckets, probs


def mean_check(generator, mu, sigma, nsamples=1000000):
    """Whether the mean of ``generator(nsamples)`` is within 3 standard errors of ``mu``."""
    samples = np.array(generator(nsamples))
    return abs(np.mean(samples) - mu) < 3 * sigma / np.sqrt(nsamples)


def var_check(generator, sigma, nsamples=1000000):
    """Whether the unbiased variance of ``generator(nsamples)`` is within 3 standard errors
    of ``sigma ** 2`` (normal approximation)."""
    samples = np.array(generator(nsamples))
    return abs(np.var(samples, ddof=1) - sigma ** 2) < \
        3 * np.sqrt(2 * sigma ** 4 / (nsamples - 1))


def chi_square_check(generator, buckets, probs, nsamples=1000000):
    """Chi-square goodness of fit of ``generator(nsamples)`` to ``buckets`` (value lists for
    a discrete distribution, ``(low, high)`` ranges for a continuous one) with ``probs``;
    returns ``(p value, observed frequencies, expected frequencies)``."""
    stats = _scipy_stats("chi_square_check")
    if not (all(isinstance(b, (list, tuple)) for b in buckets) or
            all(isinstance(b, numbers.Number) for b in buckets)):
        raise ValueError("chi_square_check: buckets must be all ranges or all values")
    samples = np.asarray(_as_numpy(generator(nsamples))).reshape(-1)
    expected = np.array(probs, dtype=np.float64) * nsamples
    if isinstance(buckets[0], numbers.Number):
        values, counts = np.unique(samples, return_counts=True)
        lookup = dict(zip(values.tolist(), counts.tolist()))
        observed = np.array([lookup.get(b, 0) for b in buckets], dtype=np.float64)
    else:
        observed = np.array([np.count_nonzero((samples >= low) & (samples < high))
                             for low, high in buckets], dtype=np.float64)
    _, p = stats.chisquare(f_obs=observed, f_exp=expected)
    return p, observed, expected


def verify_generator(generator, buckets, probs, nsamples=1000000, nrepeat=5,
                     success_rate=0.2, alpha=0.05):
    """Run :func:`chi_square_check` ``nrepeat`` times; raise ``AssertionError`` unless a
    share ``success_rate`` of the p values exceed ``alpha``. Returns the p values."""
    results = [chi_square_check(generator, buckets, probs, nsamples) for _ in range(nrepeat)]
    pvalues = [r[0] for r in results]
    if np.count_nonzero(np.array(pvalues) > alpha) < nrepeat * success_rate:
        raise AssertionError("Generator test fails, Chi-square p=%s, obs_freq=%s, "
                             "expected_freq=%s.\nbuckets=%s, probs=%s"
                             % (str(pvalues), str([r[1] for r in results]),
                                str([r[2] for r in results]), str(buckets), str(probs)))
    return pvalues
