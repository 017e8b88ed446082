"""Gluon's neural-network layers (``mx.gluon.nn``, MXNet 1.9.1's names and behaviour).

Also exposes ``Block``, ``HybridBlock`` and ``SymbolBlock`` as MXNet's ``gluon.nn`` does.
"""

from fastgrad.gluon import block as _block
from fastgrad.gluon.block import *  # noqa: F401,F403
from fastgrad.gluon._symbol_block import SymbolBlock  # noqa: F401
from fastgrad.gluon.nn.activations import *  # noqa: F401,F403
from fastgrad.gluon.nn.basic_layers import *  # noqa: F401,F403
from fastgrad.gluon.nn.conv_layers import *  # noqa: F401,F403
from fastgrad.gluon.nn import activations, basic_layers, conv_layers

__all__ = (list(_block.__all__) + ["SymbolBlock"] + activations.__all__ + basic_layers.__all__
           + conv_layers.__all__)
