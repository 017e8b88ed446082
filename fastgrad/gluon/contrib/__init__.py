"""MXNet 1.9.1's ``gluon.contrib``: its recurrent cells (``contrib.rnn``:
``VariationalDropoutCell``, ``LSTMPCell``) and layers (``contrib.nn``)."""

from fastgrad.gluon.contrib import rnn  # noqa: F401
from fastgrad.gluon.contrib import nn  # noqa: F401,E402
