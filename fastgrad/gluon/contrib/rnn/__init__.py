"""MXNet 1.9.1's ``gluon.contrib.rnn``: ``VariationalDropoutCell`` and ``LSTMPCell`` (the
convolutional cells are not there yet)."""

from fastgrad.gluon.contrib.rnn.rnn_cell import *  # noqa: F401,F403
from fastgrad.gluon.contrib.rnn import rnn_cell  # noqa: F401
