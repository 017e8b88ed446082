"""``mx.util``: MXNet 1.9.1's switches for NumPy shape and NumPy array semantics.

fastgrad's arrays always have NumPy's shapes (``()`` is a scalar's shape, ``(0, 3)`` an empty
array's) and NumPy's semantics. What these switches change is what MXNet programs observe:
``mx.is_np_shape()`` and ``mx.is_np_array()`` report the request, Gluon's Parameters and loaded
parameter files hold ``mx.np`` arrays while NumPy array semantics is requested, and Gluon's
unknown dimension is then ``-1`` (Note [Parameter array type] in fastgrad/gluon/parameter.py).

>>> import fastgrad as mx
>>> with mx.util.np_array(True):
...     mx.util.is_np_array()
True
>>> mx.util.is_np_array()
False
"""

import functools
import inspect
import os

from fastgrad import numpy_extension as _npx

__all__ = ["set_np_shape", "is_np_shape", "np_shape", "use_np_shape", "np_array",
           "is_np_array", "use_np_array", "use_np", "set_np", "reset_np", "getenv", "setenv",
           "get_gpu_count", "get_gpu_memory", "set_module"]


def set_np_shape(active):
    """Request (``True``) or withdraw NumPy shape semantics; return the previous request.

    Withdrawing it while NumPy array semantics is requested is an error, as in MXNet."""
    if not active and _npx.is_np_array_requested():
        raise ValueError("Deactivating NumPy shape semantics while NumPy array semantics is "
                         "still active is not allowed. Please consider calling "
                         "`npx.reset_np()` to deactivate both of them.")
    return _npx._set_np_shape(active)


def is_np_shape():
    """Whether NumPy shape semantics is requested (``set_np``, ``set_np_shape``,
    ``np_shape()``)."""
    return _npx._np_shape_requested[0]


def is_np_array():
    """Whether NumPy array semantics is requested (``npx.set_np()``, ``np_array()``,
    ``@use_np``): Gluon then makes ``mx.np`` arrays where it would make NDArrays."""
    return _npx.is_np_array_requested()


class _Scope:
    """A ``with`` block (also usable as a decorator) that sets one request and restores the
    previous one at its end, whatever happens inside."""

    def __init__(self, setter, active):
        self._setter = setter
        self._active = bool(active)
        self._previous = []

    def __enter__(self):
        self._previous.append(self._setter(self._active))
        return self

    def __exit__(self, *exc_info):
        self._setter(self._previous.pop())
        return False

    def __call__(self, func):
        @functools.wraps(func)
        def scoped(*args, **kwargs):
            with self:
                return func(*args, **kwargs)
        return scoped


def np_shape(active=True):
    """A scope with NumPy shape semantics requested (``active=True``) or withdrawn.

    >>> import fastgrad as mx
    >>> with mx.np_shape(True):
    ...     mx.is_np_shape()
    True
    """
    return _Scope(_npx._set_np_shape, active)


def np_array(active=True):
    """A scope with NumPy array semantics requested (``active=True``) or withdrawn."""
    return _Scope(_npx._set_np_array, active)


def _scoped(func, make_scope, decorator_name):
    """``func`` run inside ``make_scope()``: a function is wrapped; for a class, every
    function, method and property defined on it or inherited (as MXNet does)."""
    if inspect.isclass(func):
        for name, member in inspect.getmembers(
                func, predicate=lambda m: inspect.isfunction(m) or inspect.ismethod(m)
                or isinstance(m, property)):
            if isinstance(member, property):
                setattr(func, name, property(_scoped(member.__get__, make_scope, decorator_name),
                                             member.__set__, member.__delattr__, member.__doc__))
            else:
                setattr(func, name, _scoped(member, make_scope, decorator_name))
        return func
    if callable(func):
        @functools.wraps(func)
        def scoped(*args, **kwargs):
            with make_scope():
                return func(*args, **kwargs)
        return scoped
    raise TypeError("%s can only decorate classes and callable objects, while received a %s"
                    % (decorator_name, type(func)))


def use_np_shape(func):
    """Decorate a function or class so that it runs with NumPy shape semantics requested."""
    return _scoped(func, lambda: np_shape(True), "use_np_shape")


def use_np_array(func):
    """Decorate a function or class (a Gluon Block) so that it runs with NumPy array
    semantics requested: Parameters it creates hold ``mx.np`` arrays."""
    return _scoped(func, lambda: np_array(True), "use_np_array")


def use_np(func):
    """``use_np_shape(use_np_array(func))``: both NumPy semantics, as MXNet's ``@use_np``."""
    return use_np_shape(use_np_array(func))


def set_np(shape=True, array=True, dtype=False):
    """``npx.set_np``."""
    _npx.set_np(shape=shape, array=array, dtype=dtype)


def reset_np():
    """``npx.reset_np``."""
    _npx.reset_np()


def getenv(name):
    """The value of environment variable ``name``, or None (MXNet reads its C runtime's
    environment; fastgrad has only the process's)."""
    return os.environ.get(name)


def setenv(name, value):
    """Set environment variable ``name`` to ``value`` (``None`` removes it)."""
    if value is None:
        os.environ.pop(name, None)
    else:
        os.environ[name] = str(value)


def get_gpu_count():
    """0: fastgrad runs on the CPU."""
    return 0


def get_gpu_memory(gpu_dev_id):
    """fastgrad has no GPU: always an error naming the device."""
    raise ValueError("get_gpu_memory: fastgrad runs on the CPU and has no GPU %r" % (gpu_dev_id,))


def set_module(module):
    """A decorator setting ``func.__module__`` to ``module`` (for documentation)."""
    def decorator(func):
        if module is not None:
            func.__module__ = module
        return func
    return decorator
