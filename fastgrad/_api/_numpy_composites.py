"""More of NumPy for ``fastgrad.np``: ``gradient``, ``partition``, ``select``, ``meshgrid``,
``dsplit``, ``linalg.eig``/``eigvals``/``lstsq``; each a composition of table ops (or, for
``eig``, one op of ``_table_linalg.py``), so differentiable to any order."""

import numpy as _np

from fastgrad._api import _functions as F
from fastgrad._api._linalg import linalg as _np_linalg
from fastgrad._core._array import ndarray, unwrap, _wrap
from fastgrad._ops._registry import REGISTRY as _P


def _as_array(a):
    return a if isinstance(a, ndarray) else _wrap(_np.asarray(a))


def _along(axis, ndim, index):
    return tuple(index if d == axis else slice(None) for d in range(ndim))


def _coefficient(c, axis, ndim):
    shape = [1] * ndim
    shape[axis] = -1
    return _np.reshape(c, shape)


def _gradient_axis(f, axis, spacing, edge_order):
    n = f.shape[axis]
    if n < edge_order + 1:
        raise ValueError("fastgrad.gradient: axis %d has %d points; edge_order=%d needs at "
                         "least %d" % (axis, n, edge_order, edge_order + 1))
    nd = f.ndim
    if _np.ndim(spacing) == 0:
        dx = _np.full(n - 1, float(spacing))
    else:
        coords = _np.asarray(unwrap(spacing), dtype=float)
        if coords.shape != (n,):
            raise ValueError("fastgrad.gradient: the coordinates of axis %d must have shape "
                             "(%d,), got %s" % (axis, n, coords.shape))
        dx = _np.diff(coords)
    dt = f.dtype
    d1, d2 = dx[:-1], dx[1:]
    a = -d2 / (d1 * (d1 + d2))
    b = (d2 - d1) / (d1 * d2)
    c = d1 / (d2 * (d1 + d2))
    co = [_coefficient(v.astype(dt), axis, nd) for v in (a, b, c)]
    interior = (f[_along(axis, nd, slice(0, -2))] * co[0]
                + f[_along(axis, nd, slice(1, -1))] * co[1]
                + f[_along(axis, nd, slice(2, None))] * co[2])
    first = [f[_along(axis, nd, slice(i, i + 1))] for i in range(3 if edge_order == 2 else 2)]
    last = [f[_along(axis, nd, slice(n - i - 1, n - i if i else None))]
            for i in range(3 if edge_order == 2 else 2)]
    if edge_order == 1:
        start = (first[1] - first[0]) * dt.type(1 / dx[0])
        end = (last[0] - last[1]) * dt.type(1 / dx[-1])
    else:
        e1, e2 = dx[0], dx[1]
        start = (first[0] * dt.type(-(2 * e1 + e2) / (e1 * (e1 + e2)))
                 + first[1] * dt.type((e1 + e2) / (e1 * e2))
                 + first[2] * dt.type(-e1 / (e2 * (e1 + e2))))
        e1, e2 = dx[-2], dx[-1]
        end = (last[2] * dt.type(e2 / (e1 * (e1 + e2)))
               + last[1] * dt.type(-(e1 + e2) / (e1 * e2))
               + last[0] * dt.type((2 * e2 + e1) / (e2 * (e1 + e2))))
    return F.concatenate([start, interior, end], axis=axis)


def gradient(f, *varargs, axis=None, edge_order=1):
    """The gradient of sampled values by central differences in the interior and one-sided
    differences of order ``edge_order`` (1 or 2) at the ends (``numpy.gradient``); spacings
    are numbers or coordinate arrays, one for all axes or one per axis. Differentiable in
    ``f``.

    Examples
    --------
    >>> from fastgrad import np
    >>> np.gradient(np.array([1., 2., 4., 7., 11.]))
    array([1. , 1.5, 2.5, 3.5, 4. ])
    """
    f = _as_array(f)
    if f.dtype.kind not in "fc":
        f = F.astype(f, _np.float64)
    if edge_order not in (1, 2):
        raise ValueError("fastgrad.gradient: edge_order must be 1 or 2, got %r" % (edge_order,))
    nd = f.ndim
    axes = tuple(range(nd)) if axis is None else (
        (int(axis) % nd,) if isinstance(axis, (int, _np.integer)) else
        tuple(int(a) % nd for a in axis))
    if not varargs:
        spacings = [1.0] * len(axes)
    elif len(varargs) == 1 and _np.ndim(unwrap(varargs[0])) == 0:
        spacings = [varargs[0]] * len(axes)
    elif len(varargs) == len(axes):
        spacings = list(varargs)
    else:
        raise TypeError("fastgrad.gradient: give one spacing, or one per axis (%d), got %d"
                        % (len(axes), len(varargs)))
    out = [_gradient_axis(f, a, s, edge_order) for a, s in zip(axes, spacings)]
    return out[0] if len(out) == 1 else out


def argpartition(a, kth, axis=-1, kind="introselect", order=None):
    """Indices that partition ``a`` around its ``kth`` element (``numpy.argpartition``);
    not differentiable."""
    return _wrap(_np.argpartition(unwrap(a), kth, axis=axis))


def partition(a, kth, axis=-1, kind="introselect", order=None):
    """``a`` with its ``kth`` element in sorted position, smaller ones before and larger ones
    after (``numpy.partition``); differentiable, the gradient follows the elements."""
    a = _as_array(a)
    if axis is None:
        a, axis = F.reshape(a, (-1,)), 0
    idx = _np.argpartition(unwrap(a), kth, axis=axis)
    return F.take_along_axis(a, idx, axis=axis)


def dsplit(ary, indices_or_sections):
    """Split along the third axis (``numpy.dsplit``)."""
    if F._ndim(ary) < 3:
        raise ValueError("fastgrad.dsplit: only works on arrays of 3 or more dimensions")
    return F.split(ary, indices_or_sections, axis=2)


def select(condlist, choicelist, default=0):
    """The element of the first choice whose condition holds, else ``default``
    (``numpy.select``); differentiable in the choices and ``default``."""
    condlist, choicelist = list(condlist), list(choicelist)
    if len(condlist) != len(choicelist):
        raise ValueError("fastgrad.select: list of cases must be same length as list of "
                         "conditions")
    if not condlist:
        raise ValueError("fastgrad.select: select with an empty condition list is not "
                         "possible")
    out = default
    for cond, choice in zip(reversed(condlist), reversed(choicelist)):
        c = _np.asarray(unwrap(cond))
        if c.dtype != bool:
            raise TypeError("fastgrad.select: condlist entries must be boolean arrays, got %s"
                            % c.dtype)
        out = F.where(c, choice, out)
    if not isinstance(out, ndarray):
        out = _wrap(_np.asarray(out))
    shape = _np.broadcast_shapes(*[_np.shape(unwrap(x)) for x in condlist + choicelist])
    return F.broadcast_to(out, shape) if out.shape != shape else out


def meshgrid(*xi, copy=True, sparse=False, indexing="xy"):
    """Coordinate matrices from coordinate vectors (``numpy.meshgrid``); differentiable in
    every vector."""
    if indexing not in ("xy", "ij"):
        raise ValueError("fastgrad.meshgrid: indexing must be 'xy' or 'ij', got %r"
                         % (indexing,))
    n = len(xi)
    ones = (1,) * n
    shapes = [ones[:i] + (-1,) + ones[i + 1:] for i in range(n)]
    if indexing == "xy" and n > 1:      # the first two axes swap, as in NumPy
        shapes[0] = (1, -1) + ones[2:]
        shapes[1] = (-1, 1) + ones[2:]
    out = [F.reshape(_as_array(x), shape) for x, shape in zip(xi, shapes)]
    if not sparse:
        out = F.broadcast_arrays(*out)
    return list(out)


# ---------------------------------------------------------------- index builders
class _Concatenator:
    """``r_`` and ``c_``: arrays built by indexing, keeping the history of the arrays in them.

    Slices become ranges (``1:4``) or evenly spaced points (``0:1:5j``), numbers become
    one-element arrays; everything is then joined. NumPy's string directives (``'0,2'``) are
    not supported.
    """

    def __init__(self, name, columns):
        self.name = name
        self.columns = columns

    def _piece(self, item):
        if isinstance(item, slice):
            start = 0 if item.start is None else item.start
            step = 1 if item.step is None else item.step
            if isinstance(step, complex):
                return _wrap(_np.linspace(start, item.stop, int(abs(step))))
            return _wrap(_np.arange(start, item.stop, step))
        if isinstance(item, str):
            raise NotImplementedError("fastgrad.%s: string directives such as %r are not "
                                      "supported" % (self.name, item))
        a = _as_array(item)
        return F.reshape(a, (1,)) if a.ndim == 0 else a

    def __getitem__(self, key):
        items = key if isinstance(key, tuple) else (key,)
        pieces = [self._piece(item) for item in items]
        if not self.columns:
            return F.concatenate(pieces, axis=0)
        pieces = [F.reshape(p, (-1, 1)) if p.ndim == 1 else p for p in pieces]
        return F.concatenate(pieces, axis=-1)

    def __len__(self):
        return 0


r_ = _Concatenator("r_", columns=False)
c_ = _Concatenator("c_", columns=True)


# ---------------------------------------------------------------- linalg
def eig(a):
    """Eigenvalues and right eigenvectors of a general square matrix, always complex
    (``numpy.linalg.eig``); differentiable (distinct eigenvalues; the loss must not depend
    on the eigenvectors' phases).

    Examples
    --------
    >>> from fastgrad import np
    >>> w, v = np.linalg.eig(np.array([[0., 1.], [-2., -3.]], dtype="float64"))
    >>> w
    array([-1.+0.j, -2.+0.j])
    """
    a = _as_array(a)
    if a.ndim < 2 or a.shape[-1] != a.shape[-2]:
        raise ValueError("fastgrad.linalg.eig: a must be a square matrix (or a stack of "
                         "them), got shape %s" % (a.shape,))
    w, v = _P["eig"](a)
    return w, v


def eigvals(a):
    """The eigenvalues of a general square matrix, complex (``numpy.linalg.eigvals``)."""
    return eig(a)[0]


def lstsq(a, b, rcond=None):
    """The least-squares solution of ``a x = b`` with its residuals, rank and singular values
    (``numpy.linalg.lstsq``); ``x`` and the residuals are differentiable in ``a`` and ``b``
    (``a`` of full rank)."""
    a, b = _as_array(a), _as_array(b)
    if a.ndim != 2:
        raise ValueError("fastgrad.linalg.lstsq: a must be a matrix, got shape %s"
                         % (a.shape,))
    m, n = a.shape
    data = unwrap(a)
    s_np = _np.linalg.svd(data, compute_uv=False)
    cut = (_np.finfo(data.dtype).eps * max(m, n) if rcond is None else rcond) * (
        s_np[0] if s_np.size else 0)
    rank = int(_np.sum(s_np > cut))
    if rank < n:
        raise NotImplementedError("fastgrad.linalg.lstsq: a has rank %d < %d columns; the "
                                  "solution is not differentiable there" % (rank, n))
    x = F.matmul(_np_linalg.pinv(a), b)
    if m > n:
        r = b - F.matmul(a, x)
        residuals = F.sum(r * r, axis=0)
        if residuals.ndim == 0:
            residuals = F.reshape(residuals, (1,))
    else:
        residuals = _wrap(_np.empty((0,), dtype=data.dtype))
    return x, residuals, rank, _np_linalg.svdvals(a)


__all__ = ["gradient", "argpartition", "partition", "dsplit", "select", "meshgrid"]
INDEX_BUILDERS = {"r_": r_, "c_": c_}
LINALG = {"eig": eig, "eigvals": eigvals, "lstsq": lstsq}

# NumPy's functions -> these, for NumPy calls on fastgrad arrays (``__array_function__``).
FUNCS = {getattr(_np, name): globals()[name] for name in __all__}
FUNCS.update({getattr(_np.linalg, name): fn for name, fn in LINALG.items()})
