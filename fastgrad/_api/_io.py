"""Arrays in and out of fastgrad: NumPy's ``.npy``/``.npz`` files and DLPack.

``fastgrad.np.save``, ``savez``, ``savez_compressed`` and ``load`` write and read NumPy's own
file formats, so the files are NumPy's to read and fastgrad's to read back; ``numpy.save(f, a)``
on a fastgrad array lands here too. ``fastgrad.np.from_dlpack`` takes any DLPack producer (a
NumPy array, a PyTorch tensor, a JAX array) without copying its data.

Note [Files hold values, not history]
A saved array is its values only: the recorded history, the attached gradient and the
``grad_req`` are not saved, and a loaded array is a fresh array with no history (call
``attach_grad()`` on it to differentiate with respect to it). Pickling is off when loading
(``allow_pickle=False``, NumPy's default), so a file cannot run code.
"""

import numpy as _np

from fastgrad._core._array import ndarray, unwrap, _wrap


def _numpy_from_dlpack_takes_keywords():
    """Whether ``numpy.from_dlpack`` takes ``device=`` and ``copy=`` (NumPy >= 2.1; Note
    [DLPack on NumPy 2.0] in ``_array.pyx``)."""
    try:
        _np.from_dlpack(_np.empty(0), copy=None)
    except TypeError:
        return False
    return True


_NUMPY_FROM_DLPACK_KEYWORDS = _numpy_from_dlpack_takes_keywords()


def _numpy_source(x):
    """``numpy.from_dlpack(x)`` of a NumPy array on NumPy 2.0, as NumPy >= 2.1 gives it: ``x``'s
    memory, writable if ``x`` is. NumPy 2.0's own makes every array it imports read-only, and
    refuses to export a read-only one; DLPack's rules are checked as NumPy checks them (the
    dtype on an empty array of it, which raises NumPy's own error)."""
    _np.from_dlpack(_np.empty(0, x.dtype))
    if x.size != 1 and not x.flags.c_contiguous and any(
            n != 1 and s % x.itemsize for n, s in zip(x.shape, x.strides)):
        raise BufferError("DLPack only supports strides which are a multiple of itemsize.")
    return x.view(_np.ndarray)


def _values(name, a):
    data = unwrap(a)
    if not isinstance(data, _np.ndarray):
        data = _np.asarray(data)
    if data.dtype == object:
        raise TypeError("fastgrad.np.%s: cannot save an array of Python objects" % name)
    return data


def save(file, arr, allow_pickle=False):
    """Save one array to NumPy's ``.npy`` format (values only, not the history).

    Parameters
    ----------
    file : str, os.PathLike or file object
        Where to write; NumPy appends ``.npy`` to a file name that lacks it.
    arr : array_like
        A fastgrad array, a NumPy array or anything ``numpy.asarray`` accepts.
    allow_pickle : bool, optional
        Accepted for NumPy's signature; arrays of objects are refused either way.

    Examples
    --------
    >>> import io
    >>> from fastgrad import np
    >>> f = io.BytesIO()
    >>> np.save(f, np.array([1.0, 2.0]))
    >>> _ = f.seek(0)
    >>> np.load(f)
    array([1., 2.])
    """
    _np.save(file, _values("save", arr), allow_pickle=False)


def savez(file, *args, **kwds):
    """Save several arrays to NumPy's uncompressed ``.npz`` format (values only).

    Positional arrays are stored as ``arr_0``, ``arr_1``...; keyword arrays under their names.
    ``fastgrad.np.load`` reads the file back as a ``dict`` of fastgrad arrays.
    """
    _np.savez(file, *[_values("savez", a) for a in args],
              **{k: _values("savez", v) for k, v in kwds.items()})


def savez_compressed(file, *args, **kwds):
    """Save several arrays to NumPy's compressed ``.npz`` format (values only), as ``savez``."""
    _np.savez_compressed(file, *[_values("savez_compressed", a) for a in args],
                         **{k: _values("savez_compressed", v) for k, v in kwds.items()})


def load(file, mmap_mode=None):
    """Load arrays saved by ``save``/``savez`` (or by NumPy) as fastgrad arrays.

    Parameters
    ----------
    file : str, os.PathLike or file object
        A ``.npy`` or ``.npz`` file.
    mmap_mode : {None, 'r+', 'r', 'w+', 'c'}, optional
        As for ``numpy.load`` (``.npy`` files only): the array's data is the memory map.

    Returns
    -------
    ndarray or dict of str to ndarray
        A ``.npy`` file gives one array; a ``.npz`` file gives a ``dict`` from the stored names
        to arrays, read at once (the file is closed on return). The arrays have no history
        and the dtype that was saved.
    """
    loaded = _np.load(file, mmap_mode=mmap_mode, allow_pickle=False)
    if isinstance(loaded, _np.lib.npyio.NpzFile):
        with loaded:
            return {name: _wrap(loaded[name]) for name in loaded.files}
    return _wrap(loaded)


def from_dlpack(x, /, *, device=None, copy=None):
    """A fastgrad array sharing the data of a DLPack producer, without a copy.

    Parameters
    ----------
    x : object
        Any object with ``__dlpack__`` and ``__dlpack_device__`` on the CPU: a NumPy array,
        a fastgrad array, a PyTorch tensor, a JAX array.
    device : optional
        As for ``numpy.from_dlpack``: only the CPU is supported.
    copy : bool, optional
        ``True`` always copies, ``False`` never does (an error if a copy is needed), ``None``
        copies only if needed.

    Returns
    -------
    ndarray
        An array with ``x``'s dtype and no history: writes to either side are seen by the
        other, and gradients do not flow back to ``x``. On NumPy 2.0, whose
        ``numpy.from_dlpack`` makes every array it imports read-only, the array shares a
        NumPy or fastgrad ``x``'s memory as on later NumPy, but is read-only when ``x`` comes
        from another library (PyTorch, JAX): pass ``copy=True`` for a writable copy.
    """
    if not _NUMPY_FROM_DLPACK_KEYWORDS:
        # NumPy 2.0: numpy.from_dlpack(x) takes no keyword (Note [DLPack on NumPy 2.0]).
        if device is not None and not (isinstance(device, str) and device == "cpu"):
            raise ValueError('fastgrad.np.from_dlpack: device=%r: only "cpu" is supported'
                             % (device,))
        if isinstance(copy, str):
            raise ValueError("fastgrad.np.from_dlpack: copy=%r: use True, False or None"
                             % (copy,))
    try:
        if _NUMPY_FROM_DLPACK_KEYWORDS:
            data = _np.from_dlpack(x, device=device, copy=copy)
        else:
            source = unwrap(x) if isinstance(x, ndarray) else x
            if isinstance(source, _np.ndarray):
                data = _numpy_source(source)
            else:
                data = _np.from_dlpack(x)   # read-only on NumPy 2.0
            if copy:                        # else x's memory is shared: copy=False holds
                data = data.copy()
    except Exception as e:
        # NumPy's (or the producer's) error, unchanged but for a note naming the function.
        try:
            e.add_note("in fastgrad.np.from_dlpack (NumPy %s)" % _np.__version__)
        except AttributeError:      # Python < 3.11: no notes
            pass
        raise
    return _wrap(data)
