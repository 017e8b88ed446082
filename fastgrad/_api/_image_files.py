"""Reading image files into HWC uint8 arrays, without a hard dependency on an image library.

PNG files are decoded here (NumPy and zlib); other formats (JPEG, ...) use Pillow or OpenCV
when one of them is installed, and raise an ImportError naming the file otherwise.
"""

import io
import struct
import zlib

import numpy as _onp

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
# PNG colour type -> samples per pixel
_PNG_CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def read_image(path, flag=1):
    """The image in ``path`` as an ``(H, W, 3)`` RGB array (``flag=1``) or an ``(H, W, 1)``
    grey array (``flag=0``), uint8, as MXNet's ``image.imread``."""
    with open(path, "rb") as stream:
        blob = stream.read()
    return decode_image(blob, flag, path)


def decode_image(blob, flag=1, name="the image"):
    """:func:`read_image` for the bytes of an image file; ``name`` is used in messages."""
    if blob[:8] == PNG_SIGNATURE:
        pixels = _read_png(blob, name)
    else:
        pixels = _read_with_library(blob, name)
    return _to_channels(pixels, flag, name)


def _to_channels(pixels, flag, path):
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    channels = pixels.shape[2]
    if channels in (2, 4):                     # drop alpha, as OpenCV's IMREAD_COLOR does
        pixels = pixels[:, :, :channels - 1]
        channels -= 1
    if flag == 0:
        if channels == 1:
            return _onp.ascontiguousarray(pixels)
        # Note [Grey conversion]: MXNet's imread(flag=0) of a colour PNG is libpng's
        # rgb_to_gray with weights 0.299, 0.587 in 1/32768 units, truncated (9797, 19234 and
        # 32768 - 9797 - 19234 for blue) and the sum shifted down without rounding; this
        # gives the same bytes (checked against MXNet 1.9.1).
        rgb = pixels[:, :, :3].astype(_onp.int64)
        grey = (rgb[:, :, 0] * 9797 + rgb[:, :, 1] * 19234 + rgb[:, :, 2] * 3737) >> 15
        return grey.astype(_onp.uint8)[:, :, None]
    if flag != 1:
        raise ValueError("reading %r: flag must be 0 (grey) or 1 (colour), got %r"
                         % (path, flag))
    if channels == 1:
        pixels = _onp.repeat(pixels, 3, axis=2)
    return _onp.ascontiguousarray(pixels)


def _read_with_library(blob, path):
    try:
        from PIL import Image                   # optional dependency
    except ImportError:
        Image = None
    if Image is not None:
        with Image.open(io.BytesIO(blob)) as img:
            return _onp.asarray(img.convert("RGBA" if img.mode in ("RGBA", "LA", "P")
                                            else "RGB"))
    try:
        import cv2                              # optional dependency
    except ImportError:
        raise ImportError("cannot read %r: fastgrad decodes PNG files itself; other image "
                          "formats need Pillow (pip install Pillow) or OpenCV" % (path,))
    pixels = cv2.imdecode(_onp.frombuffer(blob, _onp.uint8), cv2.IMREAD_COLOR)
    if pixels is None:
        raise ValueError("cannot read %r: OpenCV could not decode it" % (path,))
    return pixels[:, :, ::-1]


def _read_png(blob, path):
    pos = len(PNG_SIGNATURE)
    header = None
    palette = None
    compressed = []
    while pos + 8 <= len(blob):
        length, kind = struct.unpack(">I4s", blob[pos:pos + 8])
        body = blob[pos + 8:pos + 8 + length]
        if len(body) != length:
            raise ValueError("cannot read PNG %r: the file is truncated" % (path,))
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"PLTE":
            palette = _onp.frombuffer(body, _onp.uint8).reshape(-1, 3)
        elif kind == b"IDAT":
            compressed.append(body)
        elif kind == b"IEND":
            break
    if header is None or not compressed:
        raise ValueError("cannot read PNG %r: no IHDR or IDAT chunk" % (path,))
    width, height, depth, colour, _, _, interlace = header
    if colour not in _PNG_CHANNELS or depth not in (8, 16) or interlace:
        raise ValueError("cannot read PNG %r: only 8- and 16-bit, non-interlaced PNG files are "
                         "supported without Pillow (bit depth %d, colour type %d, interlace "
                         "%d)" % (path, depth, colour, interlace))
    channels = _PNG_CHANNELS[colour]
    pixel_bytes = channels * depth // 8
    stride = width * pixel_bytes
    try:
        raw = _onp.frombuffer(zlib.decompress(b"".join(compressed)), _onp.uint8)
    except zlib.error as error:
        raise ValueError("cannot read PNG %r: corrupt image data (%s)" % (path, error))
    if raw.size != height * (stride + 1):
        raise ValueError("cannot read PNG %r: %d bytes of image data, expected %d"
                         % (path, raw.size, height * (stride + 1)))
    rows = raw.reshape(height, stride + 1)
    out = _onp.zeros((height, stride), _onp.uint8)
    prior = _onp.zeros(stride, _onp.int64)
    for y in range(height):
        out[y] = prior = _unfilter(int(rows[y, 0]), rows[y, 1:].astype(_onp.int64), prior,
                                   pixel_bytes, path)
    if depth == 16:
        pixels = out.reshape(height, width, channels, 2)[..., 0]    # the high byte
    else:
        pixels = out.reshape(height, width, channels)
    if colour == 3:
        if palette is None:
            raise ValueError("cannot read PNG %r: a palette image without PLTE" % (path,))
        pixels = palette[pixels[:, :, 0]]
    return pixels


def _unfilter(kind, line, prior, bpp, path):
    """One PNG scanline with its filter undone (PNG spec, section 9)."""
    if kind == 0:
        return line
    if kind == 2:
        return (line + prior) & 255
    if kind == 1:
        grouped = line.reshape(-1, bpp)
        return (_onp.cumsum(grouped, axis=0) & 255).reshape(-1)
    if kind not in (3, 4):
        raise ValueError("cannot read PNG %r: unknown filter type %d" % (path, kind))
    out = line.copy()
    left = _onp.zeros(bpp, _onp.int64)
    upper_left = _onp.zeros(bpp, _onp.int64)
    for start in range(0, line.size, bpp):
        up = prior[start:start + bpp]
        if kind == 3:
            predicted = (left + up) >> 1
        else:
            estimate = left + up - upper_left
            dist_left = _onp.abs(estimate - left)
            dist_up = _onp.abs(estimate - up)
            dist_ul = _onp.abs(estimate - upper_left)
            predicted = _onp.where((dist_left <= dist_up) & (dist_left <= dist_ul), left,
                                   _onp.where(dist_up <= dist_ul, up, upper_left))
        left = out[start:start + bpp] = (line[start:start + bpp] + predicted) & 255
        upper_left = up
    return out


def encode_png(pixels):
    """The bytes of a PNG file of an ``(H, W)``, ``(H, W, 1)``, ``(H, W, 3)`` or
    ``(H, W, 4)`` uint8 array (filter type 0 on every row)."""
    pixels = _onp.asarray(pixels, _onp.uint8)
    if pixels.ndim == 2:
        pixels = pixels[:, :, None]
    height, width, channels = pixels.shape
    colour = {1: 0, 2: 4, 3: 2, 4: 6}[channels]
    rows = _onp.concatenate([_onp.zeros((height, 1), _onp.uint8),
                             pixels.reshape(height, width * channels)], axis=1)

    def chunk(kind, body):
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    return (PNG_SIGNATURE
            + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, colour, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(rows.tobytes()))
            + chunk(b"IEND", b""))


def write_png(path, pixels):
    """Write :func:`encode_png` of ``pixels`` to ``path``; used by tests and examples."""
    with open(path, "wb") as stream:
        stream.write(encode_png(pixels))
