"""``autograd.get_symbol``: a recorded tape turned into a symbol graph.

Note [History to symbol]
~~~~~~~~~~~~~~~~~~~~~~~~
The tape (Note [The tape] in ``_node.pyx``) keeps, per node, its op, its parent nodes, which
output of each parent it read, the op's parameters and, for inputs that had no history, their
values. That is a complete program: variables (leaf nodes) become arguments named ``var0``,
``var1``, ... in creation order, inputs without history become constants stored in the symbol,
and every other node becomes a symbol node of the same op. The nodes are created in ``seq``
order, so the symbol runs its ops in the order the tape recorded them (Note [Symbol graph]).

Two things cannot be rebuilt and raise a clear error: a node whose saved values were freed by
a backward pass (its constants are gone; call ``get_symbol`` before ``backward`` or pass
``retain_graph=True``), and an ``autograd.Function`` node (its Python code is not part of the
tape). Values of inputs that are not differentiable (the condition of ``where``) are stored as
constants, as the tape saw them.
"""

from fastgrad._core._array import Primitive, ndarray, history
from fastgrad._core._zeros import ConstantDerivative, GradientOf, NoGradientOutput, ZeroResult
from fastgrad.symbol._graph import Symbol, SymNode, constant
from fastgrad.symbol._ops import VARIABLE


def tape_of(heads):
    """The tape nodes ``heads`` (nodes) depend on, in ``seq`` order."""
    seen = {}
    stack = list(heads)
    while stack:
        n = stack.pop()
        if n.seq in seen:
            continue
        seen[n.seq] = n
        parents = n.parents_list()
        if isinstance(n.op, (GradientOf, NoGradientOutput)):
            parents = parents[:1]       # only input 0 is part of the program (_zeros.py)
        elif isinstance(n.op, (ConstantDerivative, ZeroResult)):
            parents = []
        stack.extend(p for p in parents if p is not None)
    return [seen[k] for k in sorted(seen)]


def from_history(x, names=None, constant_names=None):
    """The recorded history of ``x`` (an array or a list of arrays) as a Symbol.

    Parameters
    ----------
    x : ndarray or list of ndarray
        Arrays computed inside ``autograd.record()`` from variables.
    names : dict of ndarray to str, or list of str, optional
        Argument names for the variables: a list in creation order, or a mapping from
        variable arrays to names. Variables default to ``var0``, ``var1``, ...
    constant_names : dict of int to str, optional
        Arguments for inputs the history kept as constants (an op's non-differentiable
        input, such as ``pick``'s index): ``id`` of the kept NumPy array to the argument's
        name (Note [Composite expansion] in ``_expand.py``). Other constants stay constants.

    Returns
    -------
    Symbol
    """
    arrays = list(x) if isinstance(x, (list, tuple)) else [x]
    heads = []
    for i, a in enumerate(arrays):
        if not isinstance(a, ndarray):
            raise TypeError("get_symbol: expected a fastgrad array, got %s" % type(a).__name__)
        node, oidx = history(a)
        if node is None:
            raise ValueError("get_symbol: array %d has no recorded history; compute it inside "
                             "autograd.record() from an array that had attach_grad() called" % i)
        heads.append((node, oidx))
    by_node = {}
    if isinstance(names, dict):
        for arr, nm in names.items():
            node, _ = history(arr)
            if node is None or node.op is not None:
                raise ValueError("get_symbol: names may only name variables (attach_grad)")
            by_node[node.seq] = nm
    tape = tape_of([n for n, _ in heads])
    variables = [n for n in tape if n.op is None]
    if isinstance(names, (list, tuple)):
        if len(names) != len(variables):
            raise ValueError("get_symbol: %d names for %d variables" % (len(names),
                                                                          len(variables)))
        by_node = {n.seq: nm for n, nm in zip(variables, names)}
    made = {}
    alias = {}          # a gradient_of node is its input 0 (Note [Zero gradients])
    arguments = {}      # name -> a variable SymNode of that name, for constant_names
    counter = 0

    def variable(name, shape, dtype):
        node = SymNode(VARIABLE, name, attrs={"shape": tuple(shape), "dtype": dtype})
        arguments.setdefault(name, node)
        return node

    for n in tape:
        if n.op is None:
            name = by_node.get(n.seq, "var%d" % counter)
            counter += 1
            shape, = n.output_shapes
            dtype, = n.output_dtypes
            made[n.seq] = variable(name, shape, dtype)
            continue
        if isinstance(n.op, (GradientOf, NoGradientOutput)):
            p, k = n.parents_list()[0], n.output_indices[0]
            alias[n.seq] = alias.get(p.seq, (made.get(p.seq), k))
            continue
        if isinstance(n.op, (ConstantDerivative, ZeroResult)):
            alias[n.seq] = (constant(n.op.value), 0)
            continue
        if type(n.op) is not Primitive:
            raise NotImplementedError(
                "get_symbol: the history contains the custom autograd.Function %r, whose "
                "Python code cannot be stored in a symbol" % n.op.name)
        if n.is_released:
            raise RuntimeError(
                "get_symbol: fastgrad.%s (node #%d) was freed by a backward pass; call "
                "get_symbol before backward(), or pass retain_graph=True" % (n.op.name, n.seq))
        entries = []
        consts = n.constants
        for i, (p, k) in enumerate(zip(n.parents_list(), n.output_indices)):
            if p is not None:
                entries.append(alias[p.seq] if p.seq in alias else (made[p.seq], k))
            elif constant_names and id(consts[i]) in constant_names:
                value = consts[i]
                name = constant_names[id(value)]
                node = arguments.get(name)
                if node is None:
                    node = variable(name, value.shape, value.dtype)
                entries.append((node, 0))
            else:
                entries.append((constant(consts[i]), 0))
        made[n.seq] = SymNode(n.op.name, "%s%d" % (n.op.name, n.seq), entries,
                              tuple(n.op_params), num_outputs=n.num_outputs)
    return Symbol([alias[n.seq] if n.seq in alias else (made[n.seq], k) for n, k in heads])
