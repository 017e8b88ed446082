"""MXNet's image functions (``mx.image``) on NDArrays, computed in NumPy by
``fastgrad._api._image`` with OpenCV's sampling rules (Note [OpenCV-compatible resize]).

Images are ``(H, W, C)`` uint8 NDArrays as ``imread`` returns them. The crops draw from
Python's ``random``, as MXNet's do, so ``random.seed`` reproduces MXNet's boxes. PNG files
are decoded by fastgrad; other formats need Pillow or OpenCV. MXNet's ``ImageIter``, its
augmenter classes and ``image.detection`` are not here.

>>> import numpy as np
>>> import fastgrad as mx
>>> image = mx.nd.array(np.arange(4 * 6 * 3).reshape(4, 6, 3), dtype='uint8')
>>> mx.image.imresize(image, 3, 2, interp=0).shape
(2, 3, 3)
>>> out, box = mx.image.center_crop(image, (2, 2))
>>> out.shape, box
((2, 2, 3), (2, 1, 2, 2))
"""

import numbers

import numpy as _onp

from fastgrad._core._array import _wrap, ndarray as _array_type, unwrap
from fastgrad.base import MXNetTypeError, MXNetValueError
from fastgrad._api import _image, _image_files
from fastgrad import ndarray as nd

__all__ = ["imread", "imdecode", "imresize", "scale_down", "resize_short", "fixed_crop",
           "random_crop", "center_crop", "random_size_crop", "color_normalize",
           "copyMakeBorder", "imrotate", "random_rotate"]

# cv2 border types -> numpy.pad modes
_BORDERS = {0: "constant", 1: "edge", 2: "symmetric", 4: "reflect"}


def _raw(src, where):
    if isinstance(src, _array_type):
        return unwrap(src)
    if isinstance(src, _onp.ndarray):
        return src
    raise MXNetTypeError("image.%s: src must be an image NDArray, got %s"
                         % (where, type(src).__name__))


def _like(result, src):
    """``result`` (NumPy) as the array type of ``src`` (an NDArray for NumPy input)."""
    result = _onp.ascontiguousarray(result)
    if isinstance(src, _array_type):
        return _wrap(result, type(src))
    return _wrap(result).as_nd_ndarray()


def _hwc(src, where):
    raw = _raw(src, where)
    _image.check_image(raw, "image." + where, (3,))
    return raw


def imread(filename, flag=1, to_rgb=True, out=None):
    """The image file ``filename`` as an (H, W, 3) uint8 NDArray (``flag=1``; RGB, or BGR
    when ``to_rgb`` is false) or (H, W, 1) grey (``flag=0``)."""
    pixels = _image_files.read_image(filename, flag)
    if flag and not to_rgb:
        pixels = pixels[:, :, ::-1]
    return _wrap(_onp.ascontiguousarray(pixels)).as_nd_ndarray()


def imdecode(buf, flag=1, to_rgb=True, out=None):
    """:func:`imread` for the bytes of an image file (``bytes`` or a uint8 array)."""
    if isinstance(buf, _array_type):
        buf = unwrap(buf)
    blob = buf.tobytes() if isinstance(buf, _onp.ndarray) else bytes(buf)
    pixels = _image_files.decode_image(blob, flag, "the image buffer")
    if flag and not to_rgb:
        pixels = pixels[:, :, ::-1]
    return _wrap(_onp.ascontiguousarray(pixels)).as_nd_ndarray()


def imresize(src, w, h, interp=1, out=None):
    """``src`` resized to ``w`` x ``h`` with OpenCV's ``interp`` code."""
    raw = _hwc(src, "imresize")
    return _like(_image.resize_images(raw, int(w), int(h), interp, "image.imresize"), src)


def scale_down(src_size, size):
    """Shrink the crop size ``size`` ``(w, h)`` to fit ``src_size``, keeping its aspect
    ratio."""
    return _image.scale_down(src_size, size)


def resize_short(src, size, interp=2):
    """``src`` resized so that its shorter side is ``size`` (the other rounded down)."""
    raw = _hwc(src, "resize_short")
    h, w = raw.shape[:2]
    if h > w:
        new_h, new_w = size * h // w, size
    else:
        new_h, new_w = size, size * w // h
    method = _image.interp_method(interp, (h, w, new_h, new_w))
    return _like(_image.resize(raw, new_h, new_w, method), src)


def fixed_crop(src, x0, y0, w, h, size=None, interp=2):
    """The ``w`` x ``h`` box at ``(x0, y0)``, resized to ``size`` ``(w, h)`` if given."""
    return _like(_image.fixed_crop(_hwc(src, "fixed_crop"), x0, y0, w, h, size, interp), src)


def _with_box(function, src, where, *args):
    out, box = function(_hwc(src, where), *args)
    return _like(out, src), box


def random_crop(src, size, interp=2):
    """A random box of ``size`` ``(w, h)`` (shrunk to fit), resized to ``size``; returns
    ``(image, (x0, y0, w, h))``."""
    return _with_box(_image.random_crop, src, "random_crop", size, interp)


def center_crop(src, size, interp=2):
    """The centred box of ``size`` ``(w, h)`` (shrunk to fit), resized to ``size``; returns
    ``(image, (x0, y0, w, h))``."""
    return _with_box(_image.center_crop, src, "center_crop", size, interp)


def random_size_crop(src, size, area, ratio, interp=2, **kwargs):
    """A random box of relative area in ``area`` and aspect ratio in ``ratio``, resized to
    ``size``; returns ``(image, (x0, y0, w, h))``."""
    if "min_area" in kwargs:
        area = kwargs.pop("min_area")
    if kwargs:
        raise TypeError("image.random_size_crop: unexpected arguments %s" % sorted(kwargs))
    return _with_box(_image.random_size_crop, src, "random_size_crop", size, area, ratio,
                     interp)


def color_normalize(src, mean, std=None):
    """``(src - mean) / std`` (recorded by autograd like any array arithmetic)."""
    src = src - mean
    if std is not None:
        src = src / std
    return src


def copyMakeBorder(src, top, bot, left, right, type=0, value=0, values=None):  # noqa: N802
    """``src`` padded by ``top``, ``bot``, ``left`` and ``right`` pixels: OpenCV's border
    ``type`` 0 constant (``value``, or ``values`` per channel), 1 replicate, 2 reflect, 4
    reflect-101."""
    raw = _hwc(src, "copyMakeBorder")
    if type not in _BORDERS:
        raise MXNetValueError("image.copyMakeBorder: border type %r is not supported (0, 1, "
                              "2 or 4)" % (type,))
    widths = ((top, bot), (left, right), (0, 0))
    if _BORDERS[type] != "constant":
        return _like(_onp.pad(raw, widths, mode=_BORDERS[type]), src)
    fill = _onp.broadcast_to(_onp.asarray(values if values is not None else value),
                             (raw.shape[2],))
    out = _onp.empty((raw.shape[0] + top + bot, raw.shape[1] + left + right, raw.shape[2]),
                     raw.dtype)
    out[...] = fill.astype(raw.dtype)
    out[top:top + raw.shape[0], left:left + raw.shape[1]] = raw
    return _like(out, src)


def imrotate(src, rotation_degrees, zoom_in=False, zoom_out=False):
    """(C, H, W) or (N, C, H, W) float32 images rotated by ``rotation_degrees`` (one angle,
    or one per image) about their centres; bilinear, zero outside."""
    raw = _raw(src, "imrotate")
    if raw.dtype != _onp.float32:
        raise TypeError("Only `float32` images are supported by this function")
    if isinstance(rotation_degrees, _array_type):
        rotation_degrees = unwrap(rotation_degrees)
    elif raw.ndim == 3 and not isinstance(rotation_degrees, numbers.Number):
        raise TypeError("When a single image is passed the rotation angle is required to "
                        "be a scalar.")
    angles = _onp.atleast_1d(_onp.asarray(rotation_degrees, _onp.float32))
    if raw.ndim == 4 and angles.size not in (1, raw.shape[0]):
        raise ValueError("The number of images must be equal to the number of rotation "
                         "angles")
    return _like(_image.rotate(raw, angles if raw.ndim == 4 else angles[0], zoom_in,
                               zoom_out), src)


def random_rotate(src, angle_limits, zoom_in=False, zoom_out=False):
    """:func:`imrotate` by angles drawn uniformly from ``angle_limits`` (NumPy's global
    generator, as MXNet)."""
    raw = _raw(src, "random_rotate")
    if raw.ndim == 3:
        degrees = _onp.random.uniform(*angle_limits)
    else:
        degrees = nd.array(_onp.random.uniform(*angle_limits, size=raw.shape[0]))
    return imrotate(src, degrees, zoom_in=zoom_in, zoom_out=zoom_out)
