"""MXNet 1.x's data iterators (``mx.io``): ``NDArrayIter`` over arrays in memory,
``CSVIter`` and ``MNISTIter`` over local files, ``ResizeIter`` and ``PrefetchingIter`` around
other iterators, and ``DataBatch``/``DataDesc``, what :class:`fastgrad.module.Module` reads.

Examples
--------
>>> import fastgrad as mx
>>> import numpy as np
>>> it = mx.io.NDArrayIter(np.ones((6, 3)), np.arange(6), batch_size=4)
>>> it.provide_data
[DataDesc[data,(4, 3),<class 'numpy.float32'>,NCHW]]
>>> [b.pad for b in it]
[0, 2]
"""

from fastgrad.io.io import DataDesc, DataBatch, DataIter, ResizeIter, PrefetchingIter, NDArrayIter
from fastgrad.io._files import (CSVIter, MNISTIter, ImageRecordIter, ImageRecordUInt8Iter,
                                ImageRecordInt8Iter, ImageDetRecordIter, ImageRecordIter_v1,
                                ImageRecordUInt8Iter_v1, LibSVMIter)
from fastgrad.io import io  # noqa: F401  (mx.io.io.DataDesc, as MXNet's module path)

__all__ = ["DataDesc", "DataBatch", "DataIter", "ResizeIter", "PrefetchingIter", "NDArrayIter",
           "CSVIter", "MNISTIter", "ImageRecordIter", "ImageRecordUInt8Iter",
           "ImageRecordInt8Iter", "ImageDetRecordIter", "ImageRecordIter_v1",
           "ImageRecordUInt8Iter_v1", "LibSVMIter"]
