"""MXNet's RecordIO files (``mx.recordio``): ``.rec`` files of length-prefixed records, with
an optional ``.idx`` text index (``key<TAB>offset`` per line) for random access.

The format is dmlc-core's: each record part is the little-endian magic ``0xced7230a``, a
``uint32`` holding ``cflag << 29 | length``, the bytes, and zero padding to 4 bytes; a record
whose bytes contain the magic (at a 4-byte boundary) is split there into parts flagged 1
(first), 2 (middle) and 3 (last), the magic itself dropped and restored on reading. Image
records are ``pack(IRHeader(flag, label, id, id2), encoded_image)``.

>>> import os, tempfile
>>> import fastgrad as mx
>>> folder = tempfile.mkdtemp()
>>> rec, idx = os.path.join(folder, 'data.rec'), os.path.join(folder, 'data.idx')
>>> writer = mx.recordio.MXIndexedRecordIO(idx, rec, 'w')
>>> for i in range(3):
...     writer.write_idx(i, mx.recordio.pack(mx.recordio.IRHeader(0, float(i), i, 0),
...                                          b'payload %d' % i))
>>> writer.close()
>>> reader = mx.recordio.MXIndexedRecordIO(idx, rec, 'r')
>>> header, payload = mx.recordio.unpack(reader.read_idx(2))
>>> header.label, payload
(2.0, b'payload 2')
"""

import numbers
import os
import struct
from collections import namedtuple

import numpy as _onp

from fastgrad._api import _image_files

__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "pack", "unpack", "unpack_img",
           "pack_img"]

_MAGIC = 0xced7230a
_MAGIC_BYTES = struct.pack("<I", _MAGIC)
_IR_FORMAT = "IfQQ"
_IR_SIZE = struct.calcsize(_IR_FORMAT)


def _encode_lrec(cflag, length):
    return struct.pack("<I", (cflag << 29) | length)


class MXRecordIO:
    """Sequential reading (``flag='r'``) or writing (``'w'``) of a RecordIO file.

    A reader reopens its file when used in another process than the one that opened it (a
    forked DataLoader worker), as MXNet's does, so processes do not share a file offset.
    """

    def __init__(self, uri, flag):
        self.uri = str(uri)
        self.flag = flag
        self.handle = None
        self.is_open = False
        self.open()

    def open(self):
        """Open the file (``'w'`` truncates it)."""
        if self.flag == "w":
            self.writable = True
            self.handle = open(self.uri, "wb")
        elif self.flag == "r":
            self.writable = False
            self.handle = open(self.uri, "rb")
        else:
            raise ValueError("MXRecordIO: invalid flag %r (use 'r' or 'w')" % (self.flag,))
        self.pid = os.getpid()
        self.is_open = True

    def __del__(self):
        self.close()

    def __getstate__(self):
        state = self.__dict__.copy()
        state["handle"] = None
        state["is_open"] = False
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)
        self.open()

    def close(self):
        """Close the file."""
        if getattr(self, "is_open", False):
            self.handle.close()
            self.is_open = False
            self.pid = None

    def reset(self):
        """Go back to the start (reopen the file)."""
        self.close()
        self.open()

    def _check_pid(self, allow_reset=False):
        if self.pid != os.getpid():
            if not allow_reset:
                raise RuntimeError("MXRecordIO %s: forbidden operation in a forked process"
                                   % self.uri)
            self.reset()

    def write(self, buf):
        """Append the record ``buf`` (bytes)."""
        if not self.writable:
            raise RuntimeError("MXRecordIO %s: opened for reading" % self.uri)
        self._check_pid(allow_reset=False)
        buf = bytes(buf)
        length = len(buf)
        start = 0
        for i in range(0, (length >> 2) << 2, 4):
            if buf[i:i + 4] == _MAGIC_BYTES:
                self.handle.write(_MAGIC_BYTES + _encode_lrec(1 if start == 0 else 2,
                                                              i - start) + buf[start:i])
                start = i + 4
        self.handle.write(_MAGIC_BYTES + _encode_lrec(3 if start else 0, length - start)
                          + buf[start:])
        self.handle.write(b"\0" * (-length % 4))

    def read(self):
        """The next record (bytes), or None at the end of the file."""
        if self.writable:
            raise RuntimeError("MXRecordIO %s: opened for writing" % self.uri)
        self._check_pid(allow_reset=True)
        parts = []
        while True:
            head = self.handle.read(8)
            if not head and not parts:
                return None
            if len(head) < 8:
                raise ValueError("MXRecordIO %s: truncated record header at offset %d"
                                 % (self.uri, self.handle.tell() - len(head)))
            magic, lrec = struct.unpack("<II", head)
            if magic != _MAGIC:
                raise ValueError("MXRecordIO %s: invalid RecordIO magic number at offset %d "
                                 "(not a RecordIO file, or a wrong offset)"
                                 % (self.uri, self.handle.tell() - 8))
            cflag, length = lrec >> 29, lrec & ((1 << 29) - 1)
            data = self.handle.read((length + 3) & ~3)
            if len(data) < length:
                raise ValueError("MXRecordIO %s: truncated record (%d of %d bytes)"
                                 % (self.uri, len(data), length))
            parts.append(data[:length])
            if cflag in (0, 3):
                return _MAGIC_BYTES.join(parts)

    def tell(self):
        """The offset where the next record will be written."""
        return self.handle.tell()


class MXIndexedRecordIO(MXRecordIO):
    """A RecordIO file with its ``.idx`` index: ``write_idx(key, buf)`` records the offset of
    each record, ``read_idx(key)`` reads it back; ``keys`` lists the keys in file order."""

    def __init__(self, idx_path, uri, flag, key_type=int):
        self.idx_path = str(idx_path)
        self.idx = {}
        self.keys = []
        self.key_type = key_type
        self.fidx = None
        super().__init__(uri, flag)

    def open(self):
        super().open()
        self.idx = {}
        self.keys = []
        self.fidx = open(self.idx_path, self.flag)
        if not self.writable:
            for number, line in enumerate(self.fidx, 1):
                fields = line.strip().split("\t")
                if fields == [""]:
                    continue
                if len(fields) < 2:
                    raise ValueError("MXIndexedRecordIO: line %d of %s is not 'key<TAB>offset'"
                                     % (number, self.idx_path))
                key = self.key_type(fields[0])
                self.idx[key] = int(fields[1])
                self.keys.append(key)

    def close(self):
        if not getattr(self, "is_open", False):
            return
        super().close()
        self.fidx.close()

    def __getstate__(self):
        state = super().__getstate__()
        state["fidx"] = None
        return state

    def seek(self, idx):
        """Move the reader to the record of key ``idx``."""
        if self.writable:
            raise RuntimeError("MXIndexedRecordIO %s: opened for writing" % self.uri)
        self._check_pid(allow_reset=True)
        if idx not in self.idx:
            raise KeyError("MXIndexedRecordIO %s: no record with key %r" % (self.uri, idx))
        self.handle.seek(self.idx[idx])

    def read_idx(self, idx):
        """The record of key ``idx``."""
        self.seek(idx)
        return self.read()

    def write_idx(self, idx, buf):
        """Append the record ``buf`` under key ``idx``."""
        key = self.key_type(idx)
        position = self.tell()
        self.write(buf)
        self.fidx.write("%s\t%d\n" % (str(key), position))
        self.idx[key] = position
        self.keys.append(key)


IRHeader = namedtuple("HEADER", ["flag", "label", "id", "id2"])
"""The header of an image record: ``flag`` (the number of labels when ``label`` is an array),
``label`` (a number or an array of float32), ``id`` and ``id2``."""


def pack(header, s):
    """``header`` (an :data:`IRHeader`) and the bytes ``s`` as one record."""
    header = IRHeader(*header)
    if isinstance(header.label, numbers.Number):
        header = header._replace(flag=0)
    else:
        label = _onp.asarray(header.label, dtype=_onp.float32)
        header = header._replace(flag=label.size, label=0)
        s = label.tobytes() + bytes(s)
    return struct.pack(_IR_FORMAT, *header) + bytes(s)


def unpack(s):
    """A record as ``(IRHeader, bytes)``; an array label is a float32 array."""
    header = IRHeader(*struct.unpack(_IR_FORMAT, s[:_IR_SIZE]))
    s = s[_IR_SIZE:]
    if header.flag > 0:
        header = header._replace(label=_onp.frombuffer(s, _onp.float32, header.flag))
        s = s[header.flag * 4:]
    return header, s


def unpack_img(s, iscolor=-1):
    """An image record as ``(IRHeader, image)``: a NumPy array in OpenCV's BGR order, as
    MXNet's (``iscolor``: 1 colour, 0 grey, -1 as stored). PNG is decoded by fastgrad, other
    formats need Pillow or OpenCV."""
    header, s = unpack(s)
    rgb = _image_files.decode_image(bytes(s), 0 if iscolor == 0 else 1, "the record's image")
    if iscolor == 0:
        return header, rgb[:, :, 0]
    return header, _onp.ascontiguousarray(rgb[:, :, ::-1])


def pack_img(header, img, quality=95, img_fmt=".png"):
    """An image (a NumPy array in BGR order, as MXNet's) encoded and packed with ``header``.
    fastgrad encodes PNG only (MXNet's default ``'.jpg'`` needs an encoder it lacks)."""
    if img_fmt.lower() != ".png":
        raise NotImplementedError("recordio.pack_img: fastgrad encodes PNG only (img_fmt="
                                  "'.png'), not %r" % (img_fmt,))
    img = _onp.asarray(img)
    rgb = img[:, :, ::-1] if img.ndim == 3 and img.shape[2] == 3 else img
    return pack(header, _image_files.encode_png(rgb))
