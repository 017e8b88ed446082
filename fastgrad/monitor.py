"""MXNet 1.x's ``mx.monitor.Monitor``: statistics of an executor's arrays every ``interval``
batches, printed as MXNet prints them.

Note [Monitor without callbacks]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
MXNet's executor calls the monitor on every operator output while it runs. fastgrad's
executor has no such hook; instead, on the batches a monitor is active, the Module hands it
the executor after its forward pass and the monitor evaluates the symbol's internal outputs
(``symbol.get_internals()``) with the executor's current inputs, in inference mode. The
names are MXNet's (``fc1_output``), the values those of the forward pass except for random
operators (dropout). At ``toc`` the arguments and auxiliary states are added, as in MXNet.
"""

import logging
import re
from math import sqrt

from fastgrad import ndarray as nd

__all__ = ["Monitor"]


def _default_stat(x):
    """The root mean square of ``x``: ``norm(x) / sqrt(x.size)``."""
    return nd.norm(x) / sqrt(x.size)


class Monitor:
    """Collect ``stat_func`` of the arrays whose names match ``pattern`` every ``interval``
    batches (Note [Monitor without callbacks]).

    Parameters
    ----------
    interval : int
        Collect on batches ``0, interval, 2*interval, ...`` (counted by :meth:`tic`).
    stat_func : callable, optional
        ``array -> array``; the root mean square by default.
    pattern : str
        A regular expression the names must match (from their start).
    sort : bool
        Sort the results by name.
    monitor_all : bool
        Also the inputs of the operators (here: every argument, as at ``toc``).

    Examples
    --------
    >>> import fastgrad as mx
    >>> mon = mx.monitor.Monitor(1, pattern='fc_weight')
    """

    def __init__(self, interval, stat_func=None, pattern=".*", sort=False, monitor_all=False):
        self.stat_func = stat_func if stat_func is not None else _default_stat
        self.interval = int(interval)
        if self.interval <= 0:
            raise ValueError("Monitor: interval must be positive, got %r" % (interval,))
        self.activated = False
        self.queue = []
        self.step = 0
        self.exes = []
        self.re_prog = re.compile(pattern)
        self.sort = sort
        self.monitor_all = monitor_all

    def stat_helper(self, name, array):
        """Record ``stat_func(array)`` under ``name`` when active and ``name`` matches."""
        if not self.activated or not self.re_prog.match(name):
            return
        self.queue.append((self.step, name, self.stat_func(array)))

    def install(self, exe):
        """Watch the executor ``exe``."""
        if exe not in self.exes:
            self.exes.append(exe)

    def _replace(self, old, new):
        """Watch ``new`` instead of ``old`` (a module reshaped its executor)."""
        self.exes = [e for e in self.exes if e is not old]
        self.install(new)

    def tic(self):
        """Start a batch: become active every ``interval`` batches."""
        if self.step % self.interval == 0:
            self.queue = []
            self.activated = True
        self.step += 1

    def _after_forward(self, exe):
        """The internal outputs of ``exe``'s symbol (Note [Monitor without callbacks])."""
        if not self.activated:
            return
        internals = exe._symbol.get_internals()
        inputs = set(exe._arg_names) | set(exe._aux_names)
        names = internals.list_outputs()
        wanted = [i for i, n in enumerate(names) if n not in inputs and self.re_prog.match(n)]
        if not wanted:
            return
        values = dict(exe.arg_dict)
        values.update(exe.aux_dict)
        outputs = internals.eval(**values)
        for i in wanted:
            self.stat_helper(names[i], outputs[i])

    def toc(self):
        """End a batch: ``[(step, name, text of the statistic)]`` when active, else ``[]``."""
        if not self.activated:
            return []
        for exe in self.exes:
            for name, array in zip(exe._arg_names, exe.arg_arrays):
                self.stat_helper(name, array)
            for name, array in zip(exe._aux_names, exe.aux_arrays):
                self.stat_helper(name, array)
        self.activated = False
        res = []
        if self.sort:
            self.queue.sort(key=lambda x: x[1])
        for step, name, values in self.queue:
            if not isinstance(values, list):
                values = [values]
            text = ""
            for v in values:
                if v.shape in ((1,), ()):
                    text += str(v.asscalar()) + "\t"
                else:
                    text += str(v.asnumpy()) + "\t"
            res.append((step, name, text))
        self.queue = []
        return res

    def toc_print(self):
        """:meth:`toc` and log each line as MXNet: ``Batch: <step> <name> <value>``."""
        for step, name, text in self.toc():
            logging.info("Batch: {:7d} {:30s} {:s}".format(step, name, text))
