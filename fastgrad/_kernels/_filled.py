"""A gradient that is one value everywhere (internal).

Note [Filled gradients]
~~~~~~~~~~~~~~~~~~~~~~~
The gradient of a full reduction is one value broadcast to the reduced array's shape: the
backward pass of every ``loss = f(x).sum()`` starts with it. As a NumPy broadcast view it would
cost a full pass and a full array at every op it meets (``g * y`` with ``g`` all ones copies
``y``). ``Filled`` keeps it as (value, shape, dtype) instead: elementwise ufuncs compute with
the value alone and broadcast only their result, multiplying by one returns the other operand
itself, and two ``Filled`` add up to another. Anything else (indexing, reshaping, matmul, NumPy
functions) sees a read-only broadcast view, so every rule works unchanged. The engine passes a
``Filled`` on to a parent whose shape and dtype it already has and never adds into it in place.
In a first-order pass it is made only for large arrays (``MIN_SIZE``), where it saves memory
and passes; on small ones a plain view is cheaper than the Python it takes.

Under ``create_graph`` every multiply a rule makes is recorded and differentiated again at
the next order, so there the engine starts from a ``Filled`` of ones whatever the size, and
``Filled`` defers to fastgrad arrays: one (or minus one) times a recorded array is that array
(or its negation) with nothing recorded, anything else records the ufunc on the broadcast
view. The engine's ``_collect`` copies a gradient that is held elsewhere as well (one times
``x`` is ``x``), so ``grad`` never hands back an array the caller already has.
"""

import numpy as np

from fastgrad._kernels._large import apply as _apply, cast_mask as _cast_mask

MIN_SIZE = 1 << 12


class Filled:
    """``value`` (a 0-d array) everywhere on ``shape``."""

    __slots__ = ("value", "shape", "unit", "zero")

    def __init__(self, value, shape):
        self.value = np.asarray(value).reshape(())
        self.shape = tuple(shape)
        v = self.value.item()
        #: 1 or -1 when the value is exactly that (multiplying by it is free), else 0.
        self.unit = 1 if v == 1 else (-1 if v == -1 else 0)
        #: a symbolic zero: multiplying by it gives zero whatever the other operand holds
        #: (``0 * inf`` is 0 here, as JAX's symbolic zeros), Note [Zero gradients].
        self.zero = v == 0

    # ------------------------------------------------------------ what it looks like
    @property
    def dtype(self):
        return self.value.dtype

    @property
    def ndim(self):
        return len(self.shape)

    @property
    def size(self):
        n = 1
        for d in self.shape:
            n *= d
        return n

    def __len__(self):
        if not self.shape:
            raise TypeError("len() of a 0-d array")
        return self.shape[0]

    def __repr__(self):
        return "Filled(%r, shape=%s)" % (self.value.item(), self.shape)

    def view(self):
        """The read-only broadcast view (no memory)."""
        return np.broadcast_to(self.value, self.shape)

    def __array__(self, dtype=None, copy=None):
        out = self.view()
        if dtype is not None or copy:
            out = np.array(out, dtype=dtype, copy=True)
        return out

    def __getattr__(self, name):            # reshape, sum, T, swapaxes, ...: on the view
        return getattr(self.view(), name)

    def __getitem__(self, key):
        return self.view()[key]

    def astype(self, dtype, copy=True):
        return Filled(self.value.astype(dtype), self.shape)

    # ------------------------------------------------------------ NumPy protocols
    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if method != "__call__" or ufunc.signature is not None or kwargs:
            return getattr(ufunc, method)(*_views(inputs), **_views_kw(kwargs))
        if any(isinstance(a, FASTGRAD_ARRAY) for a in inputs):
            return ufunc(*_views(inputs))        # recorded by fastgrad (create_graph)
        shape = np.broadcast_shapes(*[a.shape if type(a) is Filled else np.shape(a)
                                      for a in inputs])
        values = [a.value if type(a) is Filled else a for a in inputs]
        if ufunc is np.multiply and len(inputs) == 2 and any(
                type(a) is Filled and a.zero for a in inputs):
            return Filled(np.zeros((), np.result_type(*values)), shape)
        if all(type(a) is Filled or not np.shape(a) for a in inputs):
            result = ufunc(*values)
            if ufunc.nout != 1:
                return tuple(Filled(r, shape) for r in result)
            return Filled(result, shape)
        if ufunc is np.multiply and len(inputs) == 2:
            for k in (0, 1):
                f, other = inputs[k], inputs[1 - k]
                if type(f) is not Filled or type(other) is not np.ndarray \
                        or other.shape != shape:
                    continue
                dtype = np.result_type(f.value, other)
                if f.value == 1 and dtype == other.dtype:
                    return other        # one times an array is the array: no pass, no copy
                if other.dtype == np.bool_:
                    # A mask (relu's, max's): one cast instead of a casting multiply.
                    out = _cast_mask(other, dtype)
                    if out is None:
                        out = other.astype(dtype)
                    if f.value != 1:
                        out *= f.value
                    return out
        if ufunc.nout != 1:
            return tuple(_widen(r, shape) for r in ufunc(*values))
        # with the value alone, on the kernel pool when large (maximum's gradient of a sum)
        return _widen(_apply(ufunc, *values), shape)

    def __array_function__(self, func, types, args, kwargs):
        return func(*_views(args), **_views_kw(kwargs))

    # ------------------------------------------------------------ operators, via the ufuncs
    def __add__(self, other):
        return np.add(self, other)

    def __radd__(self, other):
        return np.add(other, self)

    def __sub__(self, other):
        return np.subtract(self, other)

    def __rsub__(self, other):
        return np.subtract(other, self)

    def __mul__(self, other):
        if isinstance(other, FASTGRAD_ARRAY):
            return _times(self, other)
        return np.multiply(self, other)

    def __rmul__(self, other):
        if isinstance(other, FASTGRAD_ARRAY):
            return _times(self, other)
        return np.multiply(other, self)

    def __truediv__(self, other):
        return np.true_divide(self, other)

    def __rtruediv__(self, other):
        return np.true_divide(other, self)

    def __pow__(self, other):
        return np.power(self, other)

    def __rpow__(self, other):
        return np.power(other, self)

    def __neg__(self):
        return Filled(-self.value, self.shape)

    def __pos__(self):
        return self

    def __abs__(self):
        return np.absolute(self)

    def __matmul__(self, other):
        return np.matmul(self, other)

    def __rmatmul__(self, other):
        return np.matmul(other, self)

    def __lt__(self, other):
        return np.less(self, other)

    def __le__(self, other):
        return np.less_equal(self, other)

    def __gt__(self, other):
        return np.greater(self, other)

    def __ge__(self, other):
        return np.greater_equal(self, other)

    __hash__ = None


#: fastgrad's array type, which ``Filled`` defers to (``create_graph``); set by ``wire`` at
#: start-up (fastgrad._core._array imports this module, so this one cannot import it: Note
#: [Bootstrap] in _bootstrap.py). Until then ``isinstance(x, ())`` is false: nothing defers.
FASTGRAD_ARRAY = ()


def wire(*, array_type):
    """Take fastgrad's array type: called once, by ``fastgrad._bootstrap.wire`` at start-up."""
    global FASTGRAD_ARRAY
    FASTGRAD_ARRAY = array_type


def _times(f, other):
    """``f * other`` for a fastgrad array ``other`` (``create_graph``).

    One times an array is that array, and minus one its negation: no multiply is recorded,
    and none differentiated again (Note [Filled gradients]). Anything else multiplies by
    the broadcast view, recorded by fastgrad.
    """
    if f.unit and other.shape == f.shape and other.dtype == f.value.dtype:
        return other if f.unit == 1 else -other
    if f.zero:        # a symbolic zero stays one (Note [Zero gradients])
        return Filled(np.zeros((), np.result_type(f.value, other.dtype)),
                      np.broadcast_shapes(f.shape, other.shape))
    return other * f.view()


def _widen(result, shape):
    result = np.asarray(result)
    return result if result.shape == shape else np.broadcast_to(result, shape)


def _views(items):
    out = []
    for a in items:
        if type(a) is Filled:
            out.append(a.view())
        elif type(a) in (list, tuple):
            out.append(type(a)(_views(a)))
        else:
            out.append(a)
    return out


def _views_kw(kwargs):
    return {k: (tuple(_views(v)) if type(v) is tuple else
                (v.view() if type(v) is Filled else v)) for k, v in kwargs.items()}


def filled(g, shape):
    """``g`` (holding one value) everywhere on ``shape``: a ``Filled`` for large shapes, a
    broadcast view otherwise."""
    n = 1
    for d in shape:
        n *= d
    if n >= MIN_SIZE and type(g) is np.ndarray and g.size == 1:
        return Filled(g, shape)
    return None
