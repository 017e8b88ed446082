"""Shared subexpressions of a ``create_graph`` pass (internal).

Note [Shared subexpressions]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~
Under ``create_graph`` every rule is recorded, and the next order differentiates what it
recorded. Rules of different nodes often apply the same unary op to the same saved array: every
``sin`` node of ``x`` asks for ``cos(x)``, and after a few orders a graph holds many ``sin``
and ``cos`` nodes of the one ``x``. Within one pass the graph binding of each unary elementwise
op (Note [Bindings] in _bindings.py) therefore remembers its result per input array, and a
second rule asking for the same op of the same array gets the same recorded array: the recorded
graph has one node where it had several, and the next order has one fewer node to differentiate
per reuse. Keys are the input arrays themselves (compared by identity, and kept alive by the
memo so that an identity cannot be reused); a ``create_graph`` pass writes no array in place,
so a remembered result stays right for the whole pass. The memo belongs to the pass object
(Note [Pass state] in ``_engine.pyx``): it starts empty with each pass, is found through the
thread's current pass, and dies with the pass. A pass started inside another (a ``Function``'s
backward calling ``grad``), or in another thread, has its own. First-order passes, bound to
NumPy, never see it.
"""

from fastgrad._core._state import current_pass


def current():
    """The memo of the ``create_graph`` pass this thread is running, else None."""
    running = current_pass()
    return running.memo if running is not None else None


def memoized(op):
    """``op`` (a unary fastgrad op) remembering its result per input within a pass."""

    def call(*args):
        running = current_pass()
        if running is None or len(args) != 1:
            return op(*args)
        memo = running.memo
        if memo is None:
            return op(*args)
        x = args[0]
        key = (op, id(x))
        hit = memo.get(key)
        if hit is not None and hit[0] is x:
            return hit[1]
        result = op(x)
        memo[key] = (x, result)
        return result

    call.__name__ = call.__qualname__ = op.name
    return call
