"""Graph rewrites: constant folding and common-subexpression elimination.

Note [Graph optimization]
~~~~~~~~~~~~~~~~~~~~~~~~~
Both rewrites touch only primitives, whose kernels are deterministic functions of their inputs
and parameters; compositions (which may draw random numbers, like dropout) are left alone.

Constant folding
    A primitive whose inputs are all constants is run once and replaced by constants holding
    its outputs, exactly as the executor would have computed them.
Common-subexpression elimination
    Two primitives with the same op, the same parameters (compared by their JSON encoding) and
    the same inputs compute the same values; the later one is replaced by the earlier one.
    Identical constants are merged the same way.

The executor folds constants in its plan but does not eliminate common subexpressions: merging
two uses of ``exp(x)`` adds their gradients before the rule instead of after it, which can
change the last bit of a gradient, and an executor's gradients equal the imperative ones
exactly. ``Executor.get_optimized_symbol`` returns the graph with both rewrites applied.
"""

import json

import numpy as np

from fastgrad.symbol import _values
from fastgrad.symbol._graph import Symbol, SymNode, topo_nodes
from fastgrad.symbol._ops import VARIABLE, CONSTANT, is_primitive


def _key_of_params(params):
    return json.dumps(_values.encode(params), sort_keys=True)


def _fold(node, inputs):
    prim = node.fn
    values = [n.value for n, _ in inputs]
    with np.errstate(all="ignore"):
        out = prim.forward(*values, *node.params)
    outs = [out] if prim.n_out == 1 else list(out)
    return [np.asarray(o) for o in outs]


def optimize(symbol, fold_constants=True, eliminate_common=True):
    """A new Symbol computing the same outputs with constants folded and duplicates merged.

    Parameters
    ----------
    symbol : Symbol
    fold_constants, eliminate_common : bool
        Which rewrites to apply (Note [Graph optimization]).

    Returns
    -------
    Symbol
        Arguments and output names are unchanged.
    """
    mapping = {}          # (old node id, output) -> new entry
    seen = {}             # CSE key -> new node
    for node in topo_nodes(symbol._entries):
        if node.op == VARIABLE:
            mapping[(node.id, 0)] = (node, 0)
            continue
        if node.op == CONSTANT:
            key = ("const", _key_of_params(node.value))
            new = seen.get(key) if eliminate_common else None
            if new is None:
                new = node
                seen[key] = node
            mapping[(node.id, 0)] = (new, 0)
            continue
        inputs = [mapping[(p.id, k)] for p, k in node.inputs]
        prim = is_primitive(node.fn)
        if prim and fold_constants and inputs and all(n.op == CONSTANT for n, _ in inputs):
            outs = _fold(node, inputs)
            for i, v in enumerate(outs):
                name = node.name if len(outs) == 1 else "%s_output%d" % (node.name, i)
                mapping[(node.id, i)] = (SymNode(CONSTANT, name, value=v), 0)
            continue
        new = None
        if prim and eliminate_common:
            key = (node.op, tuple((n.id, k) for n, k in inputs), _key_of_params(node.params))
            new = seen.get(key)
            if new is None:
                new = SymNode(node.op, node.name, inputs, node.params, attrs=dict(node.attrs),
                              num_outputs=node.num_outputs)
                seen[key] = new
        if new is None:
            new = SymNode(node.op, node.name, inputs, node.params, attrs=dict(node.attrs),
                          num_outputs=node.num_outputs)
        for i in range(node.num_outputs):
            mapping[(node.id, i)] = (new, i)
    return Symbol([mapping[(n.id, k)] for n, k in symbol._entries])
