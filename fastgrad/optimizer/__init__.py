"""MXNet's optimizers (``fastgrad.optimizer``, also ``mx.optimizer``).

Examples
--------
>>> import fastgrad as mx
>>> opt = mx.optimizer.create("adam", learning_rate=0.1)
>>> type(opt).__name__
'Adam'
>>> w = mx.np.array([1.0, -1.0]); g = mx.np.array([0.5, -2.0])
>>> updater = mx.optimizer.get_updater(opt)
>>> updater(0, g, w)          # Adam's first step moves each weight by about the learning rate
>>> w.asnumpy().round(4)
array([ 0.9, -0.9], dtype=float32)
"""

from fastgrad.optimizer import lr_scheduler
from fastgrad.optimizer.optimizer import Optimizer, register, create
from fastgrad.optimizer.sgd import SGD, ccSGD, NAG, Signum, SGLD, DCASGD, Test
from fastgrad.optimizer.adam import Adam, AdamW, LAMB, Adamax, Nadam
from fastgrad.optimizer.adaptive import RMSProp, AdaGrad, AdaDelta, Ftrl, FTRL, FTML
from fastgrad.optimizer.large_batch import LARS, LBSGD
from fastgrad.optimizer import contrib
from fastgrad.optimizer.updater import Updater, get_updater

__all__ = ["Optimizer", "register", "create", "SGD", "ccSGD", "NAG", "Signum", "SGLD", "DCASGD",
           "Test", "Adam", "AdamW", "LAMB", "Adamax", "Nadam", "RMSProp", "AdaGrad", "AdaDelta",
           "Ftrl", "FTRL", "FTML", "LARS", "LBSGD", "Updater", "get_updater", "lr_scheduler",
           "contrib"]
