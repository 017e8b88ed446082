"""Image kernels in NumPy: resizing with OpenCV's sampling rules (MXNet resizes with
``cv::resize``), crops, rotation and MXNet's colour operators. ``mx.image``, ``mx.nd.image``
and ``gluon.data.vision.transforms`` are built on them.

Note [OpenCV-compatible resize]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Each method maps output pixel ``d`` to the source as OpenCV does. The codes are OpenCV's
(MXNet passes them to ``cv::resize`` unchanged; MXNet's docstrings swap 2 and 3, its
behaviour does not):

* 0 nearest: source ``floor(d * in / out)``;
* 1 bilinear: source ``(d + 0.5) * in / out - 0.5`` and its neighbour. Along x a source
  outside the image is clamped with weight 1 on the edge pixel; along y the two rows are
  clamped but keep their weights (as OpenCV). On uint8 images the float32 weights are
  rounded to 1/2048 each and the vertical pass uses the fixed-point rounding of OpenCV's
  vectorised path, so the bytes equal MXNet's; an exact halving takes the area path;
* 2 bicubic: Keys' kernel with ``A = -0.75`` over 4 taps, replicated borders;
* 3 area: a box filter over the source pixels each output pixel covers when shrinking both
  axes (block means rounded half up for integer factors on uint8); when either axis grows,
  OpenCV's two-tap path with INTER_AREA's coefficients on both axes;
* 4 Lanczos: the 8-tap Lanczos window, replicated borders.

Checked against MXNet 1.9.1 (``mx.image.imresize``) on uint8 and float32 images, up and
down: 0 and 1 give the same bytes on uint8, and so does 3 except when shrinking by a
non-integer factor; there, and for 2 and 4, a few pixels differ by 1 grey level (OpenCV
rounds float32 or fixed-point sums, fastgrad float64 ones). float32 images agree to 5e-4.
"""

import functools
import math
import numbers
import random

import numpy as _onp

from fastgrad.base import MXNetValueError

INTERPOLATIONS = {0: "nearest", 1: "bilinear", 2: "bicubic", 3: "area", 4: "lanczos"}
NEAREST, BILINEAR, BICUBIC, AREA, LANCZOS = range(5)
_UNKNOWN = ("unknown interpolation %r: use OpenCV's codes 0 (nearest), 1 (bilinear), "
            "2 (bicubic), 3 (area) or 4 (Lanczos)")
_COEF_BITS = 11
_COEF_SCALE = 1 << _COEF_BITS


@functools.lru_cache(maxsize=256)
def _taps_matrix(n_out, n_in, method):
    """The (n_out, n_in) float64 matrix whose row ``d`` holds the weights of output pixel
    ``d`` on the source pixels (cached and read-only: a pipeline resizes many images of one
    size)."""
    weights = _taps_weights(n_out, n_in, method)
    weights.flags.writeable = False
    return weights


def _taps_weights(n_out, n_in, method):
    scale = n_in / n_out
    weights = _onp.zeros((n_out, n_in))
    rows = _onp.arange(n_out)
    if method == NEAREST:
        src = _onp.minimum(_onp.floor(rows * scale).astype(int), n_in - 1)
        weights[rows, src] = 1.0
        return weights
    if method == AREA and scale >= 1:
        for d in range(n_out):
            start, stop = d * scale, (d + 1) * scale
            for s in range(int(math.floor(start)), min(int(math.ceil(stop)), n_in)):
                overlap = min(stop, s + 1) - max(start, s)
                if overlap > 1e-12:
                    weights[d, s] += overlap / scale
        return weights
    src = (rows + 0.5) * scale - 0.5
    base = _onp.floor(src).astype(int)
    frac = src - base
    if method == BICUBIC:
        a = -0.75
        x = frac
        kernel = [((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a,
                  ((a + 2) * x - (a + 3)) * x * x + 1,
                  ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1]
        kernel.append(1 - kernel[0] - kernel[1] - kernel[2])
        offsets = range(-1, 3)
    elif method == LANCZOS:
        kernel = []
        for i in range(8):
            y = -(frac + 3 - i)
            with _onp.errstate(invalid="ignore", divide="ignore"):
                value = _onp.sin(y * math.pi / 4) * _onp.sin(y * math.pi) / (y * y * math.pi
                                                                            * math.pi / 4)
            kernel.append(_onp.where(_onp.abs(y) < 1e-12, 1.0, value))
        total = sum(kernel)
        kernel = [k / total for k in kernel]
        offsets = range(-3, 5)
    else:
        raise ValueError(_UNKNOWN % (method,))
    for offset, w in zip(offsets, kernel):
        _onp.add.at(weights, (rows, _onp.clip(base + offset, 0, n_in - 1)), w)
    return weights


def _saturate_round(values, dtype):
    """Round half to even and clip to an integer dtype (OpenCV's saturate_cast), or cast to
    a float one."""
    dtype = _onp.dtype(dtype)
    if dtype.kind in "iu":
        info = _onp.iinfo(dtype)
        return _onp.clip(_onp.rint(values), info.min, info.max).astype(dtype)
    return values.astype(dtype)


def _two_tap_axis(n_out, n_in, area_mode, clamp_weights):
    """OpenCV's two-tap coefficients for one axis: the source index pair and the float32
    weights. ``area_mode`` is INTER_AREA's rule when upscaling; ``clamp_weights`` moves a
    source outside the image onto the edge pixel with weight 1 (OpenCV does it along x)."""
    dst = _onp.arange(n_out)
    if area_mode:
        left = _onp.floor(dst * (n_in / n_out)).astype(_onp.int64)
        frac = ((dst + 1) - (left + 1) * (n_out / n_in)).astype(_onp.float32)
        frac = _onp.where(frac <= 0, _onp.float32(0), frac - _onp.floor(frac))
    else:
        src = ((dst + 0.5) * (n_in / n_out) - 0.5).astype(_onp.float32)
        left = _onp.floor(src).astype(_onp.int64)
        frac = (src - left.astype(_onp.float32)).astype(_onp.float32)
    if clamp_weights:
        frac = _onp.where((left < 0) | (left >= n_in - 1), _onp.float32(0), frac)
    frac = frac.astype(_onp.float32)
    return (_onp.clip(left, 0, n_in - 1), _onp.clip(left + 1, 0, n_in - 1),
            _onp.float32(1) - frac, frac)


@functools.lru_cache(maxsize=256)
def _fixed_two_tap_axis(n_out, n_in, area_mode, clamp_weights):
    """:func:`_two_tap_axis` with the weights rounded to 1/2048 as int32 (cached: a data
    pipeline resizes many images of one size)."""
    first, second, w0, w1 = _two_tap_axis(n_out, n_in, area_mode, clamp_weights)
    w0, w1 = (_onp.rint(w * _onp.float32(_COEF_SCALE)).astype(_onp.int32) for w in (w0, w1))
    for array in (first, second, w0, w1):
        array.flags.writeable = False
    return first, second, w0, w1


def _two_tap_uint8(image, out_h, out_w, area_mode):
    """OpenCV's fixed-point two-tap resize of a uint8 image (bilinear, or INTER_AREA when
    upscaling): weights rounded to 1/2048 each, the vertical pass rounded as in OpenCV's
    vectorised path (Note [OpenCV-compatible resize])."""
    x0, x1, a0, a1 = _fixed_two_tap_axis(out_w, image.shape[1], area_mode, True)
    y0, y1, b0, b1 = _fixed_two_tap_axis(out_h, image.shape[0], area_mode, False)
    # int32 is wide enough: a row value is at most 255 * 2 * 2048 and a weighted one
    # 2048 * 2**16
    src = image.astype(_onp.int32)
    rows = src[:, x0] * a0[None, :, None]
    rows += src[:, x1] * a1[None, :, None]
    rows >>= 4
    out = (b0[:, None, None] * rows[y0]) >> 16
    out += (b1[:, None, None] * rows[y1]) >> 16
    out += 2
    out >>= 2
    _onp.clip(out, 0, 255, out=out)
    return out.astype(_onp.uint8)


def _two_tap_float(image, out_h, out_w, area_mode):
    x0, x1, a0, a1 = _two_tap_axis(out_w, image.shape[1], area_mode, True)
    y0, y1, b0, b1 = _two_tap_axis(out_h, image.shape[0], area_mode, False)
    src = image.astype(_onp.float64)
    rows = src[:, x0] * a0[None, :, None] + src[:, x1] * a1[None, :, None]
    return _saturate_round(b0[:, None, None] * rows[y0] + b1[:, None, None] * rows[y1],
                           image.dtype)


def _area_fast_uint8(image, fy, fx):
    """OpenCV's integer-factor area downscale of uint8: block sums rounded half up."""
    h, w, c = image.shape
    out_h, out_w = h // fy, w // fx
    blocks = image[:out_h * fy, :out_w * fx].astype(_onp.int64)
    sums = blocks.reshape(out_h, fy, out_w, fx, c).sum(axis=(1, 3))
    area = fy * fx
    return ((sums + area // 2) // area).astype(_onp.uint8)


def resize(image, out_h, out_w, method=1):
    """``image`` (H, W, C) resized to (out_h, out_w, C) with OpenCV's ``interpolation``
    code ``method`` (0-4), keeping its dtype."""
    if method not in INTERPOLATIONS:
        raise ValueError(_UNKNOWN % (method,))
    in_h, in_w = image.shape[:2]
    if out_h <= 0 or out_w <= 0:
        raise ValueError("cannot resize to %dx%d: the size must be positive" % (out_w, out_h))
    if in_h == 0 or in_w == 0:
        raise ValueError("cannot resize an empty image of shape %s" % (image.shape,))
    if (in_h, in_w) == (out_h, out_w):
        return image.copy()
    if method == BILINEAR and (in_h, in_w) == (2 * out_h, 2 * out_w):
        method = AREA               # OpenCV's INTER_LINEAR takes the area path at exactly 1/2
    if method == BILINEAR or (method == AREA and (out_h > in_h or out_w > in_w)):
        # INTER_AREA upscaling in either direction is OpenCV's two-tap path for both axes
        two_tap = _two_tap_uint8 if image.dtype == _onp.uint8 else _two_tap_float
        return two_tap(image, out_h, out_w, method == AREA)
    if method == AREA and image.dtype == _onp.uint8 and in_h % out_h == 0 \
            and in_w % out_w == 0:
        return _area_fast_uint8(image, in_h // out_h, in_w // out_w)
    wy = _taps_matrix(out_h, in_h, method)
    wx = _taps_matrix(out_w, in_w, method)
    out = _onp.einsum("oh,hwc->owc", wy, image.astype(_onp.float64))
    out = _onp.einsum("pw,owc->opc", wx, out)
    return _saturate_round(out, image.dtype)


# ---------------------------------------------------------------- checks and tensor ops
# ``where`` names the function or transform the user called, for the error messages.

def check_image(image, where, ndims=(3, 4), layout="HWC"):
    """Raise unless ``image`` has one of the ranks ``ndims`` (3: an image in ``layout``, 4: a
    batch of them)."""
    if image.ndim not in ndims:
        shapes = {3: "(%s)" % ", ".join(layout), 4: "(N, %s)" % ", ".join(layout)}
        raise MXNetValueError("%s expects an image of shape %s, got shape %s"
                              % (where, " or ".join(shapes[n] for n in ndims), image.shape))


def size_pair(size, where):
    """``size`` (an int or ``(width, height)``) as a ``(width, height)`` tuple of ints."""
    if isinstance(size, numbers.Integral):
        size = (int(size), int(size))
    elif isinstance(size, (tuple, list)) and len(size) == 1:
        size = (int(size[0]), int(size[0]))
    elif isinstance(size, (tuple, list)) and len(size) == 2:
        size = (int(size[0]), int(size[1]))
    else:
        raise MXNetValueError("%s: size must be an int or a (width, height) pair, got %r"
                              % (where, size))
    if size[0] <= 0 or size[1] <= 0:
        raise MXNetValueError("%s: size must be positive, got %r" % (where, size))
    return size


def resize_images(image, width, height, interpolation, where):
    """(H, W, C) or (N, H, W, C) ``image`` resized to ``height`` x ``width`` (OpenCV's
    ``interpolation`` code; None is bilinear)."""
    if interpolation is None:
        interpolation = BILINEAR
    if interpolation not in INTERPOLATIONS:
        raise MXNetValueError("%s: %s" % (where, _UNKNOWN % (interpolation,)))
    check_image(image, where)
    if image.ndim == 3:
        return resize(image, height, width, interpolation)
    return _onp.stack([resize(one, height, width, interpolation) for one in image])


def resized_size(height, width, size, keep_ratio, where):
    """The ``(width, height)`` MXNet's image resize gives an ``height`` x ``width`` image:
    ``size`` is ``(width, height)``, or an int that becomes both sides, or with
    ``keep_ratio`` the shorter side (the other scaled and rounded down)."""
    if isinstance(size, (tuple, list)) and len(size) == 1:
        size = size[0]
    if isinstance(size, numbers.Integral) and keep_ratio:
        if size <= 0:
            raise MXNetValueError("%s: size must be positive, got %r" % (where, size))
        if height > width:
            return int(size), int(height * size / width)
        return int(width * size / height), int(size)
    return size_pair(size, where)


def to_tensor(image, where):
    """(H, W, C) or (N, H, W, C) values in [0, 255] -> float32 (C, H, W) or (N, C, H, W)
    divided by 255."""
    check_image(image, where)
    return _onp.moveaxis(image, -1, -3).astype(_onp.float32) / _onp.float32(255)


def normalize(image, mean, std, where):
    """``(x[c] - mean[c]) / std[c]`` over the channels of a (C, H, W) or (N, C, H, W)
    tensor; ``mean``/``std`` are one number or one per channel."""
    check_image(image, where, layout="CHW")
    channels = image.shape[-3]
    mean = _onp.atleast_1d(_onp.asarray(mean, _onp.float32))
    std = _onp.atleast_1d(_onp.asarray(std, _onp.float32))
    for name, value in (("mean", mean), ("std", std)):
        if value.ndim != 1 or value.size not in (1, channels):
            raise MXNetValueError("%s: %s has %d values but the input has %d channels "
                                  "(shape %s); give 1 or %d"
                                  % (where, name, value.size, channels, image.shape, channels))
    if _onp.any(std == 0):
        raise MXNetValueError("%s: std must not be 0, got %s" % (where, std.tolist()))
    out = (image.astype(_onp.float32) - mean[:, None, None]) / std[:, None, None]
    return out.astype(image.dtype if image.dtype.kind == "f" else _onp.float32)


def crop(image, x, y, width, height, where):
    """The ``width`` x ``height`` box at ``(x, y)`` of (H, W, C) or (N, H, W, C) images."""
    check_image(image, where)
    img_h, img_w = image.shape[-3:-1]
    if x < 0 or y < 0 or width <= 0 or height <= 0 or x + width > img_w \
            or y + height > img_h:
        raise MXNetValueError("%s: the box x=%d, y=%d, width=%d, height=%d is not inside the "
                              "%dx%d image" % (where, x, y, width, height, img_w, img_h))
    return image[..., y:y + height, x:x + width, :]


# ---------------------------------------------------------------- crops, rotation, colour

# MXNet's RGB -> grey weights in its colour operators (src/operator/image/image_random-inl.h)
_GREY = _onp.array([0.299, 0.587, 0.114], _onp.float32)
# AlexNet's PCA of ImageNet's RGB: eigenvalue * eigenvector, per row the R, G, B component
_LIGHTING_EIGEN = _onp.array([[55.46 * -0.5675, 4.794 * 0.7192, 1.148 * 0.4009],
                              [55.46 * -0.5808, 4.794 * -0.0045, 1.148 * -0.8140],
                              [55.46 * -0.5836, 4.794 * -0.6948, 1.148 * 0.4203]], _onp.float32)


def saturate_truncate(values, dtype):
    """``values`` as ``dtype`` the way MXNet's colour operators store them: clipped to the
    range of an integer type and truncated toward zero (their ``saturate_cast``, unlike
    OpenCV's, does not round), cast for float types."""
    dtype = _onp.dtype(dtype)
    if dtype.kind in "iu":
        info = _onp.iinfo(dtype)
        return _onp.trunc(_onp.clip(values, info.min, info.max)).astype(dtype)
    return _onp.asarray(values).astype(dtype)


def scale_down(src_size, size):
    """MXNet's ``image.scale_down``: shrink the crop size ``(w, h)`` to fit ``src_size``,
    keeping its aspect ratio."""
    w, h = size
    sw, sh = src_size
    if sh < h:
        w, h = float(w * sh) / h, sh
    if sw < w:
        w, h = sw, float(h * sw) / w
    return int(w), int(h)


def interp_method(interp, sizes=()):
    """MXNet's ``_get_interp_method``: 0-4 as given; 9 chooses by the sizes ``(old_h, old_w,
    new_h, new_w)``: bicubic to grow, area to shrink, else bilinear (bicubic without sizes);
    10 picks one of 0-4 at random (Python's ``random``)."""
    if interp == 9:
        if sizes:
            old_h, old_w, new_h, new_w = sizes
            if new_h > old_h and new_w > old_w:
                return BICUBIC
            if new_h < old_h and new_w < old_w:
                return AREA
            return BILINEAR
        return BICUBIC
    if interp == 10:
        return random.randint(0, 4)
    if interp not in INTERPOLATIONS:
        raise MXNetValueError("Unknown interp method %r" % (interp,))
    return interp


def fixed_crop(image, x0, y0, w, h, size=None, interpolation=2):
    """The ``w`` x ``h`` box at ``(x0, y0)`` of an (H, W, C) image, resized to ``size``
    ``(width, height)`` when given and different (MXNet's ``image.fixed_crop``)."""
    out = image[y0:y0 + h, x0:x0 + w]
    if size is not None and (w, h) != tuple(size):
        method = interp_method(interpolation, (h, w, size[1], size[0]))
        out = resize(out, size[1], size[0], method)
    return out


def center_crop(image, size, interpolation=2):
    """MXNet's ``image.center_crop``: the centred box of ``size`` (shrunk to fit, keeping
    its aspect ratio) resized to ``size``; returns the image and the box
    ``(x0, y0, w, h)``."""
    h, w = image.shape[:2]
    new_w, new_h = scale_down((w, h), size)
    x0, y0 = int((w - new_w) / 2), int((h - new_h) / 2)
    return (fixed_crop(image, x0, y0, new_w, new_h, size, interpolation),
            (x0, y0, new_w, new_h))


def random_crop(image, size, interpolation=2):
    """MXNet's ``image.random_crop``: a box of ``size`` (shrunk to fit) at a random place
    (Python's ``random``), resized to ``size``; returns the image and the box."""
    h, w = image.shape[:2]
    new_w, new_h = scale_down((w, h), size)
    x0 = random.randint(0, w - new_w)
    y0 = random.randint(0, h - new_h)
    return (fixed_crop(image, x0, y0, new_w, new_h, size, interpolation),
            (x0, y0, new_w, new_h))


def random_size_crop(image, size, area, ratio, interpolation=2):
    """MXNet's ``image.random_size_crop``: a box covering a random fraction ``area`` of the
    image with a log-uniform aspect ratio in ``ratio`` (10 tries, then a centre crop),
    resized to ``size``; Python's ``random``. Returns the image and the box."""
    h, w = image.shape[:2]
    if isinstance(area, numbers.Number):
        area = (area, 1.0)
    for _ in range(10):
        target_area = random.uniform(area[0], area[1]) * h * w
        log_ratio = (_onp.log(ratio[0]), _onp.log(ratio[1]))
        new_ratio = _onp.exp(random.uniform(*log_ratio))
        new_w = int(round(_onp.sqrt(target_area * new_ratio)))
        new_h = int(round(_onp.sqrt(target_area / new_ratio)))
        if new_w <= w and new_h <= h:
            x0 = random.randint(0, w - new_w)
            y0 = random.randint(0, h - new_h)
            return (fixed_crop(image, x0, y0, new_w, new_h, size, interpolation),
                    (x0, y0, new_w, new_h))
    return center_crop(image, size, interpolation)


def bilinear_sample(images, grid_x, grid_y):
    """MXNet's ``BilinearSampler``: (N, C, H, W) float ``images`` read at the normalised
    coordinates ``grid_x``, ``grid_y`` (N, H, W) in [-1, 1]; neighbours outside the image
    count as 0."""
    n, _, h, w = images.shape
    x = (grid_x + 1) * (w - 1) / 2
    y = (grid_y + 1) * (h - 1) / 2
    x0 = _onp.floor(x).astype(_onp.int64)
    y0 = _onp.floor(y).astype(_onp.int64)
    wx0 = 1 - (x - x0)
    wy0 = 1 - (y - y0)
    batch = _onp.arange(n)[:, None, None]
    out = _onp.zeros(images.shape, _onp.float64)
    for dy, wy in ((0, wy0), (1, 1 - wy0)):
        for dx, wx in ((0, wx0), (1, 1 - wx0)):
            yy, xx = y0 + dy, x0 + dx
            inside = (xx >= 0) & (xx <= w - 1) & (yy >= 0) & (yy <= h - 1)
            values = images[batch, :, _onp.clip(yy, 0, h - 1), _onp.clip(xx, 0, w - 1)]
            # values: (N, H, W, C) -> weight, mask, and move channels back
            weight = (wy * wx * inside)[..., None]
            out += _onp.moveaxis(values * weight, -1, 1)
    return out.astype(images.dtype)


def rotate(image, degrees, zoom_in=False, zoom_out=False):
    """MXNet's ``image.imrotate``: (C, H, W) or (N, C, H, W) float32 images rotated about
    their centres by ``degrees`` (one angle, or one per image), sampled bilinearly with zero
    outside; ``zoom_in`` scales so no padding shows, ``zoom_out`` so all of the image does."""
    if zoom_in and zoom_out:
        raise MXNetValueError("`zoom_in` and `zoom_out` cannot be both True")
    single = image.ndim == 3
    batch = image[None] if single else image
    if batch.ndim != 4:
        raise MXNetValueError("Only 3D and 4D are supported by this function")
    angles = _onp.broadcast_to(_onp.asarray(degrees, _onp.float32), (batch.shape[0],))
    radians = (_onp.pi * angles / 180).astype(_onp.float32)[:, None, None]
    _, _, h, w = batch.shape
    hscale, wscale = float(h - 1) / 2, float(w - 1) / 2
    rows = (_onp.arange(h, dtype=_onp.float32)[:, None] - hscale) * _onp.ones((1, w), _onp.float32)
    cols = (_onp.arange(w, dtype=_onp.float32)[None, :] - wscale) * _onp.ones((h, 1), _onp.float32)
    cos, sin = _onp.cos(radians), _onp.sin(radians)
    grid_x = (cols * cos - rows * sin) / wscale
    grid_y = (cols * sin + rows * cos) / hscale
    if zoom_in or zoom_out:
        rho = _onp.sqrt(_onp.float32(h * h + w * w))
        corner = _onp.arctan(_onp.float32(h) / _onp.float32(w))
        turn = _onp.abs(radians)
        max_x = _onp.maximum(_onp.abs(rho * _onp.cos(corner + turn)),
                             _onp.abs(rho * _onp.cos(corner - turn)))
        max_y = _onp.maximum(_onp.abs(rho * _onp.sin(corner + turn)),
                             _onp.abs(rho * _onp.sin(corner - turn)))
        if zoom_out:
            scale = _onp.maximum(max_x / w, max_y / h)
        else:
            scale = _onp.minimum(w / max_x, h / max_y)
        grid_x, grid_y = grid_x * scale, grid_y * scale
    out = bilinear_sample(batch, grid_x, grid_y)
    return out[0] if single else out


def adjust_brightness(image, alpha):
    return saturate_truncate(image.astype(_onp.float32) * _onp.float32(alpha), image.dtype)


def grey_values(image):
    """Per-pixel grey value (MXNet's weights), float32, shape (..., H, W)."""
    if image.shape[-1] == 1:
        return image[..., 0].astype(_onp.float32)
    return image[..., :3].astype(_onp.float32) @ _GREY


def adjust_contrast(image, alpha):
    mean = grey_values(image).mean(axis=(-2, -1), keepdims=True)[..., None]
    beta = (1 - _onp.float32(alpha)) * mean
    return saturate_truncate(image.astype(_onp.float32) * _onp.float32(alpha) + beta, image.dtype)


def adjust_saturation(image, alpha):
    if image.shape[-1] == 1:
        return image.copy()
    grey = grey_values(image)[..., None] * (1 - _onp.float32(alpha))
    return saturate_truncate(grey + image.astype(_onp.float32) * _onp.float32(alpha), image.dtype)


def rgb_to_hls(rgb):
    r, g, b = (rgb[..., i] / _onp.float32(255) for i in range(3))
    vmax = _onp.maximum(_onp.maximum(r, g), b)
    vmin = _onp.minimum(_onp.minimum(r, g), b)
    diff = vmax - vmin
    light = (vmax + vmin) * _onp.float32(0.5)
    chromatic = diff > _onp.finfo(_onp.float32).eps
    safe = _onp.where(chromatic, diff, 1)
    sat = _onp.where(light < 0.5, diff / _onp.where(chromatic, vmax + vmin, 1),
                     diff / _onp.where(chromatic, 2 - vmax - vmin, 1))
    scale = 60 / safe
    hue = _onp.where(vmax == r, (g - b) * scale,
                     _onp.where(vmax == g, (b - r) * scale + 120, (r - g) * scale + 240))
    hue = _onp.where(hue < 0, hue + 360, hue)
    return (_onp.where(chromatic, hue, 0).astype(_onp.float32), light,
            _onp.where(chromatic, sat, 0).astype(_onp.float32))


def hls_to_rgb(hue, light, sat):
    p2 = _onp.where(light <= 0.5, light * (1 + sat), light + sat - light * sat)
    p1 = 2 * light - p2
    # float32 steps in MXNet's order (multiply by 1/60, then wrap into [0, 6) by steps of 6)
    h = (hue * _onp.float32(1.0 / 60.0)).astype(_onp.float32)
    while (h < 0).any():
        h = _onp.where(h < 0, h + _onp.float32(6), h)
    while (h >= 6).any():
        h = _onp.where(h >= 6, h - _onp.float32(6), h)
    sector = h.astype(_onp.int64)
    h = h - sector.astype(_onp.float32)
    table = _onp.stack([p2, p1, p1 + (p2 - p1) * (1 - h), p1 + (p2 - p1) * h], axis=-1)
    # for each sector, which table entry is b, g, r (MXNet's c_HlsSectorData)
    sectors = _onp.array([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])
    picks = sectors[sector]
    b, g, r = (_onp.take_along_axis(table, picks[..., i:i + 1], axis=-1)[..., 0]
               for i in range(3))
    grey = sat == 0
    out = _onp.stack([_onp.where(grey, light, r), _onp.where(grey, light, g),
                      _onp.where(grey, light, b)], axis=-1)
    return out * _onp.float32(255)


def adjust_hue(image, alpha):
    if image.shape[-1] == 1:
        return image.copy()
    hue, light, sat = rgb_to_hls(image[..., :3].astype(_onp.float32))
    rgb = hls_to_rgb(hue + _onp.float32(alpha) * 360, light, sat)
    out = image.copy()
    out[..., :3] = saturate_truncate(rgb, image.dtype)
    return out


def adjust_lighting(image, alphas):
    if image.shape[-1] == 1:
        return image.copy()
    shift = _LIGHTING_EIGEN @ _onp.asarray(alphas, _onp.float32)
    out = image.copy()
    out[..., :3] = saturate_truncate(image[..., :3].astype(_onp.float32) + shift, image.dtype)
    return out


def color_jitter(image, brightness, contrast, saturation, hue):
    """MXNet's ``random_color_jitter``: the four adjustments in a random order, each with a
    factor ``1 + uniform(-amount, amount)`` (hue: ``uniform(-hue, hue)`` turns), skipped
    when its amount is 0 (NumPy's global generator)."""
    steps = [(brightness, adjust_brightness, 1.0), (contrast, adjust_contrast, 1.0),
             (saturation, adjust_saturation, 1.0), (hue, adjust_hue, 0.0)]
    out = image
    for index in _onp.random.permutation(4):
        amount, adjust, base = steps[index]
        if amount > 0:
            out = adjust(out, base + _onp.random.uniform(-amount, amount))
    return out if out is not image else image.copy()
