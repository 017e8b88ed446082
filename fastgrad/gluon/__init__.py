"""MXNet 1.9.1's Gluon (``fastgrad.gluon``, also ``mx.gluon``), in both of its styles.

1.x blocks define ``hybrid_forward(self, F, x, weight, ...)`` and get prefixed names such as
``dense0_weight`` and a ``ParameterDict`` from ``collect_params()``; 2.x blocks define
``forward(self, x)`` on ``mx.np`` arrays and get structural names such as ``0.weight``.
A hybridized block is traced once per input signature into a Symbol and runs on fastgrad's
bound Executor (``docs/guide/gluon.rst``).
"""
from fastgrad.gluon import data  # noqa: E402,F401
import sys as _sys  # noqa: E402
from fastgrad import metric  # noqa: E402,F401  (mx.gluon.metric is mx.metric)
_sys.modules[__name__ + ".metric"] = metric
from fastgrad.gluon import parameter, block  # noqa: E402,F401
from fastgrad.gluon.parameter import (Parameter, Constant, ParameterDict,  # noqa: E402,F401
                                      DeferredInitializationError)
from fastgrad.gluon.block import Block, HybridBlock  # noqa: E402,F401
from fastgrad.gluon._symbol_block import SymbolBlock  # noqa: E402,F401
from fastgrad.gluon import loss  # noqa: E402,F401
from fastgrad.gluon import nn  # noqa: E402,F401
from fastgrad.gluon import utils  # noqa: E402,F401
from fastgrad.gluon.trainer import Trainer  # noqa: E402,F401
from fastgrad.gluon import rnn  # noqa: E402,F401
from fastgrad.gluon import contrib  # noqa: E402,F401
from fastgrad.gluon import model_zoo  # noqa: E402,F401
