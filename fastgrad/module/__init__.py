"""MXNet 1.x's modules (``mx.mod``, ``mx.module``): :class:`Module` trains a symbol on the
batches of a ``mx.io`` iterator; :class:`BaseModule` holds the loops (``fit``, ``score``,
``predict``); :class:`BucketingModule` runs one Module per bucket key over shared parameters;
:class:`SequentialModule` chains modules. ``PythonModule`` and ``PythonLossModule`` are not
available: constructing one raises ``NotImplementedError``.
"""

from fastgrad.module.base_module import BaseModule
from fastgrad.module.module import Module
from fastgrad.module.bucketing_module import BucketingModule
from fastgrad.module.sequential_module import SequentialModule

__all__ = ["BaseModule", "Module", "BucketingModule", "SequentialModule", "PythonModule",
           "PythonLossModule"]


def _unavailable(name, advice):
    def __init__(self, *args, **kwargs):
        raise NotImplementedError("mx.mod.%s is not available in fastgrad; %s" % (name, advice))
    return type(name, (BaseModule,), {
        "__init__": __init__, "__module__": __name__,
        "__doc__": "Not available in fastgrad: constructing one raises "
                   "``NotImplementedError`` (%s)." % advice})


PythonModule = _unavailable("PythonModule", "write the computation as a symbol and use "
                            "mx.mod.Module")
PythonLossModule = _unavailable("PythonLossModule", "write the loss as a symbol (MakeLoss) and "
                                "use mx.mod.Module")
