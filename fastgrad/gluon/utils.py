"""Gluon's helpers (``gluon.utils``): splitting a batch across devices (``split_data``,
``split_and_load``), clipping gradients by their global norm (``clip_global_norm``) and
fetching files (``download``, ``check_sha1``), as MXNet 1.9.1's."""

import hashlib
import math
import os
import ssl
import urllib.request
import uuid
import warnings

import numpy as _onp

from fastgrad import ndarray as _nd
from fastgrad import numpy as _mx_np
from fastgrad import numpy_extension as _npx
from fastgrad._core._array import ndarray as _array_base, unwrap
from fastgrad._core._state import set_recording

__all__ = ["split_data", "split_and_load", "clip_global_norm", "check_sha1", "download",
           "replace_file"]


def _axis_slice(data, axis, begin, end):
    return data[(slice(None),) * axis + (slice(int(begin), int(end)),)]


def split_data(data, num_slice, batch_axis=0, even_split=True):
    """Split ``data`` into ``num_slice`` slices along ``batch_axis`` (for data parallelism).

    Parameters
    ----------
    data : NDArray or mx.np.ndarray
        A batch.
    num_slice : int
        The number of slices (a list is returned even for 1).
    batch_axis : int, default 0
    even_split : bool, default True
        Require ``num_slice`` to divide the batch; otherwise the first ``size % num_slice``
        slices get one element more (and some slices are empty when ``num_slice > size``).

    Returns
    -------
    list of arrays
        Slices of ``data`` (views, recorded when ``autograd.record()`` is on).

    Examples
    --------
    >>> import fastgrad as mx
    >>> [s.shape for s in mx.gluon.utils.split_data(mx.nd.zeros((5, 2)), 2, even_split=False)]
    [(3, 2), (2, 2)]
    """
    if not hasattr(data, "shape"):
        raise TypeError("split_data: data must be an array, got %s" % type(data).__name__)
    if isinstance(num_slice, bool) or not isinstance(num_slice, (int, _onp.integer)) \
            or num_slice < 1:
        raise ValueError("split_data: num_slice must be a positive integer, got %r"
                         % (num_slice,))
    ndim = len(data.shape)
    if not -ndim <= batch_axis < ndim:
        raise ValueError("split_data: batch_axis %d is out of range for data of shape %s"
                         % (batch_axis, str(data.shape)))
    batch_axis %= ndim
    size = data.shape[batch_axis]
    if even_split and size % num_slice != 0:
        raise ValueError(
            "data with shape %s cannot be evenly split into %d slices along axis %d. Use a "
            "batch size that's multiple of %d or set even_split=False to allow uneven "
            "partitioning of data." % (str(data.shape), num_slice, batch_axis, num_slice))
    each, extras = divmod(size, num_slice)
    bounds = _onp.cumsum([0] + [each + 1] * extras + [each] * (num_slice - extras))
    return [_axis_slice(data, batch_axis, bounds[i], bounds[i + 1]) for i in range(num_slice)]


def split_and_load(data, ctx_list, batch_axis=0, even_split=True):
    """Split ``data`` into ``len(ctx_list)`` slices along ``batch_axis`` and put slice ``i``
    on ``ctx_list[i]`` (every ``mx.cpu(i)`` is the CPU in fastgrad: the slices stay views).

    ``data`` that is not an array (a NumPy array, a list) is converted first: to an
    ``mx.np.ndarray`` after ``npx.set_np()``, else to an NDArray.

    Examples
    --------
    >>> import fastgrad as mx
    >>> parts = mx.gluon.utils.split_and_load(mx.nd.arange(6), [mx.cpu(0), mx.cpu(1)])
    >>> [p.asnumpy().tolist() for p in parts]
    [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    """
    if not isinstance(ctx_list, (list, tuple)) or not ctx_list:
        raise ValueError("split_and_load: ctx_list must be a non-empty list of contexts, got %r"
                         % (ctx_list,))
    if not isinstance(data, _array_base):
        make = _mx_np.array if _npx.is_np_array_requested() else _nd.array
        data = make(data, ctx=ctx_list[0])
    if len(ctx_list) == 1:
        return [data.as_in_context(ctx_list[0])]
    slices = split_data(data, len(ctx_list), batch_axis, even_split)
    return [s.as_in_context(ctx) for s, ctx in zip(slices, ctx_list)]


def clip_global_norm(arrays, max_norm, check_isfinite=True):
    """Scale ``arrays`` in place so that their global 2-norm (the norm of all their elements
    together) is at most ``max_norm``; returns the norm before scaling.

    The factor is ``min(max_norm / (norm + 1e-8), 1)``. With ``check_isfinite`` a NaN or
    infinite norm warns (the results are then undefined, as in MXNet) and the norm is returned
    as a float; without it, as a 1-element array of the first array's type (what MXNet
    returns). The squares are summed in float64.

    Examples
    --------
    >>> import fastgrad as mx
    >>> g = [mx.nd.array([3.0]), mx.nd.array([4.0])]
    >>> mx.gluon.utils.clip_global_norm(g, 1.0)
    5.0
    >>> [round(float(a.asnumpy()[0]), 6) for a in g]
    [0.6, 0.8]
    """
    if isinstance(arrays, _array_base):
        raise TypeError("clip_global_norm: arrays must be a list of arrays, got one array")
    arrays = list(arrays)
    if not arrays:
        raise AssertionError("clip_global_norm: arrays is empty")
    for a in arrays:
        if not isinstance(a, _array_base):
            raise TypeError("clip_global_norm: arrays must be fastgrad arrays, got %s"
                            % type(a).__name__)
    total = math.sqrt(sum(float(_onp.dot(d, d)) for d in
                          (unwrap(a).reshape(-1).astype(_onp.float64) for a in arrays)))
    if check_isfinite and not math.isfinite(total):
        warnings.warn(UserWarning("nan or inf is detected. Clipping results will be "
                                  "undefined."), stacklevel=2)
    scale = _onp.fmin(max_norm / (total + 1e-8), 1.0) if math.isfinite(total) \
        else max_norm / (total + 1e-8)
    prev = set_recording(False)
    try:
        with _onp.errstate(invalid="ignore"):     # inf * 0: warned about above
            for a in arrays:
                a *= float(scale)
    finally:
        set_recording(prev)
    if check_isfinite:
        return total
    first = arrays[0]
    result = _nd.array([total], dtype=first.dtype)
    return result if isinstance(first, _nd.NDArray) else result.as_np_ndarray()


def check_sha1(filename, sha1_hash):
    """Whether the SHA-1 of the file ``filename`` is ``sha1_hash`` (hexadecimal)."""
    sha1 = hashlib.sha1()
    with open(filename, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            sha1.update(block)
    return sha1.hexdigest() == sha1_hash


def replace_file(src, dst):
    """Move ``src`` to ``dst`` atomically (``os.replace``), removing ``src`` on failure."""
    try:
        os.replace(src, dst)
    except OSError:
        try:
            os.remove(src)
        except OSError:
            pass
        raise OSError("Moving downloaded temp file - %s, to %s failed. Please retry the "
                      "download." % (src, dst)) from None


def download(url, path=None, overwrite=False, sha1_hash=None, retries=5, verify_ssl=True):
    """Download ``url`` to ``path`` (a file, or a directory to put it in; by default the
    current directory, named after the URL) and return the file's path.

    An existing file is kept unless ``overwrite`` or its SHA-1 differs from ``sha1_hash``; a
    downloaded file whose SHA-1 differs raises MXNet's UserWarning (and is not kept).
    Without network access (as on many build machines) the download fails after ``retries``
    attempts with a RuntimeError naming the URL and the path to put the file at by hand.
    """
    if path is None:
        fname = url.split("/")[-1]
        if not fname:
            raise AssertionError("Can't construct file-name from this URL. Please set the "
                                 "`path` option manually.")
    else:
        path = os.path.expanduser(path)
        fname = os.path.join(path, url.split("/")[-1]) if os.path.isdir(path) else path
    if not isinstance(retries, int) or retries < 0:
        raise ValueError("download: retries must be a non-negative integer, got %r"
                         % (retries,))
    if not verify_ssl:
        warnings.warn("Unverified HTTPS request is being made (verify_ssl=False). Adding "
                      "certificate verification is strongly advised.", stacklevel=2)
    if not overwrite and os.path.exists(fname) and (not sha1_hash or
                                                    check_sha1(fname, sha1_hash)):
        return fname
    dirname = os.path.dirname(os.path.abspath(os.path.expanduser(fname)))
    os.makedirs(dirname, exist_ok=True)
    print("Downloading {} from {}...".format(fname, url))    # as MXNet
    error = None
    for _ in range(retries + 1):
        tmp = "%s.%s" % (fname, uuid.uuid4())
        try:
            with open(tmp, "wb") as out:
                _fetch_to(url, out, verify_ssl)
            if sha1_hash and not check_sha1(tmp, sha1_hash):
                raise UserWarning("File {} is downloaded but the content hash does not match."
                                  " The repo may be outdated or download may be incomplete. If "
                                  "the \"repo_url\" is overridden, consider switching to the "
                                  "default repo.".format(fname))
            replace_file(tmp, fname)
            return fname
        except UserWarning:
            raise
        except Exception as e:          # as MXNet: any failure is retried
            error = e
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)
    raise RuntimeError("download: failed downloading url %s (%s: %s). Without network access, "
                       "fetch the file elsewhere and put it at %s"
                       % (url, type(error).__name__, error, fname)) from error


def _fetch_to(url, out, verify_ssl):
    """Write the body of ``url`` to the open file ``out``: through ``requests`` when it is
    installed (as MXNet, whose tests replace ``requests.get``), else through ``urllib``
    (``file://`` URLs always)."""
    if not url.startswith("file:"):
        try:
            import requests
        except ImportError:
            requests = None
        if requests is not None:
            response = requests.get(url, stream=True, verify=verify_ssl)
            if response.status_code != 200:
                raise RuntimeError("Failed downloading url {}".format(url))
            for chunk in response.iter_content(chunk_size=1 << 20):
                if chunk:
                    out.write(chunk)
            return
    context = None
    if not verify_ssl and url.startswith("https"):
        context = ssl._create_unverified_context()
    with urllib.request.urlopen(url, context=context, timeout=30) as response:
        for block in iter(lambda: response.read(1 << 20), b""):
            out.write(block)


def _get_repo_url():
    """The base URL of Gluon's dataset and model repository (``MXNET_GLUON_REPO``)."""
    repo = os.environ.get("MXNET_GLUON_REPO",
                          "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/")
    return repo if repo.endswith("/") else repo + "/"


def _get_repo_file_url(namespace, filename):
    """The URL of ``filename`` in ``namespace`` of Gluon's repository."""
    return "%s%s/%s" % (_get_repo_url(), namespace, filename)

