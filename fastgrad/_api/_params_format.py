"""MXNet's binary NDArray file format: ``nd.save``/``nd.load``, ``npx.save``/``npx.load``.

Note [Params file layout]
~~~~~~~~~~~~~~~~~~~~~~~~~
The ``.params`` files MXNet, Gluon and fastgrad write are little-endian binary:

* a header: the 64-bit list magic ``0x112`` and a 64-bit reserved word (zero);
* the arrays: a 64-bit count, then each array as a record;
* the names: a 64-bit count (zero for a list, the array count for a dict), then each name as
  a 64-bit byte length followed by its UTF-8 bytes, in the arrays' order.

An array record starts with a 32-bit magic that says how to read the shape:

* ``0xF993FACA`` (written by ``npx.save``, MXNet's NumPy shape semantics): a 0-d shape is a
  scalar and a 0 dimension is an empty axis;
* ``0xF993FAC9`` (written by ``nd.save``, MXNet 1.x's legacy semantics): a shape with no
  dimensions, or with a 0 dimension, means "shape unknown" and no data follows, so this
  format cannot hold scalars or empty arrays;
* ``0xF993FAC8`` (MXNet before 1.0) and, in even older files, no magic at all (the first
  word is then the number of dimensions, with 32-bit dimensions).

After the magic (versions 2 and 3) comes the 32-bit storage type (0 = dense; fastgrad has
no sparse arrays), the shape as a 32-bit number of dimensions and 64-bit dimensions, the
device as two 32-bit numbers (type, id; read and ignored: fastgrad loads to the CPU), the
32-bit type number of the dtype (``TYPE_FLAGS``) and the raw data in C order.

Reading checks every count and size against the bytes that remain before allocating
anything, so a truncated or corrupt file raises ``ValueError`` saying what is wrong and
where, never crashes or allocates without bound; nothing in a file is ever executed.
"""

import os
import struct

import numpy as _onp

from fastgrad._core._array import ndarray, unwrap, _wrap
from fastgrad.base import MXNetValueError     # MXNet raises MXNetError for a bad file

LIST_MAGIC = 0x112
V1_MAGIC = 0xF993FAC8
V2_MAGIC = 0xF993FAC9      # legacy shapes (nd.save)
V3_MAGIC = 0xF993FACA      # NumPy shapes (npx.save)
_MAX_NDIM = 64

# MXNet's type numbers (mshadow type flags).
TYPE_FLAGS = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32", 5: "int8",
              6: "int64", 7: "bool", 8: "int16", 9: "uint16", 10: "uint32", 11: "uint64"}
# MXNet 1.9.1 saves and loads these; other dtypes are refused when saving.
_WRITABLE = {_onp.dtype(TYPE_FLAGS[k]): k for k in range(8)}


class _Reader:
    def __init__(self, data, source):
        self.data = memoryview(data)
        self.pos = 0
        self.source = source

    def fail(self, what):
        raise MXNetValueError("%s: not a valid MXNet NDArray file: %s (at byte %d of %d)"
                              % (self.source, what, self.pos, len(self.data)))

    def remaining(self):
        return len(self.data) - self.pos

    def take(self, n, what):
        if n > self.remaining():
            self.fail("truncated while reading %s (needs %d bytes, %d left)"
                      % (what, n, self.remaining()))
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def u64(self, what):
        return struct.unpack("<Q", self.take(8, what))[0]

    def u32(self, what):
        return struct.unpack("<I", self.take(4, what))[0]

    def i32(self, what):
        return struct.unpack("<i", self.take(4, what))[0]

    def i64(self, what):
        return struct.unpack("<q", self.take(8, what))[0]


def _read_array(r, k):
    where = "array %d" % k
    magic = r.u32(where + " magic")
    if magic in (V2_MAGIC, V3_MAGIC):
        stype = r.i32(where + " storage type")
        if stype != 0:
            r.fail("%s has storage type %d (row_sparse or csr); fastgrad arrays are dense"
                   % (where, stype))
        ndim = r.i32(where + " ndim")
        if ndim < -1 or ndim > _MAX_NDIM:
            r.fail("%s has %d dimensions" % (where, ndim))
        shape = tuple(r.i64(where + " shape") for _ in range(max(ndim, 0)))
        numpy_shape = magic == V3_MAGIC
        if ndim == -1 or any(d < 0 for d in shape) or (not numpy_shape and (
                ndim == 0 or 0 in shape)):
            r.fail("%s has no known shape (MXNet's 'none' array, shape %s); fastgrad cannot "
                   "load it" % (where, shape if ndim >= 0 else "unknown"))
    elif magic == V1_MAGIC:
        ndim = r.i32(where + " ndim")
        if ndim < 0 or ndim > _MAX_NDIM:
            r.fail("%s has %d dimensions" % (where, ndim))
        shape = tuple(r.i64(where + " shape") for _ in range(ndim))
        if ndim == 0:
            r.fail("%s has no shape (an empty MXNet array)" % where)
    else:
        ndim = magic     # MXNet before 0.9: no magic, the first word is ndim
        if ndim > _MAX_NDIM:
            r.fail("%s starts with 0x%08X, which is no NDArray magic" % (where, magic))
        shape = tuple(r.u32(where + " shape") for _ in range(ndim))
        if ndim == 0:
            r.fail("%s has no shape (an empty MXNet array)" % where)
    r.i32(where + " device type")
    r.i32(where + " device id")
    flag = r.i32(where + " dtype")
    if flag not in TYPE_FLAGS:
        r.fail("%s has unknown type number %d" % (where, flag))
    dtype = _onp.dtype(TYPE_FLAGS[flag]).newbyteorder("<")
    count = 1
    for d in shape:
        count *= d      # Python ints: no overflow; take() checks the size against the file
    nbytes = count * dtype.itemsize
    raw = r.take(nbytes, "%s data (%s of %s)" % (where, shape, dtype.name))
    return _onp.frombuffer(raw, dtype=dtype).astype(dtype.newbyteorder("="),
                                                    copy=True).reshape(shape)


def loads(data, source="<buffer>"):
    """The arrays of a params file's bytes: a list, or a dict when the file names them.

    Raises
    ------
    ValueError
        If ``data`` is not a complete, valid file (Note [Params file layout]).
    """
    r = _Reader(data, source)
    if r.remaining() < 16:
        r.fail("too short for the header")
    magic = r.u64("header")
    if magic != LIST_MAGIC:
        r.pos = 0
        r.fail("header magic is 0x%X, not 0x%X" % (magic, LIST_MAGIC))
    r.u64("reserved word")
    n = r.u64("array count")
    # every record takes at least 16 bytes: a count beyond that is corruption
    if n > r.remaining() // 16:
        r.fail("array count %d does not fit in the file" % n)
    arrays = [_read_array(r, k) for k in range(n)]
    n_names = r.u64("name count")
    if n_names not in (0, n):
        r.fail("%d names for %d arrays" % (n_names, n))
    names = []
    for k in range(n_names):
        length = r.u64("length of name %d" % k)
        raw = bytes(r.take(length, "name %d" % k))
        try:
            names.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            r.fail("name %d is not UTF-8" % k)
    if r.remaining():
        r.fail("%d unexpected bytes after the names" % r.remaining())
    if not n_names:
        return arrays
    if len(set(names)) != len(names):
        r.fail("duplicate names")
    return dict(zip(names, arrays))


def load(fname):
    """The arrays of the params file ``fname`` (see :func:`loads`)."""
    with open(os.fspath(fname), "rb") as f:
        data = f.read()
    return loads(data, os.fspath(fname))


def _as_items(data, what):
    """``(names or None, list of NumPy arrays)`` of what ``save`` was given."""

    def numpy_of(v, label):
        if isinstance(v, ndarray):
            return _onp.asarray(unwrap(v))
        if isinstance(v, _onp.ndarray):
            return v
        raise TypeError("%s: %s is a %s, not an array" % (what, label, type(v).__name__))

    if isinstance(data, (ndarray, _onp.ndarray)):
        return None, [numpy_of(data, "the value")]
    if isinstance(data, dict):
        names = []
        arrays = []
        for k, v in data.items():
            if not isinstance(k, str):
                raise TypeError("%s: dict keys must be str, got %r" % (what, k))
            names.append(k)
            arrays.append(numpy_of(v, "entry %r" % k))
        return names, arrays
    if isinstance(data, (list, tuple)):
        return None, [numpy_of(v, "item %d" % i) for i, v in enumerate(data)]
    # MXNet's exception types: ValueError for a payload that is no array, list or dict,
    # TypeError for a list or dict holding something else (the checks above).
    raise ValueError("%s: data must be an array, a list of arrays or a dict of str to arrays, "
                     "not %s" % (what, type(data).__name__))


def dumps(data, numpy_shape, what="save"):
    """The bytes of a params file holding ``data`` (an array, list or dict of arrays).

    ``numpy_shape`` selects the record magic: ``True`` as ``npx.save`` writes (scalars and
    empty arrays allowed), ``False`` as MXNet 1.x's ``nd.save`` (they raise ``ValueError``,
    since MXNet 1.x would read them back as arrays without a shape).
    """
    names, arrays = _as_items(data, what)
    out = [struct.pack("<QQQ", LIST_MAGIC, 0, len(arrays))]
    for k, a in enumerate(arrays):
        label = names[k] if names is not None else "item %d" % k
        flag = _WRITABLE.get(a.dtype.newbyteorder("="))
        if flag is None:
            raise TypeError("%s: %s has dtype %s, which MXNet's format cannot hold (float16/32/"
                            "64, uint8, int8, int32, int64, bool)" % (what, label, a.dtype))
        if not numpy_shape and (a.ndim == 0 or 0 in a.shape):
            raise ValueError("%s: %s has shape %s; MXNet 1.x's legacy format (nd.save) cannot "
                             "hold scalars or empty arrays (use npx.save)" % (what, label,
                                                                              a.shape))
        out.append(struct.pack("<Iii", V3_MAGIC if numpy_shape else V2_MAGIC, 0, a.ndim))
        out.append(struct.pack("<%dq" % a.ndim, *a.shape))
        out.append(struct.pack("<iii", 1, 0, flag))
        out.append(_onp.ascontiguousarray(a, dtype=a.dtype.newbyteorder("<")).tobytes())
    out.append(struct.pack("<Q", len(names) if names is not None else 0))
    for name in names or ():
        raw = name.encode("utf-8")
        out.append(struct.pack("<Q", len(raw)))
        out.append(raw)
    return b"".join(out)


def save(fname, data, numpy_shape, what="save"):
    """Write ``data`` to ``fname`` in MXNet's format (see :func:`dumps`)."""
    blob = dumps(data, numpy_shape, what)
    with open(os.fspath(fname), "wb") as f:
        f.write(blob)


def wrap_all(loaded, cls):
    """``loaded`` (a list or dict of NumPy arrays) with every array wrapped as ``cls``."""
    if isinstance(loaded, dict):
        return {k: _wrap(v, cls) for k, v in loaded.items()}
    return [_wrap(v, cls) for v in loaded]
