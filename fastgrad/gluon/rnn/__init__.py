"""Recurrent layers and cells (MXNet 1.9.1's ``gluon.rnn``): the fused ``RNN``, ``LSTM`` and
``GRU`` layers on ``npx.rnn``, and the cells ``RNNCell``, ``LSTMCell``, ``GRUCell`` with
their containers and modifiers, which ``unroll`` over a sequence."""

from fastgrad.gluon.rnn.rnn_cell import *  # noqa: F401,F403
from fastgrad.gluon.rnn.rnn_layer import *  # noqa: F401,F403
from fastgrad.gluon.rnn import rnn_cell, rnn_layer  # noqa: F401
