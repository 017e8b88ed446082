"""MXNet 1.9.1's ``gluon.contrib.nn``."""

from fastgrad.gluon.contrib.nn.basic_layers import *  # noqa: F401,F403
from fastgrad.gluon.contrib.nn import basic_layers

__all__ = basic_layers.__all__
