"""A bound symbol's composite nodes replaced by the primitives they ran.

Note [Composite expansion]
~~~~~~~~~~~~~~~~~~~~~~~~~~
MXNet 1.x operators (``sym.Convolution``, ``sym.FullyConnected``, ``sym.Pooling``,
``sym.split``, ...) are composite nodes: functions of fastgrad ops (Note [MXNet 1.x
operators] in ``_legacy.py``). An executor plan runs a composite step by calling its function
on fastgrad arrays, recorded on a small tape of its own, and differentiates it with a backward
pass of its own (Note [Executor plan] in ``_plan.pyx``). That costs a tape and a pass per
composite per step: the LSTM benchmark's 35 splits made its bound executor slower than the
same program recorded imperatively.

So the first forward of a plan *traces* each composite on the list below: every input is a
fresh variable, and the tape the function records is turned into a symbol of primitives
(``autograd.get_symbol``'s ``from_history``) whose arguments are the composite's inputs. The
executor then builds its plan again from the symbol with every traced composite replaced by
its primitives (``expand``), and uses it from the next forward on. Its steps are the
primitives a recorded program would run, in the same order, so its gradients are the tape's
bit for bit (a composite's own pass could round differently).

A trace stands for the composite only while what the function did depends on nothing but the
shapes, dtypes and memory layouts of its inputs, which the plan fixes: the list holds only
operators whose functions are such, and a trace is refused (the composite stays one) when any
input is not one of its arguments, or when a recorded op kept an input's values as a constant
or a parameter (``take_along_axis``'s indices become its parameter, for instance). An input
that an op keeps whole as a non-differentiable input (``pick``'s index) is read from its
argument. A new argument shape makes the executor build the plan from the unexpanded symbol
again (the next forward traces again).
"""

import numpy as np

from fastgrad._core._array import history, unwrap
from fastgrad.symbol._graph import Symbol, SymNode, topo_nodes
from fastgrad.symbol._history import from_history, tape_of
from fastgrad.symbol._ops import CONSTANT, VARIABLE

#: Composite ops whose function depends only on its inputs' shapes, dtypes and layouts
#: (Note [Composite expansion]): no randomness, no training mode, no auxiliary state, no
#: ``Function`` with code of its own, no decision on values.
EXPANDABLE = frozenset([
    "mx.FullyConnected", "mx.Convolution", "mx.Pooling", "mx.Activation", "mx.Flatten",
    "mx.SliceChannel", "mx.Concat", "mx.Reshape", "mx.transpose", "mx.softmax",
    "mx.log_softmax", "mx.expand_dims", "mx.SwapAxis", "mx.slice_axis", "mx.dot",
    "mx.batch_dot", "mx.pick", "npx.pick",
])

_INPUT = "__expand_input"          # + the input's position: a trace's argument names


def _arrays_in(value):
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, (tuple, list)):
        for v in value:
            yield from _arrays_in(v)


def traced_symbol(inputs, outputs):
    """The primitives a composite recorded, as a Symbol whose arguments are its inputs.

    Parameters
    ----------
    inputs : list of ndarray
        The composite's inputs, each a fresh variable of the trace.
    outputs : list of ndarray
        What the composite returned.

    Returns
    -------
    Symbol or None
        ``None`` when the trace cannot stand for the composite (Note [Composite expansion]).
    """
    data = [unwrap(a) for a in inputs]
    heads = [history(o)[0] for o in outputs]
    if any(h is None for h in heads):
        return None                     # an output made without recording (a new constant)
    read_as_constant = {id(d): "%s%d" % (_INPUT, i) for i, d in enumerate(data)}
    for n in tape_of(heads):
        if n.op is None:
            continue
        # An input kept whole as an op's constant (a non-differentiable input, like pick's
        # index) is read from its argument; anything else made from an input's values is
        # baked into the trace.
        kept = [k for k in _arrays_in(list(n.constants or ())) if id(k) not in read_as_constant]
        kept += list(_arrays_in(list(n.op_params)))
        if any(np.may_share_memory(k, d) for k in kept for d in data):
            return None                 # an input's values went into a constant or parameter
    names = {a: "%s%d" % (_INPUT, i) for i, a in enumerate(inputs)}
    try:
        sub = from_history(list(outputs), names, read_as_constant)
    except (ValueError, TypeError, NotImplementedError, RuntimeError):
        return None
    if sorted(sub.list_arguments()) != sorted(names.values()):
        return None                     # an input the trace does not read as an argument
    return sub


def expand(symbol, traces):
    """``symbol`` with every node of ``traces`` (node id -> Symbol from ``traced_symbol``)
    replaced by its primitives; new nodes are made in the old order (Note [Symbol graph])."""
    entry = {}                          # (old node id, output) -> new entry
    for node in topo_nodes(symbol._entries):
        if node.op in (VARIABLE, CONSTANT):
            entry[(node.id, 0)] = (node, 0)
            continue
        inputs = [entry[(p.id, k)] for p, k in node.inputs]
        sub = traces.get(node.id)
        if sub is None:
            new = SymNode(node.op, node.name, inputs, node.params, node.value, node.attrs,
                          node.num_outputs)
            for k in range(node.num_outputs):
                entry[(node.id, k)] = (new, k)
            continue
        inner = {}
        for sn in topo_nodes(sub._entries):
            if sn.op == VARIABLE:
                inner[(sn.id, 0)] = inputs[int(sn.name[len(_INPUT):])]
            elif sn.op == CONSTANT:
                inner[(sn.id, 0)] = (sn, 0)
            else:
                new = SymNode(sn.op, "%s/%s" % (node.name, sn.name),
                              [inner[(p.id, k)] for p, k in sn.inputs], sn.params,
                              num_outputs=sn.num_outputs)
                for k in range(sn.num_outputs):
                    inner[(sn.id, k)] = (new, k)
        for k, (sn, j) in enumerate(sub._entries):
            entry[(node.id, k)] = inner[(sn.id, j)]
    return Symbol([entry[(n.id, k)] for n, k in symbol._entries])
