"""Image transforms (MXNet 1.9.1's ``gluon.data.vision.transforms``), in NumPy.

Each transform is a Gluon Block (a ``HybridBlock`` where MXNet's is one) that takes an
``mx.nd.NDArray`` or ``mx.np`` array (or a NumPy array) and returns the same array type:
images are ``(H, W, C)`` (or ``(N, H, W, C)`` batches) before :class:`ToTensor` and
``(C, H, W)`` after it.

>>> import numpy as np
>>> import fastgrad as mx
>>> from fastgrad.gluon.data.vision import transforms
>>> image = mx.nd.array(np.random.randint(0, 256, (40, 60, 3)), dtype='uint8')
>>> pipeline = transforms.Compose([transforms.Resize(32), transforms.CenterCrop(28),
...                                transforms.ToTensor(),
...                                transforms.Normalize(0.5, 0.25)])
>>> pipeline(image).shape
(3, 28, 28)

Note [Transforms run on arrays]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
MXNet's transforms call image operators (``F.image.resize``...) that exist for NDArrays and
Symbols. fastgrad's are NumPy functions, so they run eagerly even after ``hybridize()``
(which they accept and ignore); a transform reached by a hybridized parent's trace raises a
TypeError naming it. :class:`Compose` therefore groups consecutive transforms into a
``HybridSequential`` as MXNet does but only hybridizes groups that hold no image transform.
Bad input raises ``MXNetValueError``/``MXNetTypeError`` (subclasses of ``MXNetError`` and of
``ValueError``/``TypeError``), where MXNet's image operators raise ``MXNetError``.
Random choices come from Python's ``random`` module where MXNet's Python code uses it
(crops: ``random.seed`` reproduces MXNet's crop boxes) and from NumPy's global generator
where MXNet uses its C++ generator (flips, colour jitter, lighting).
"""

import numbers
import random

import numpy as _onp

from fastgrad._core._array import ndarray as _array_type, _wrap, unwrap
from fastgrad.base import MXNetTypeError, MXNetValueError
from fastgrad.ndarray import NDArray
from fastgrad.ndarray import image as _nd_image
from fastgrad.gluon.block import Block, HybridBlock
from fastgrad.gluon.nn import Sequential, HybridSequential
from fastgrad.gluon.data.dataloader import _np_arrays_requested
from fastgrad._api import _image

__all__ = ["Compose", "HybridCompose", "Cast", "ToTensor", "Normalize", "Resize",
           "CenterCrop", "RandomResizedCrop", "RandomCrop", "CropResize",
           "RandomFlipLeftRight", "RandomFlipTopBottom", "RandomBrightness",
           "RandomContrast", "RandomSaturation", "RandomHue", "RandomColorJitter",
           "RandomLighting", "RandomApply", "Rotate", "RandomRotation"]



# ---------------------------------------------------------------- array plumbing

def _unpack(x, where):
    """The NumPy data of the input of transform ``where`` and a function wrapping a NumPy
    result back into the input's array type."""
    if isinstance(x, _array_type):
        kind = type(x)
        return unwrap(x), (lambda out: _wrap(_onp.ascontiguousarray(out), kind))
    if isinstance(x, _onp.ndarray):
        kind = _array_type if _np_arrays_requested() else NDArray
        return x, (lambda out: _wrap(_onp.ascontiguousarray(out), kind))
    raise MXNetTypeError("transforms.%s takes an image array (mx.nd.NDArray, mx.np.ndarray "
                         "or numpy.ndarray), got %s. fastgrad's transforms run on arrays "
                         "only and cannot be traced by a hybridized block (Note [Transforms "
                         "run on arrays])" % (where, type(x).__name__))


def _where(transform):
    return "transforms.%s" % type(transform).__name__


# ---------------------------------------------------------------- base classes

class _ArrayTransformMixin:
    """Runs ``self._apply(numpy_image)`` on the input's data and returns the input's array
    type; never traced (Note [Transforms run on arrays])."""

    def __call__(self, x, *args):
        for hook in list(self._forward_pre_hooks.values()):
            hook(self, (x,) + args)
        out = self.forward(x, *args)
        for hook in list(self._forward_hooks.values()):
            hook(self, (x,) + args, out)
        return out

    def forward(self, x, *args):
        if args:
            raise MXNetTypeError("%s takes one image, got %d inputs"
                                 % (_where(self), 1 + len(args)))
        image, wrap = _unpack(x, type(self).__name__)
        return wrap(self._apply(image))

    def hybridize(self, active=True, **kwargs):
        """Accepted and ignored: the transform runs on arrays (Note [Transforms run on
        arrays])."""

    def _apply(self, image):
        raise NotImplementedError

    def __repr__(self):
        return "%s(%s)" % (type(self).__name__, self._describe())

    def _describe(self):
        return ""


class _HybridTransform(_ArrayTransformMixin, HybridBlock):
    """A transform that is a HybridBlock in MXNet."""

    def __init__(self):
        HybridBlock.__init__(self)


class _Transform(_ArrayTransformMixin, Block):
    """A transform that is a plain Block in MXNet."""

    def __init__(self):
        Block.__init__(self)


def _is_array_transform(block):
    if isinstance(block, _ArrayTransformMixin):
        return True
    return any(_is_array_transform(child) for child in getattr(block, "_children", {}).values())


# ---------------------------------------------------------------- composition

class _TransformGroup(HybridSequential):
    """A HybridSequential that hybridizes only when it holds no image transform (Note
    [Transforms run on arrays])."""

    def hybridize(self, active=True, **kwargs):
        if not any(_is_array_transform(block) for block in self._children.values()):
            super().hybridize(active, **kwargs)

    def __call__(self, x, *args):
        if isinstance(x, _onp.ndarray):             # a NumPy image, as the transforms take
            image, wrap = _unpack(x, type(self).__name__)
            x = wrap(image)
        return super().__call__(x, *args)


class Compose(Sequential):
    """Applies ``transforms`` one after the other.

    As in MXNet, runs of two or more consecutive HybridBlocks are grouped into a
    ``HybridSequential``; such a group is hybridized only if it holds no image transform
    (Note [Transforms run on arrays]).

    >>> import numpy as np
    >>> from fastgrad.gluon.data.vision.transforms import Compose, Resize, ToTensor, Normalize
    >>> pipeline = Compose([Resize(8), ToTensor(), Normalize(0.5, 0.5)])
    >>> float(pipeline(np.full((10, 12, 3), 255, np.uint8)).asnumpy().max())
    1.0
    """

    def __init__(self, transforms):
        super().__init__()
        pending = []
        for transform in list(transforms) + [None]:
            if isinstance(transform, HybridBlock):
                pending.append(transform)
                continue
            if len(pending) == 1:
                self.add(pending[0])
            elif len(pending) > 1:
                group = _TransformGroup()
                for block in pending:
                    group.add(block)
                group.hybridize()
                self.add(group)
            pending = []
            if transform is not None:
                self.add(transform)


class HybridCompose(_TransformGroup):
    """Applies HybridBlock ``transforms`` one after the other (MXNet 2's
    ``HybridCompose``); every transform must be a HybridBlock."""

    def __init__(self, transforms):
        super().__init__()
        for transform in transforms:
            if not isinstance(transform, HybridBlock):
                raise MXNetValueError("HybridCompose: %s is not a HybridBlock; use Compose"
                                 % type(transform).__name__)
            self.add(transform)


class RandomApply(Sequential):
    """Applies ``transforms`` with probability ``p`` (Python's ``random``, as MXNet)."""

    def __init__(self, transforms, p=0.5):
        super().__init__()
        self.transforms = transforms
        self.p = p

    def forward(self, x, *args):
        if self.p < random.random():
            return x
        return self.transforms(x)


# ---------------------------------------------------------------- tensor transforms

class Cast(_HybridTransform):
    """Casts the input to ``dtype`` (default float32)."""

    def __init__(self, dtype="float32"):
        super().__init__()
        self._dtype = _onp.dtype(dtype)

    def _apply(self, image):
        return image.astype(self._dtype)

    def _describe(self):
        return "dtype=%s" % self._dtype


class ToTensor(_HybridTransform):
    """(H, W, C) or (N, H, W, C) image with values in [0, 255] -> float32 (C, H, W) or
    (N, C, H, W) with values in [0, 1] (divided by 255)."""

    def _apply(self, image):
        return _image.to_tensor(image, _where(self))


class Normalize(_HybridTransform):
    """``(x[c] - mean[c]) / std[c]`` for each channel ``c`` of a (C, H, W) or (N, C, H, W)
    tensor; ``mean`` and ``std`` are one number or one per channel."""

    def __init__(self, mean=0.0, std=1.0):
        super().__init__()
        self._mean = mean
        self._std = std

    def forward(self, x, *args):
        if args:
            return super().forward(x, *args)
        if isinstance(x, _array_type):
            # array arithmetic on a float array: recorded by autograd, as MXNet's operator
            return _nd_image.normalize_as(x, self._mean, self._std, _where(self))
        return super().forward(x)

    def _apply(self, image):
        return _image.normalize(image, self._mean, self._std, _where(self))

    def _describe(self):
        return "mean=%s, std=%s" % (self._mean, self._std)


# ---------------------------------------------------------------- geometry

class Resize(_HybridTransform):
    """Resizes (H, W, C) or (N, H, W, C) images to ``size``.

    ``size`` is ``(width, height)``, or an int: with ``keep_ratio`` the shorter edge becomes
    ``size`` and the other keeps the aspect ratio (rounded down), without it the image
    becomes ``size`` x ``size``. ``interpolation`` is OpenCV's code (0 nearest, 1 bilinear,
    2 bicubic, 3 area, 4 Lanczos; Note [OpenCV-compatible resize]).
    """

    def __init__(self, size, keep_ratio=False, interpolation=1):
        super().__init__()
        self._size = size
        self._keep = keep_ratio
        self._interpolation = interpolation

    def _apply(self, image):
        _image.check_image(image, _where(self))
        height, width = image.shape[-3:-1]
        new_w, new_h = _image.resized_size(height, width, self._size, self._keep, _where(self))
        return _image.resize_images(image, new_w, new_h, self._interpolation, _where(self))

    def _describe(self):
        return "size=%s, keep_ratio=%s, interpolation=%s" % (self._size, self._keep,
                                                             self._interpolation)


class CenterCrop(_Transform):
    """Crops the centre of an (H, W, C) image to ``size`` (an int or ``(width, height)``);
    an image smaller than ``size`` is cropped at its aspect ratio and resized up."""

    def __init__(self, size, interpolation=1):
        super().__init__()
        self._size = _image.size_pair(size, "transforms.CenterCrop")
        self._interpolation = interpolation

    def _apply(self, image):
        _image.check_image(image, _where(self), (3,))
        return _image.center_crop(image, self._size, self._interpolation)[0]

    def _describe(self):
        return "size=%s" % (self._size,)


class CropResize(_HybridTransform):
    """Crops the box of ``width`` x ``height`` at ``(x, y)`` of (H, W, C) or (N, H, W, C)
    images, then resizes it to ``size`` when given."""

    def __init__(self, x, y, width, height, size=None, interpolation=None):
        super().__init__()
        self._box = (x, y, width, height)
        self._size = size
        self._interpolation = interpolation

    def _apply(self, image):
        out = _image.crop(image, *self._box, where=_where(self))
        if self._size:
            new_w, new_h = _image.size_pair(self._size, _where(self))
            out = _image.resize_images(out, new_w, new_h, self._interpolation, _where(self))
        return out


class RandomResizedCrop(_Transform):
    """Crops a random box of ``scale`` (a fraction of the area) and aspect ratio ``ratio``
    (log-uniform) from an (H, W, C) image and resizes it to ``size``; after 10 boxes that
    do not fit, a centre crop (MXNet's ``image.random_size_crop``, with Python's
    ``random``)."""

    def __init__(self, size, scale=(0.08, 1.0), ratio=(3.0 / 4.0, 4.0 / 3.0),
                 interpolation=1):
        super().__init__()
        self._size = _image.size_pair(size, "transforms.RandomResizedCrop")
        self._scale = (scale, 1.0) if isinstance(scale, numbers.Number) else tuple(scale)
        self._ratio = tuple(ratio)
        self._interpolation = interpolation

    def _apply(self, image):
        _image.check_image(image, _where(self), (3,))
        return _image.random_size_crop(image, self._size, self._scale, self._ratio,
                                       self._interpolation)[0]


class RandomCrop(_Transform):
    """Crops a random ``size`` box (an int or ``(width, height)``) from an (H, W, C) image,
    after padding it by ``pad`` (an int for the two spatial axes, or NumPy's pad widths)
    with ``pad_value`` (MXNet 2's ``RandomCrop``; Python's ``random``)."""

    def __init__(self, size, pad=None, pad_value=0, interpolation=1):
        super().__init__()
        self._size = _image.size_pair(size, "transforms.RandomCrop")
        if isinstance(pad, numbers.Integral):
            pad = ((pad, pad), (pad, pad), (0, 0))
        self._pad = pad
        self._pad_value = pad_value
        self._interpolation = interpolation

    def _apply(self, image):
        _image.check_image(image, _where(self), (3,))
        if self._pad:
            image = _onp.pad(image, self._pad, mode="constant",
                             constant_values=self._pad_value)
        return _image.random_crop(image, self._size, self._interpolation)[0]


class RandomFlipLeftRight(_HybridTransform):
    """Flips the image left to right (its width axis) with probability 1/2."""

    _axis = -2

    def _apply(self, image):
        _image.check_image(image, _where(self))
        if _onp.random.random() < 0.5:
            return _onp.flip(image, axis=self._axis)
        return image.copy()


class RandomFlipTopBottom(RandomFlipLeftRight):
    """Flips the image top to bottom (its height axis) with probability 1/2."""

    _axis = -3


def _check_float32(image, where):
    if image.dtype != _onp.float32:
        raise MXNetTypeError("transforms.%s only supports float32 images (got %s); call it "
                             "after ToTensor" % (where, image.dtype))


class Rotate(_Transform):
    """Rotates (C, H, W) or (N, C, H, W) float32 images by ``rotation_degrees`` about their
    centres (MXNet's ``image.imrotate``: bilinear, zero outside; ``zoom_in`` hides the
    padding, ``zoom_out`` keeps the whole image)."""

    def __init__(self, rotation_degrees, zoom_in=False, zoom_out=False):
        super().__init__()
        self._args = (rotation_degrees, zoom_in, zoom_out)

    def _apply(self, image):
        _check_float32(image, "Rotate")
        return _image.rotate(image, *self._args)


class RandomRotation(_Transform):
    """Rotates (C, H, W) or (N, C, H, W) float32 images by an angle drawn uniformly from
    ``angle_limits`` (one per image), with probability ``rotate_with_proba`` (NumPy's global
    generator, as MXNet)."""

    def __init__(self, angle_limits, zoom_in=False, zoom_out=False, rotate_with_proba=1.0):
        super().__init__()
        lower, upper = angle_limits
        if lower >= upper:
            raise ValueError("`angle_limits` must be an ordered tuple")
        if rotate_with_proba < 0 or rotate_with_proba > 1:
            raise ValueError("Probability of rotating the image should be between 0 and 1")
        self._limits = (lower, upper)
        self._zoom = (zoom_in, zoom_out)
        self._rotate_with_proba = rotate_with_proba

    def _apply(self, image):
        if _onp.random.random() > self._rotate_with_proba:
            return image.copy()
        _check_float32(image, "RandomRotation")
        if image.ndim == 3:
            degrees = _onp.random.uniform(*self._limits)
        else:
            degrees = _onp.random.uniform(*self._limits, size=image.shape[0])
        return _image.rotate(image, degrees, *self._zoom)


# ---------------------------------------------------------------- colour

class _RandomFactor(_HybridTransform):
    """A colour adjustment by a factor drawn uniformly from ``[max(0, 1 - amount),
    1 + amount]`` (NumPy's global generator)."""

    _adjust = None

    def __init__(self, amount):
        super().__init__()
        self._amount = amount
        self._bounds = (max(0, 1 - amount), 1 + amount)

    def _apply(self, image):
        _image.check_image(image, _where(self))
        return type(self)._adjust(image, _onp.random.uniform(*self._bounds))


class RandomBrightness(_RandomFactor):
    """Multiplies every pixel by a random factor in ``[max(0, 1 - brightness),
    1 + brightness]``."""

    _adjust = staticmethod(_image.adjust_brightness)


class RandomContrast(_RandomFactor):
    """Moves every pixel away from (factor > 1) or towards the image's mean grey value by a
    random factor in ``[max(0, 1 - contrast), 1 + contrast]``."""

    _adjust = staticmethod(_image.adjust_contrast)


class RandomSaturation(_RandomFactor):
    """Blends every pixel with its grey value by a random factor in
    ``[max(0, 1 - saturation), 1 + saturation]`` (1 keeps the image)."""

    _adjust = staticmethod(_image.adjust_saturation)


class RandomHue(_HybridTransform):
    """Rotates the hue of every pixel (in HLS space) by ``alpha * 360`` degrees for a random
    ``alpha``: MXNet 1.9.1 draws it from ``[max(0, 1 - hue), 1 + hue]``, so it is kept."""

    def __init__(self, hue):
        super().__init__()
        self._bounds = (max(0, 1 - hue), 1 + hue)

    def _apply(self, image):
        _image.check_image(image, _where(self))
        return _image.adjust_hue(image, _onp.random.uniform(*self._bounds))


class RandomColorJitter(_HybridTransform):
    """Applies brightness, contrast, saturation and hue jitter in a random order, each with
    a factor ``1 + uniform(-amount, amount)`` (hue: ``uniform(-hue, hue)`` turns); an
    amount of 0 skips that adjustment."""

    def __init__(self, brightness=0, contrast=0, saturation=0, hue=0):
        super().__init__()
        self._amounts = (brightness, contrast, saturation, hue)

    def _apply(self, image):
        _image.check_image(image, _where(self))
        return _image.color_jitter(image, *self._amounts)


class RandomLighting(_HybridTransform):
    """AlexNet's PCA lighting noise: adds ``eigvec @ (eigval * a)`` to every RGB pixel, with
    ``a`` drawn from ``Normal(0, alpha)`` per channel."""

    def __init__(self, alpha):
        super().__init__()
        self._alpha = alpha

    def _apply(self, image):
        _image.check_image(image, _where(self))
        if self._alpha == 0:
            return image.copy()
        return _image.adjust_lighting(image, _onp.random.normal(0, self._alpha, size=3))
