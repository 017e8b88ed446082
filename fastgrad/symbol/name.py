"""How symbol nodes are named: ``mx.name.NameManager`` and ``mx.name.Prefix`` (MXNet's).

An operator created without ``name=`` is named ``<hint><counter>`` (``fullyconnected0``) by
the current manager; ``Prefix('net1_')`` puts a prefix before every operator name made in its
``with`` block, explicit or automatic, so the weights it creates are ``net1_fc1_weight``.
Variables keep the names they are given, as in MXNet.

Examples
--------
>>> import fastgrad as mx
>>> with mx.name.Prefix('net1_'):
...     fc = mx.sym.FullyConnected(mx.sym.var('data'), num_hidden=2, name='fc1')
>>> fc.list_arguments()
['data', 'net1_fc1_weight', 'net1_fc1_bias']
"""

import threading

_state = threading.local()


class NameManager:
    """Names operators: the given name, or ``hint`` and a counter per hint."""

    def __init__(self):
        self._counter = {}
        self._saved = None

    def get(self, name, hint):
        """The name for a new operator (``name`` if given)."""
        if name:
            return name
        hint = hint.replace(".", "_")
        n = self._counter.get(hint, 0)
        self._counter[hint] = n + 1
        return "%s%d" % (hint, n)

    def __enter__(self):
        self._saved = current()
        _state.manager = self
        return self

    def __exit__(self, *exc):
        _state.manager = self._saved
        return False


class Prefix(NameManager):
    """A manager that puts ``prefix`` before every name it gives."""

    def __init__(self, prefix):
        super().__init__()
        self._prefix = prefix

    def get(self, name, hint):
        return self._prefix + super().get(name, hint)


_default = NameManager()


def current():
    """The manager of the innermost ``with`` block (a process-wide one outside)."""
    return getattr(_state, "manager", None) or _default
