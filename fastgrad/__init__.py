"""fastgrad: reverse-mode automatic differentiation of NumPy code, with MXNet's autograd API.

``import fastgrad as mx`` runs code written for ``mxnet.autograd``::

    import fastgrad as mx
    x = mx.np.array([[1, 2], [3, 4]])
    x.attach_grad()
    with mx.autograd.record():
        y = 2 * x * x
    y.backward()
    x.grad   # array([[ 4.,  8.], [12., 16.]])
"""

import sys as _sys

from fastgrad._version import __version__
# Modules import only downward (Note [Layers] in _layers.py); what a lower module needs from
# a layer above is connected in one step, the bootstrap's (Note [Bootstrap] in _bootstrap.py).
try:
    from fastgrad import _bootstrap
except ImportError as _missing:  # Note [The source tree shadows the installed package]
    from fastgrad import _source_tree
    _explained = _source_tree.explain(_missing)
    if _explained is None:
        raise
    raise _explained from None
_bootstrap.wire()
from fastgrad._kernels._threads import (set_num_threads, get_num_threads,  # noqa: E402
                                        get_blas_num_threads)
from fastgrad import autograd  # noqa: E402

from fastgrad import numpy as np  # noqa: E402
from fastgrad import numpy_extension as npx  # noqa: E402
from fastgrad import ndarray as nd  # noqa: E402
from fastgrad.context import (Context, Device, cpu, cpu_pinned, gpu, num_gpus,  # noqa: E402
                              current_context)
from fastgrad._ops._registry import list_ops  # noqa: E402
from fastgrad import symbol as sym  # noqa: E402
from fastgrad import executor  # noqa: E402
from fastgrad import visualization as viz  # noqa: E402
from fastgrad import optimizer  # noqa: E402
from fastgrad.optimizer import lr_scheduler  # noqa: E402
from fastgrad import kvstore  # noqa: E402
kv = kvstore
from fastgrad import registry, initializer  # noqa: E402
init = initializer
from fastgrad import metric  # noqa: E402
from fastgrad import gluon  # noqa: E402
from fastgrad import io, model, callback, monitor, module  # noqa: E402
mod = module
mon = monitor
from fastgrad import base, device, random  # noqa: E402,F401  (mx.base.MXNetError, mx.device, ...)
from fastgrad import util  # noqa: E402,F401 -- mx.util
from fastgrad.base import MXNetError  # noqa: E402,F401 -- mx.MXNetError, as MXNet
from fastgrad.util import is_np_shape, set_np_shape, np_shape, use_np_shape  # noqa: E402,F401
from fastgrad.util import is_np_array, np_array, use_np_array, use_np  # noqa: E402,F401
from fastgrad import image  # noqa: E402,F401 -- mx.image
from fastgrad import recordio  # noqa: E402,F401 -- mx.recordio
from fastgrad import test_utils  # noqa: E402,F401 -- mx.test_utils
from fastgrad import functional  # noqa: E402
from fastgrad.symbol import AttrScope  # noqa: E402,F401 -- MXNet's mx.AttrScope
from fastgrad.symbol import name  # noqa: E402,F401 -- MXNet's mx.name.Prefix

# Note [Pickled paths]
# A pickle names the module of every class and function it rebuilds its objects with, and
# arrays and ops name the module of the array type. fastgrad 6b3cdcb and earlier had that
# module at the top of the package, as ``_array`` (``_wrap``, ``ndarray``, ``_ops_lookup``),
# before the modules went into layer folders; it is now ``fastgrad._core._array``. So that
# those pickles still load, the old name stays an alias of the module (new pickles name the
# new one). No other pickled name moved: symbols name ``fastgrad.symbol._json``, NDArrays
# ``fastgrad.ndarray``, optimizers, parameters and blocks their public modules
# (tests/package/test_pickles.py loads a pickle made by 6b3cdcb).
from fastgrad._core import _array as _core_array  # noqa: E402
_sys.modules.setdefault(__name__ + "._array", _core_array)

# ``import fastgrad.np`` and friends work like the attribute access.
_sys.modules[__name__ + ".np"] = np
_sys.modules[__name__ + ".npx"] = npx
_sys.modules[__name__ + ".nd"] = nd
_sys.modules[__name__ + ".sym"] = sym
_sys.modules[__name__ + ".viz"] = viz
_sys.modules[__name__ + ".kv"] = kvstore
_sys.modules[__name__ + ".lr_scheduler"] = lr_scheduler
_sys.modules[__name__ + ".init"] = initializer
_sys.modules[__name__ + ".mod"] = module
_sys.modules[__name__ + ".mon"] = monitor

__all__ = ["autograd", "np", "npx", "nd", "cpu", "gpu", "Context", "Device", "num_gpus",
           "current_context", "list_ops", "sym", "viz", "__version__", "base", "device", "random"]
__all__ += ["functional", "set_num_threads", "get_num_threads", "get_blas_num_threads"]
__all__ += ["optimizer", "lr_scheduler", "kvstore", "kv", "gluon"]
__all__ += ["registry", "initializer", "init", "metric"]
__all__ += ["io", "model", "callback", "monitor", "mon", "module", "mod"]
__all__ += ["image", "test_utils", "recordio"]
