"""MXNet's image operators on NDArrays (``mx.nd.image``), computed in NumPy by
``fastgrad._api._image`` (the kernels ``gluon.data.vision.transforms`` use).

Images are ``(H, W, C)`` (or ``(N, H, W, C)``) before :func:`to_tensor` and ``(C, H, W)``
after it. A result has the array type of the input (an NDArray for an NDArray). The random
operators draw from NumPy's global generator. None of them is recorded by autograd.

>>> import numpy as np
>>> import fastgrad as mx
>>> image = mx.nd.array(np.full((4, 6, 3), 255), dtype='uint8')
>>> mx.nd.image.to_tensor(mx.nd.image.resize(image, (3, 2))).shape
(3, 2, 3)
"""

import numpy as _onp

from fastgrad._core._array import _wrap, ndarray as _array_type, unwrap
from fastgrad.base import MXNetTypeError
from fastgrad._api import _image

__all__ = ["to_tensor", "normalize", "resize", "crop", "flip_left_right", "flip_top_bottom",
           "random_flip_left_right", "random_flip_top_bottom", "random_brightness",
           "random_contrast", "random_saturation", "random_hue", "random_color_jitter",
           "adjust_lighting", "random_lighting"]


def _apply(kernel, data, where):
    """``kernel`` on the NumPy data of ``data``, wrapped back into ``data``'s array type (an
    NDArray for NumPy input)."""
    if isinstance(data, _array_type):
        return _wrap(_onp.ascontiguousarray(kernel(unwrap(data))), type(data))
    if isinstance(data, _onp.ndarray):
        return _wrap(_onp.ascontiguousarray(kernel(data))).as_nd_ndarray()
    raise MXNetTypeError("%s: data must be an image array, got %s"
                         % (where, type(data).__name__))


def to_tensor(data):
    """(H, W, C) or (N, H, W, C) values in [0, 255] -> float32 (C, H, W) or (N, C, H, W) in
    [0, 1]."""
    return _apply(lambda a: _image.to_tensor(a, "nd.image.to_tensor"), data,
                  "nd.image.to_tensor")


def normalize(data, mean=0.0, std=1.0):
    """``(data[c] - mean[c]) / std[c]`` over the channels of a (C, H, W) or (N, C, H, W)
    tensor; recorded by autograd for a float array."""
    return normalize_as(data, mean, std, "nd.image.normalize")


def normalize_as(data, mean, std, where):
    """:func:`normalize` with errors naming ``where`` (``transforms.Normalize`` uses it)."""
    if isinstance(data, _array_type) and data.dtype.kind == "f":
        # checked on the values, computed with array operations so that it is differentiable
        _image.normalize(_onp.broadcast_to(_onp.zeros((), data.dtype), data.shape), mean,
                         std, where)
        shape = (-1, 1, 1)
        mean = _wrap(_onp.asarray(mean, data.dtype).reshape(shape), type(data))
        std = _wrap(_onp.asarray(std, data.dtype).reshape(shape), type(data))
        return (data - mean) / std
    return _apply(lambda a: _image.normalize(a, mean, std, where), data, where)


def resize(data, size=(), keep_ratio=False, interp=1):
    """(H, W, C) or (N, H, W, C) images resized to ``size`` (``(width, height)``, or an int:
    both sides, or the shorter side with ``keep_ratio``), with OpenCV's ``interp`` code."""
    where = "nd.image.resize"

    def kernel(a):
        _image.check_image(a, where)
        width, height = _image.resized_size(a.shape[-3], a.shape[-2], size, keep_ratio, where)
        return _image.resize_images(a, width, height, interp, where)
    return _apply(kernel, data, where)


def crop(data, x, y, width, height):
    """The ``width`` x ``height`` box at ``(x, y)`` of (H, W, C) or (N, H, W, C) images
    (a slice of ``data``: recorded by autograd)."""
    if isinstance(data, _array_type):
        _image.crop(_onp.broadcast_to(_onp.zeros((), data.dtype), data.shape), x, y, width,
                    height, "nd.image.crop")
        return data[..., y:y + height, x:x + width, :]
    return _apply(lambda a: _image.crop(a, x, y, width, height, "nd.image.crop"), data,
                  "nd.image.crop")


def _flip(data, axis, where):
    def kernel(a):
        _image.check_image(a, where)
        return _onp.flip(a, axis=axis)
    return _apply(kernel, data, where)


def flip_left_right(data):
    """Images mirrored left to right."""
    return _flip(data, -2, "nd.image.flip_left_right")


def flip_top_bottom(data):
    """Images mirrored top to bottom."""
    return _flip(data, -3, "nd.image.flip_top_bottom")


def random_flip_left_right(data):
    """:func:`flip_left_right` with probability 1/2."""
    if _onp.random.random() < 0.5:
        return flip_left_right(data)
    return _flip(data, (), "nd.image.random_flip_left_right")


def random_flip_top_bottom(data):
    """:func:`flip_top_bottom` with probability 1/2."""
    if _onp.random.random() < 0.5:
        return flip_top_bottom(data)
    return _flip(data, (), "nd.image.random_flip_top_bottom")


def _random_factor(adjust, where):
    def operator(data, min_factor, max_factor):
        factor = _onp.random.uniform(min_factor, max_factor)
        return _apply(lambda a: adjust(a, factor), data, where)
    return operator


random_brightness = _random_factor(_image.adjust_brightness, "nd.image.random_brightness")
random_brightness.__doc__ = "Pixels multiplied by a factor drawn from [min_factor, max_factor]."
random_contrast = _random_factor(_image.adjust_contrast, "nd.image.random_contrast")
random_contrast.__doc__ = ("Pixels moved from the mean grey value by a factor drawn from "
                           "[min_factor, max_factor].")
random_saturation = _random_factor(_image.adjust_saturation, "nd.image.random_saturation")
random_saturation.__doc__ = ("Pixels blended with their grey value by a factor drawn from "
                             "[min_factor, max_factor].")
random_hue = _random_factor(_image.adjust_hue, "nd.image.random_hue")
random_hue.__doc__ = ("Hue rotated by ``alpha * 360`` degrees, ``alpha`` drawn from "
                      "[min_factor, max_factor].")


def random_color_jitter(data, brightness=0, contrast=0, saturation=0, hue=0):
    """Brightness, contrast, saturation and hue jitter in a random order (factors
    ``1 + uniform(-amount, amount)``; hue ``uniform(-hue, hue)`` turns)."""
    return _apply(lambda a: _image.color_jitter(a, brightness, contrast, saturation, hue),
                  data, "nd.image.random_color_jitter")


def adjust_lighting(data, alpha):
    """AlexNet's PCA lighting shift for the three ``alpha`` coefficients."""
    return _apply(lambda a: _image.adjust_lighting(a, alpha), data, "nd.image.adjust_lighting")


def random_lighting(data, alpha_std=0.05):
    """:func:`adjust_lighting` with ``alpha`` drawn from ``Normal(0, alpha_std)``."""
    alpha = _onp.random.normal(0, alpha_std, size=3)
    return adjust_lighting(data, alpha)
