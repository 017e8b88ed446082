"""MXNet 1.9.1's ``gluon.contrib``: for now its recurrent cells (``contrib.rnn``:
``VariationalDropoutCell``, ``LSTMPCell``)."""

from fastgrad.gluon.contrib import rnn  # noqa: F401
