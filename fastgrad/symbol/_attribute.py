"""``AttrScope``: attributes given to every symbol created inside a ``with`` block (MXNet's).

Examples
--------
>>> import fastgrad as mx
>>> with mx.AttrScope(ctx_group='stage1'):
...     x = mx.sym.var('x')
>>> x.attr('ctx_group')
'stage1'
"""

import threading

_state = threading.local()


def current():
    """The attributes of the innermost scope (``{'__ctx_group__': 'stage1'}``), or ``{}``."""
    return getattr(_state, "attrs", {})


class AttrScope:
    """Attributes (strings) for every symbol created in the ``with`` block, as MXNet's
    ``mx.AttrScope``. Nested scopes add to the outer ones; attributes given to a symbol
    explicitly win. They are stored as ``__key__`` and written to the JSON."""

    def __init__(self, **kwargs):
        for k, v in kwargs.items():
            if not isinstance(v, str):
                raise ValueError("AttrScope: attribute %r must be a string, got %r" % (k, v))
        self._attrs = {"__%s__" % k: v for k, v in kwargs.items()}
        self._saved = None

    def get(self, attr):
        """``attr`` with this scope's attributes added (``attr``'s own values win)."""
        out = dict(self._attrs)
        out.update(attr or {})
        return out

    def __enter__(self):
        self._saved = current()
        merged = dict(self._saved)
        merged.update(self._attrs)
        _state.attrs = merged
        return self

    def __exit__(self, *exc):
        _state.attrs = self._saved
        return False
