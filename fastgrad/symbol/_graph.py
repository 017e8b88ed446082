"""The symbol graph: nodes, the ``Symbol`` handle, op construction and shape inference.

Note [Symbol graph]
~~~~~~~~~~~~~~~~~~~
A symbol is a tuple of *entries* ``(node, output_index)``; a node holds its op (Note [Symbol
ops] in ``_ops.py``), its inputs as entries, its parameters, and a creation number ``id``.
Nodes are immutable once built and inputs are always built before their consumers, so sorting
by ``id`` gives a topological order that is the order in which user code (or a recorded tape,
see ``_history.py``) created the operations. The executor runs nodes in exactly that order;
that makes its backward pass add gradient contributions in the same order as the tape engine
does for the same program, so the gradients are equal bit for bit.

The names MXNet users see come from a depth-first walk instead (``list_arguments``,
``get_internals``): inputs in order, each node after its inputs.

Note [Shape inference]
~~~~~~~~~~~~~~~~~~~~~~
Shapes and dtypes are inferred by running each node's NumPy kernel on probe inputs of the
right shape and dtype: zero-stride views of a single zero (``numpy.broadcast_to``), which cost
no memory. NumPy itself then applies broadcasting, reductions, reshapes and indexing, so the
inference is exactly what the forward pass will do. A kernel that rejects the all-zeros probe
(a singular matrix, a read-only input) is retried with ones, then with a full array of
well-conditioned random values; if every probe fails the error names the node and the input
shapes. Inference only runs forward: every argument's shape must be given or declared on the
variable.
"""

import itertools
import json
import warnings

import numpy as np

from fastgrad._core._array import Primitive, REQUIRED, ndarray, unwrap, _wrap
from fastgrad._ops import _derivatives, _registry
from fastgrad import autograd
from fastgrad import numpy_extension as _npx
from fastgrad._api import _mxnet_slicing as _slicing
from fastgrad.base import MXNetValueError, NotImplementedForSymbol
from fastgrad.ndarray import NDArray     # MXNet 1.x's executors hold NDArrays
from fastgrad.symbol import _attribute, _legacy, _values
from fastgrad.symbol import name as naming
from fastgrad.symbol._ops import VARIABLE, CONSTANT, lookup, composites, is_primitive
from fastgrad.symbol._values import InputRef

# What the Symbol class's methods need from the modules built on this one, connected by
# ``wire`` at start-up (Note [Bootstrap] in fastgrad/_bootstrap.py).
_hooks = {}


def wire(*, to_json, load_json, translate, symbol_op, executor):
    """Connect the Symbol class to the modules built on this one: called once, by
    ``fastgrad._bootstrap.wire`` at start-up (Note [Bootstrap] in fastgrad/_bootstrap.py).

    Parameters
    ----------
    to_json, load_json : callable
        fastgrad.symbol._json's writer and reader (``tojson``, pickling).
    translate : callable
        fastgrad.symbol._mxnet_json's translation of a node to MXNet's op and attributes.
    symbol_op : callable
        fastgrad.symbol._api's builder of symbol ops (``s.exp()``).
    executor : type
        The executor class ``bind`` returns (fastgrad.executor.Executor).
    """
    _hooks.update(to_json=to_json, load_json=load_json, translate=translate,
                  symbol_op=symbol_op, executor=executor)


def _hook(name):
    """The function or class ``wire`` connected as ``name``, or an error naming it."""
    try:
        return _hooks[name]
    except KeyError:
        raise RuntimeError("fastgrad.symbol: %r is not connected yet; "
                           "fastgrad._bootstrap.wire() connects it when `import fastgrad` has "
                           "imported its modules (Note [Bootstrap] in fastgrad/_bootstrap.py)"
                           % name) from None


_ids = itertools.count()


def _auto_name(hint, name=None):
    """``name``, or ``hint`` followed by a per-hint counter (``exp0``, ``exp1``, ...), from
    the current name manager (``mx.name.Prefix`` adds its prefix to both), like MXNet."""
    return naming.current().get(name, hint)


def _input_names():
    out = {}
    for op in _derivatives.TABLE:
        try:
            names, variadic, _, _ = _registry._parse_signature(op)
        except ValueError:
            continue
        out[op.name] = () if variadic else tuple(names)
    return out


_INPUT_NAMES = None


def _prim_input_names(prim):
    global _INPUT_NAMES
    if _INPUT_NAMES is None:
        _INPUT_NAMES = _input_names()
    return _INPUT_NAMES.get(prim.name, ())


class SymNode:
    """One node of a symbol graph (internal; see Note [Symbol graph]).

    Attributes
    ----------
    op : str
        ``'null'`` (argument), ``'_const'``, a registry op name, or ``'np.f'``/``'npx.f'``.
    name : str
    inputs : tuple of (SymNode, int)
    params : tuple
        A primitive's parameters in ``param_names`` order; for a composite, ``(args,
        kwargs)`` of its call with :class:`InputRef` placeholders for the inputs.
    value : object
        A constant's value.
    attrs : dict
        A variable's declared ``shape``/``dtype`` (``None`` when not declared) and user attrs.
    num_outputs : int
    id : int
        Creation number (a topological order).
    """

    __slots__ = ("op", "name", "inputs", "params", "value", "attrs", "num_outputs", "id")

    def __init__(self, op, name, inputs=(), params=(), value=None, attrs=None, num_outputs=1):
        self.op = op
        self.name = name
        self.inputs = tuple(inputs)
        self.params = params
        self.value = value
        self.attrs = attrs if attrs is not None else {}
        self.num_outputs = num_outputs
        self.id = next(_ids)

    @property
    def fn(self):
        """The Primitive or composite function this node runs (``None`` for args/consts)."""
        if self.op in (VARIABLE, CONSTANT):
            return None
        return lookup(self.op)

    def output_name(self, i):
        if self.op == VARIABLE:
            return self.name
        if self.num_outputs == 1:
            return self.name + "_output"
        return "%s_output%d" % (self.name, i)

    def __repr__(self):
        return "<SymNode %s %s #%d>" % (self.op, self.name, self.id)


def aux_positions(node):
    """The input positions of ``node`` that are auxiliary states (MXNet 1.x operators only)."""
    if not node.op.startswith("mx."):
        return ()
    spec = _legacy.CATALOGUE[node.op[3:]]
    if not spec.aux:
        return ()
    names = spec.input_names(spec.full(node.params[1]))
    return tuple(i for i, n in enumerate(names) if n in spec.aux)


def aux_ids(nodes):
    """Ids of the variables among ``nodes``' inputs that feed an auxiliary position."""
    out = set()
    for n in nodes:
        for i in aux_positions(n):
            p = n.inputs[i][0]
            if p.op == VARIABLE:
                out.add(p.id)
    return out


def topo_nodes(entries):
    """Every node the entries depend on, in creation order (Note [Symbol graph])."""
    seen = {}
    stack = [n for n, _ in entries]
    while stack:
        n = stack.pop()
        if n.id in seen:
            continue
        seen[n.id] = n
        stack.extend(p for p, _ in n.inputs)
    return [seen[k] for k in sorted(seen)]


def dfs_nodes(entries):
    """Every node the entries depend on, depth-first: inputs in order, then the node."""
    order = []
    done = set()
    for head, _ in entries:
        stack = [(head, False)]
        while stack:
            n, expanded = stack.pop()
            if n.id in done:
                continue
            if expanded:
                done.add(n.id)
                order.append(n)
                continue
            stack.append((n, True))
            for p, _ in reversed(n.inputs):
                if p.id not in done:
                    stack.append((p, False))
    return order


# ---------------------------------------------------------------- building nodes

def constant(value, name=None):
    """A constant node holding ``value`` (a number or a NumPy array)."""
    if isinstance(value, ndarray):
        value = np.array(unwrap(value))
    elif isinstance(value, (list, tuple)):
        value = np.asarray(value)
    elif isinstance(value, np.ndarray):
        value = value.copy()
    _values.encode(value, "constant")
    return SymNode(CONSTANT, name or _auto_name("const"), value=value)


def _as_entry(x, opname, what):
    if isinstance(x, Symbol):
        if len(x._entries) != 1:
            raise ValueError("sym.%s: %s is a group of %d outputs; select one with [i]"
                             % (opname, what, len(x._entries)))
        return x._entries[0]
    if isinstance(x, (int, float, complex, bool, np.generic, np.ndarray, ndarray, list, tuple)):
        return (constant(x), 0)
    raise TypeError("sym.%s: %s must be a Symbol, a number or an array, not %s"
                    % (opname, what, type(x).__name__))


def _bind_params(prim, rest, kwargs):
    names = prim.param_names
    if len(rest) > len(names):
        raise TypeError("sym.%s() takes at most %d parameters after its inputs (%d given)"
                        % (prim.name, len(names), len(rest)))
    params = list(rest) + list(prim.param_defaults[len(rest):])
    for key, value in kwargs.items():
        if key not in names:
            raise TypeError("sym.%s() got an unexpected keyword argument %r" % (prim.name, key))
        i = names.index(key)
        if i < len(rest):
            raise TypeError("sym.%s() got multiple values for argument %r" % (prim.name, key))
        params[i] = value
    for i, p in enumerate(params):
        if p is REQUIRED:
            raise TypeError("sym.%s() missing required argument %r" % (prim.name, names[i]))
        if isinstance(p, ndarray):
            params[i] = np.array(unwrap(p))
        if isinstance(p, Symbol):
            raise TypeError("sym.%s(): parameter %r must be a value, not a Symbol"
                            % (prim.name, names[i]))
        _values.encode(params[i], "sym.%s parameter %r" % (prim.name, names[i]))
    return tuple(params)


def apply_primitive(prim, args, kwargs):
    """The Symbol of ``prim`` applied to ``args`` (symbols, numbers, arrays) and params."""
    kwargs = dict(kwargs)
    name = kwargs.pop("name", None)
    attr = kwargs.pop("attr", None)
    num_outputs = kwargs.pop("num_outputs", None)
    if prim.n_in < 0:
        if not args or not isinstance(args[0], (list, tuple)):
            raise TypeError("sym.%s() takes a list of inputs as its first argument" % prim.name)
        inputs = list(args[0])
        if not inputs:
            raise ValueError("sym.%s() needs at least one input" % prim.name)
        rest = args[1:]
    else:
        inputs = list(args[:prim.n_in])
        rest = args[prim.n_in:]
        if len(inputs) < prim.n_in:
            for iname in _prim_input_names(prim)[len(inputs):]:
                if iname in kwargs:
                    inputs.append(kwargs.pop(iname))
        if len(inputs) < prim.n_in:
            raise TypeError("sym.%s() takes %d inputs (%d given)"
                            % (prim.name, prim.n_in, len(inputs)))
    entries = [_as_entry(x, prim.name, "input %d" % i) for i, x in enumerate(inputs)]
    params = _bind_params(prim, tuple(rest), kwargs)
    n_out = prim.n_out
    if n_out < 0:
        n_out = _count_outputs(prim, entries, params, num_outputs)
    elif num_outputs is not None and num_outputs != n_out:
        raise ValueError("sym.%s has %d outputs, not num_outputs=%r" % (prim.name, n_out,
                                                                           num_outputs))
    node = SymNode(prim.name, _auto_name(prim.name, name), entries, params,
                   attrs=_scoped(attr), num_outputs=n_out)
    return Symbol.from_node(node)


def _scoped(attr):
    """A node's attributes: the current ``AttrScope``'s, then ``attr``'s."""
    out = dict(_attribute.current())
    out.update(attr or {})
    return out


def _count_outputs(prim, entries, params, num_outputs):
    if num_outputs is not None:
        if not isinstance(num_outputs, int) or num_outputs < 1:
            raise ValueError("sym.%s: num_outputs must be a positive int" % prim.name)
        return num_outputs
    try:
        info = infer(entries, {}, {})
        probes = [_probe_for(info, e) for e in entries]
    except (ValueError, _Unknown):
        probes = None
    if probes is None:
        raise ValueError("sym.%s: its number of outputs depends on its inputs' shapes; declare "
                         "them (sym.var(name, shape=...)) or pass num_outputs=" % prim.name)
    out = _run_probe(prim, None, probes, params, prim.name)
    return len(out)


# Note [Symbolic split]: NumPy's split family returns one array per section, a number its
# arguments give (``sections``, or ``len(indices) + 1``) whatever the input's shape. Called on
# a symbol it gives a list of one-output symbols, as the imperative call gives a list of
# arrays, so that ``parts[1:-1]`` and ``np.concatenate(parts)`` in a hybrid_forward trace.
_SPLITS = frozenset({"np.split", "np.array_split", "np.hsplit", "np.vsplit", "np.dsplit"})


def _split_count(opname, args, kwargs):
    sections = kwargs.get("indices_or_sections", args[1] if len(args) > 1 else None)
    if isinstance(sections, (int, np.integer)) and not isinstance(sections, bool):
        return int(sections) if sections > 0 else None
    if isinstance(sections, (list, tuple)):
        return len(sections) + 1
    return None


def apply_composite(opname, fn, args, kwargs):
    """The Symbol of a composite function (``np.*``/``npx.*``) called on symbols."""
    if opname in _SPLITS and "num_outputs" not in kwargs:
        count = _split_count(opname, args, kwargs)
        if count is not None:
            return list(apply_composite(opname, fn, args, dict(kwargs, num_outputs=count)))
    kwargs = dict(kwargs)
    name = kwargs.pop("name", None)
    attr = kwargs.pop("attr", None)
    num_outputs = kwargs.pop("num_outputs", 1)
    if not isinstance(num_outputs, int) or num_outputs < 1:
        raise ValueError("sym.%s: num_outputs must be a positive int" % opname)
    entries = []

    def template(v):
        if isinstance(v, Symbol):
            entries.append(_as_entry(v, opname, "input %d" % len(entries)))
            return InputRef(len(entries) - 1)
        if isinstance(v, list):
            return [template(x) for x in v]
        if isinstance(v, tuple):
            return tuple(template(x) for x in v)
        if isinstance(v, ndarray):
            return np.array(unwrap(v))
        return v

    targs = tuple(template(a) for a in args)
    tkwargs = {k: template(v) for k, v in sorted(kwargs.items())}
    _values.encode(targs, "sym.%s arguments" % opname)
    _values.encode(list(tkwargs.values()), "sym.%s arguments" % opname)
    node = SymNode(opname, _auto_name(opname.split(".")[-1], name), entries,
                   (targs, tkwargs), attrs=_scoped(attr), num_outputs=num_outputs)
    return Symbol.from_node(node)


def fill_call(params, inputs):
    """A composite node's ``(args, kwargs)`` with the inputs in place of the placeholders."""
    targs, tkwargs = params

    def fill(v):
        if isinstance(v, InputRef):
            return inputs[v.index]
        if isinstance(v, list):
            return [fill(x) for x in v]
        if isinstance(v, tuple):
            return tuple(fill(x) for x in v)
        return v
    return [fill(a) for a in targs], {k: fill(v) for k, v in tkwargs.items()}


def run_composite(fn, opname, params, inputs, num_outputs):
    """Call a composite on fastgrad arrays; a list of its outputs (checked)."""
    args, kwargs = fill_call(params, inputs)
    out = fn(*args, **kwargs)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    if len(outs) != num_outputs:
        raise ValueError("%s returned %d outputs but its symbol node declares %d "
                         "(pass num_outputs= when building it)" % (opname, len(outs), num_outputs))
    for o in outs:
        if not isinstance(o, ndarray):
            raise TypeError("%s returned a %s, not an array, so it cannot be a symbol op"
                            % (opname, type(o).__name__))
    return outs


# ---------------------------------------------------------------- inference

class _Unknown(Exception):
    """An argument's shape is not known (inference stops)."""


def _probe(shape, dtype):
    return np.broadcast_to(np.zeros((), dtype=dtype), shape)


def _probe_for(info, entry):
    node, i = entry
    if node.op == CONSTANT:
        return node.value
    shape, dtype = info[(node.id, i)]
    if shape is None:
        raise _Unknown(node.name)
    return _probe(shape, dtype)


def _retry_probes(probes):
    yield probes
    yield [np.ones(p.shape, p.dtype) if isinstance(p, np.ndarray) and p.strides == (0,) * p.ndim
           and p.ndim else p for p in probes]
    rng = np.random.default_rng(0)
    full = []
    for p in probes:
        if isinstance(p, np.ndarray) and p.dtype.kind in "fc":
            a = rng.standard_normal(p.shape).astype(p.dtype)
            if a.ndim >= 2 and a.shape[-1] == a.shape[-2]:
                a = a + a.shape[-1] * np.eye(a.shape[-1], dtype=a.dtype)
            full.append(a)
        elif isinstance(p, np.ndarray):
            full.append(np.array(p))
        else:
            full.append(p)
    yield full


def _run_probe(fn, node, probes, params, label):
    error = None
    for attempt in _retry_probes(probes):
        try:
            with np.errstate(all="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                if is_primitive(fn):
                    out = fn.forward(*attempt, *params)
                    outs = list(out) if fn.n_out != 1 else [out]
                else:
                    with autograd.pause(train_mode=False):
                        outs = run_composite(fn, node.op, params,
                                             [_wrap(np.asarray(a)) for a in attempt],
                                             node.num_outputs)
                    outs = [unwrap(o) for o in outs]
            return [np.asarray(o) for o in outs]
        except Exception as exc:  # noqa: BLE001 -- reported below with the node's name
            error = exc
    shapes = ", ".join(str(np.shape(p)) for p in probes)
    raise ValueError("shape inference failed at %s with input shapes (%s): %s: %s"
                     % (label, shapes, type(error).__name__, error))


def infer(entries, shapes, dtypes, partial=False):
    """Shape and dtype of every output of every node: ``{(node id, i): (shape, dtype)}``.

    ``shapes``/``dtypes`` map argument names to values that override the declared ones. With
    ``partial``, outputs that depend on an unknown argument get shape ``None``; otherwise an
    unknown argument raises :class:`_Unknown`.
    """
    info = {}
    for node in topo_nodes(entries):
        if node.op == VARIABLE:
            shape = shapes.get(node.name, node.attrs.get("shape"))
            dtype = dtypes.get(node.name, node.attrs.get("dtype")) or np.float32
            # An unknown shape may still be inferred from its consumer (an MXNet operator's
            # weight); it is an error only when a node needs it. A declared dimension 0 is
            # unknown, as in MXNet 1.x (a Gluon Parameter waiting for its input size).
            if node.name not in shapes and shape is not None and 0 in tuple(shape):
                shape = None
            info[(node.id, 0)] = (None if shape is None else tuple(shape), np.dtype(dtype))
            continue
        if node.op == CONSTANT:
            v = np.asarray(node.value)
            info[(node.id, 0)] = (v.shape, v.dtype)
            continue
        if node.op.startswith("mx."):
            _infer_parameter_shapes(node, info, dtypes)
        try:
            probes = [_probe_for(info, e) for e in node.inputs]
        except _Unknown:
            if not partial:
                raise
            for i in range(node.num_outputs):
                info[(node.id, i)] = (None, None)
            continue
        outs = _run_probe(node.fn, node, probes, node.params,
                          "%s (op %s)" % (node.name, node.op))
        if len(outs) != node.num_outputs:
            raise ValueError("%s (op %s) produces %d outputs but its node declares %d"
                             % (node.name, node.op, len(outs), node.num_outputs))
        for i, o in enumerate(outs):
            info[(node.id, i)] = (o.shape, o.dtype)
    if not partial:
        for node in topo_nodes(entries):
            if node.op == VARIABLE and info[(node.id, 0)][0] is None:
                raise _Unknown(node.name)
    return info


def _infer_parameter_shapes(node, info, dtypes):
    """Fill in the unknown shapes of variables feeding an MXNet operator from its data's shape
    (``fc1_weight`` from ``num_hidden`` and the data), as MXNet's inference does."""
    spec = _legacy.CATALOGUE[node.op[3:]]
    if spec.shape_rule is None:
        return
    known = [info[(p.id, k)][0] for p, k in node.inputs]
    if all(s is not None for s in known):
        return
    full = spec.full(node.params[1])
    try:
        wanted = spec.shape_rule(known, full)
    except (TypeError, IndexError, ValueError, ZeroDivisionError):
        return
    for i, shape in wanted.items():
        if i >= len(node.inputs):
            continue
        p, k = node.inputs[i]
        if p.op == VARIABLE and info[(p.id, 0)][0] is None and shape is not None:
            dtype = dtypes.get(p.name, p.attrs.get("dtype"))
            if dtype is None:
                dtype = info[(node.inputs[0][0].id, node.inputs[0][1])][1]
            info[(p.id, 0)] = (tuple(int(d) for d in shape), np.dtype(dtype or np.float32))


# ---------------------------------------------------------------- Symbol

_BINARY = {
    "__add__": "add", "__sub__": "subtract", "__mul__": "multiply", "__truediv__": "divide",
    "__pow__": "power", "__mod__": "mod", "__matmul__": "matmul",
    "__lt__": "less", "__le__": "less_equal", "__gt__": "greater", "__ge__": "greater_equal",
    "__eq__": "equal", "__ne__": "not_equal",
}
_REFLECTED = {
    "__radd__": "add", "__rsub__": "subtract", "__rmul__": "multiply", "__rtruediv__": "divide",
    "__rpow__": "power", "__rmod__": "mod", "__rmatmul__": "matmul",
}


class Symbol:
    """A symbolic graph: one or more outputs of operations on named arguments.

    Build one from variables (:func:`fastgrad.sym.var`) with operators and ``fastgrad.sym``
    ops, or from recorded history with :func:`fastgrad.autograd.get_symbol`; run it with
    :meth:`bind`. Symbols are immutable; every operation returns a new one.

    Examples
    --------
    >>> import fastgrad as mx
    >>> a, b = mx.sym.var('a'), mx.sym.var('b')
    >>> c = 2 * a + b
    >>> c.list_arguments()
    ['a', 'b']
    >>> ex = c.bind(mx.cpu(), {'a': mx.nd.array([1, 2]), 'b': mx.nd.array([2, 3])})
    >>> ex.forward()[0].asnumpy()
    array([4., 7.], dtype=float32)
    """

    __slots__ = ("_entries",)

    def __init__(self, entries):
        self._entries = tuple(entries)

    @classmethod
    def from_node(cls, node):
        return cls([(node, i) for i in range(node.num_outputs)])

    # ------------------------------------------------------------ naming
    @property
    def name(self):
        """The name of the node of a single-output symbol, ``None`` for a group."""
        nodes = {n.id for n, _ in self._entries}
        if len(nodes) != 1:
            return None
        return self._entries[0][0].name

    def list_arguments(self):
        """Names of the arguments (variables but auxiliary states), in depth-first order."""
        nodes = dfs_nodes(self._entries)
        aux = aux_ids(nodes)
        return [n.name for n in nodes if n.op == VARIABLE and n.id not in aux]

    def list_inputs(self):
        """Names of every input: arguments and auxiliary states, in depth-first order."""
        return [n.name for n in dfs_nodes(self._entries) if n.op == VARIABLE]

    def list_auxiliary_states(self):
        """Names of the auxiliary states: variables that MXNet 1.x operators update
        themselves (``BatchNorm``'s ``moving_mean``/``moving_var``), in depth-first order."""
        nodes = dfs_nodes(self._entries)
        aux = aux_ids(nodes)
        return [n.name for n in nodes if n.op == VARIABLE and n.id in aux]

    def list_outputs(self):
        """Names of the outputs: ``'<node>_output'`` (``_output<i>`` for several)."""
        return [n.output_name(i) for n, i in self._entries]

    # ------------------------------------------------------------ attributes
    def _node_attrs(self, node):
        t = _hook("translate")(node) if node.op != CONSTANT else None
        if t is not None:
            attrs = dict(t[1])
        else:
            attrs = {k: str(v) for k, v in node.attrs.items() if k not in ("shape", "dtype")}
        # MXNet also shows user __key__ attributes under their plain key.
        for k, v in list(attrs.items()):
            if k.startswith("__") and k.endswith("__") and len(k) > 4 and k not in (
                    "__shape__", "__dtype__", "__init__", "__storage_type__"):
                attrs.setdefault(k[2:-2], v)
        return attrs

    def attr(self, key):
        """The attribute ``key`` of this single-node symbol as a string (``None`` if absent);
        ``key`` may be given with or without MXNet's ``__`` decoration."""
        nodes = {n.id: n for n, _ in self._entries}
        if len(nodes) != 1:
            raise ValueError("attr: the symbol is a group of %d nodes" % len(nodes))
        attrs = self._node_attrs(self._entries[0][0])
        return attrs.get(key, attrs.get("__%s__" % key))

    def list_attr(self, recursive=False):
        """The attributes of this symbol's node (strings, as MXNet shows them)."""
        if recursive:
            raise ValueError("list_attr: recursive=True is gone in MXNet too; use attr_dict()")
        nodes = {n.id: n for n, _ in self._entries}
        if len(nodes) != 1:
            raise ValueError("list_attr: the symbol is a group of %d nodes" % len(nodes))
        return self._node_attrs(self._entries[0][0])

    def attr_dict(self):
        """``{node name: attributes}`` for every node with attributes (as MXNet's)."""
        out = {}
        for n in dfs_nodes(self._entries):
            if n.op == CONSTANT:
                continue
            attrs = self._node_attrs(n)
            if attrs:
                out[n.name] = attrs
        return out

    def get_internals(self):
        """A group of every output of every node, in depth-first order."""
        return Symbol([(n, i) for n in dfs_nodes(self._entries) for i in range(n.num_outputs)])

    def __call__(self, *args, **kwargs):
        """A copy of this symbol with arguments replaced by symbols (MXNet's composition).

        Positional symbols replace the arguments in ``list_arguments()`` order, keywords
        replace them by name; ``name=`` renames the output node of a single-output symbol.

        Examples
        --------
        >>> import fastgrad as mx
        >>> net = mx.sym.FullyConnected(num_hidden=2, name='fc')
        >>> net.list_arguments()
        ['fc_data', 'fc_weight', 'fc_bias']
        >>> net(fc_data=mx.sym.var('x')).list_arguments()
        ['x', 'fc_weight', 'fc_bias']
        """
        kwargs = dict(kwargs)
        name = kwargs.pop("name", None)
        names = self.list_arguments()
        if len(args) > len(names):
            raise TypeError("compose: %d symbols for %d arguments" % (len(args), len(names)))
        mapping = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in self.list_inputs():
                raise ValueError("compose: %r is not an argument of the symbol (arguments: %s)"
                                 % (k, names))
            mapping[k] = v
        for k, v in mapping.items():
            if not isinstance(v, Symbol) or len(v._entries) != 1:
                raise TypeError("compose: the value for %r must be a single-output Symbol" % k)
        new = {}
        for node in topo_nodes(self._entries):
            if node.op == VARIABLE and node.name in mapping:
                new[(node.id, 0)] = mapping[node.name]._entries[0]
                continue
            inputs = tuple(new[(p.id, k)] for p, k in node.inputs)
            if inputs == node.inputs:
                copy = node
            else:
                copy = SymNode(node.op, node.name, inputs, node.params, node.value,
                               dict(node.attrs), node.num_outputs)
            for i in range(node.num_outputs):
                new[(node.id, i)] = (copy, i)
        entries = [new[(n.id, i)] for n, i in self._entries]
        if name is not None:
            heads = {n.id for n, _ in entries}
            if len(heads) != 1:
                raise ValueError("compose: name= needs a symbol with one output node")
            head = entries[0][0]
            renamed = SymNode(head.op, name, head.inputs, head.params, head.value,
                              dict(head.attrs), head.num_outputs)
            entries = [(renamed, i) for _, i in entries]
        return Symbol(entries)

    def get_children(self):
        """The inputs of this symbol's node(s) as a group, or ``None`` for a variable."""
        nodes = list({n.id: n for n, _ in self._entries}.values())
        entries = [e for n in nodes for e in n.inputs]
        return Symbol(entries) if entries else None

    def __len__(self):
        return len(self._entries)

    def __iter__(self):
        return (Symbol([e]) for e in self._entries)

    def __getitem__(self, index):
        """An output by position or name, or NumPy indexing of a one-output symbol.

        Note [Symbol indexing]: an MXNet 1.x Symbol's ``sym[i]`` selects output ``i``; a
        NumPy-mode symbol (MXNet's ``_Symbol``, what a ``hybrid_forward`` receives under
        ``@use_np``/``npx.set_np()``) indexes its one output as NumPy does. So a key that can
        only be NumPy indexing (a tuple, ``None``, ``Ellipsis``, a list or array of indices)
        is always NumPy indexing of a one-output symbol, and an int or slice is too while
        NumPy array semantics is requested; otherwise ints and slices select outputs."""
        if self._is_numpy_index(index):
            if len(self._entries) != 1:
                raise TypeError("NumPy indexing %r needs a symbol with one output; this one has "
                                "%d (select an output first)" % (index, len(self._entries)))
            return apply_primitive(_registry.REGISTRY["getitem"], (self,), {"key": index})
        if isinstance(index, str):
            names = self.list_outputs()
            hits = [i for i, n in enumerate(names) if n == index]
            if not hits:
                raise ValueError("no output named %r (outputs: %s)" % (index, names))
            if len(hits) > 1:
                raise ValueError("several outputs are named %r" % index)
            return Symbol([self._entries[hits[0]]])
        if isinstance(index, slice):
            return Symbol(self._entries[index])
        if not isinstance(index, (int, np.integer)):
            raise TypeError("Symbol indices are ints, slices or output names, not %s"
                            % type(index).__name__)
        n = len(self._entries)
        if not -n <= index < n:
            raise IndexError("output %d of a symbol with %d outputs" % (index, n))
        return Symbol([self._entries[index]])

    def slice(self, begin, end, step=()):
        """MXNet's ``x.slice(begin, end, step)``: NumPy slicing of the leading axes."""
        return apply_primitive(_registry.REGISTRY["getitem"], (self,),
                               {"key": _slicing.begin_end_key(begin, end, step, "Symbol.slice")})

    def _is_numpy_index(self, index):
        if isinstance(index, str):
            return False
        if isinstance(index, (int, np.integer, slice)):
            return len(self._entries) == 1 and _npx.is_np_array_requested()
        return isinstance(index, (tuple, list, np.ndarray, type(None), type(Ellipsis)))

    def __repr__(self):
        # MXNet 1.9.1's: the node's name (``<Symbol fc>``, also for a node's several
        # outputs), else the group's node names (``<Symbol group [r, fc]>``).
        name = self.name
        if name is None:
            return "<%s group [%s]>" % (type(self).__name__,
                                        ", ".join(n.name for n, _ in self._entries))
        return "<%s %s>" % (type(self).__name__, name)

    def __hash__(self):
        return hash(tuple((n.id, i) for n, i in self._entries))

    def __bool__(self):
        raise NotImplementedForSymbol(self.__bool__, "bool")

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self

    def __reduce__(self):
        return (_hook("load_json"), (self.tojson(layout="fastgrad"),))

    # ------------------------------------------------------------ arithmetic
    def __neg__(self):
        return apply_primitive(_registry.REGISTRY["negative"], (self,), {})

    def __pos__(self):
        return self

    def __abs__(self):
        return apply_primitive(_registry.REGISTRY["abs"], (self,), {})

    @property
    def T(self):
        return apply_primitive(_registry.REGISTRY["transpose"], (self,), {})

    # MXNet has a legacy Symbol class and a NumPy-style one (mx.sym.np); fastgrad's one Symbol
    # serves both, so the conversions between them return it unchanged.
    def as_np_ndarray(self):
        """This symbol as a NumPy-style symbol (MXNet's ``Symbol.as_np_ndarray``): itself."""
        return self

    def as_nd_ndarray(self):
        """This symbol as a legacy symbol (MXNet's ``Symbol.as_nd_ndarray``): itself."""
        return self

    def __getattr__(self, attr):
        # ``x.exp()``, ``x.sum(axis=0)``, ``x.reshape((2, 3))``: any op, with this symbol
        # as its first input.
        if attr.startswith("_"):
            raise AttributeError(attr)
        fn = _registry.REGISTRY.get(attr) or composites().get("np." + attr) \
            or composites().get("npx." + attr)
        if fn is None:
            raise AttributeError("'Symbol' object has no attribute %r" % attr)
        op = _hook("symbol_op")(attr if is_primitive(fn) and fn.name == attr else
                            ("np." + attr if ("np." + attr) in composites() else "npx." + attr))
        # The table op of a NumPy method may lack some of NumPy's keywords (x.var(dtype=),
        # x.cumsum(dtype=)); a call using one goes to the NumPy function, as x.var does on
        # arrays.
        numpy_fn = composites().get("np." + attr)
        if not (is_primitive(fn) and numpy_fn is not None and not is_primitive(numpy_fn)):
            numpy_fn = None

        def method(*args, **kwargs):
            if numpy_fn is not None and set(kwargs) - set(fn.param_names) - {"name", "attr"}:
                return _hook("symbol_op")("np." + attr)(self, *args, **kwargs)
            if is_primitive(fn) and fn.n_in < 0:
                return op([self] + list(args[0]) if args else [self], *args[1:], **kwargs)
            return op(self, *args, **kwargs)
        method.__name__ = attr
        return method

    # ------------------------------------------------------------ inference
    def _shape_dict(self, args, kwargs, what):
        names = self.list_arguments()
        inputs = self.list_inputs()
        given = {}
        if args:
            if len(args) > len(names):
                raise ValueError("%s: %d positional values for %d arguments"
                                 % (what, len(args), len(names)))
            for n, v in zip(names, args):
                if v is not None:
                    given[n] = v
        for k, v in kwargs.items():
            if k not in inputs:
                raise ValueError("%s: %r is not an argument of this symbol (arguments: %s)"
                                 % (what, k, inputs))
            given[k] = v
        return given

    def _split_inputs(self):
        nodes = dfs_nodes(self._entries)
        aux = aux_ids(nodes)
        variables = [n for n in nodes if n.op == VARIABLE]
        return ([n for n in variables if n.id not in aux], [n for n in variables if n.id in aux])

    def _infer(self, shapes, dtypes, partial):
        info = infer(self._entries, shapes, dtypes, partial=partial)
        args, aux = self._split_inputs()
        return ([info[(n.id, 0)] for n in args], [info[(n.id, i)] for n, i in self._entries],
                [info[(n.id, 0)] for n in aux])

    def infer_shape(self, *args, **kwargs):
        """Infer the shapes of the arguments and outputs from the given argument shapes.

        Parameters
        ----------
        *args, **kwargs : tuple
            Shapes of arguments, by position (``list_arguments`` order) or by name. Shapes
            declared with ``var(..., shape=)`` are used for the others.

        Returns
        -------
        arg_shapes, out_shapes, aux_shapes : list of tuple
            ``(None, None, None)`` if some argument's shape is unknown (as in MXNet; see
            :meth:`infer_shape_partial`). Inconsistent shapes raise MXNet's error, an
            ``MXNetError`` that is also a ``ValueError``, listing the given shapes and naming
            the op (Note [Shape inference]).
        """
        shapes = {k: tuple(int(s) for s in v)
                  for k, v in self._shape_dict(args, kwargs, "infer_shape").items()}
        try:
            arg_info, out_info, aux_info = self._infer_named(shapes, "infer_shape", False)
        except _Unknown:
            return None, None, None
        return ([s for s, _ in arg_info], [s for s, _ in out_info],
                [s for s, _ in aux_info])

    def _infer_named(self, shapes, what, partial):
        """``_infer`` whose inconsistent shapes raise as MXNet's: an ``MXNetError`` (also a
        ``ValueError``) listing the given arguments before the failing op's message."""
        try:
            return self._infer(shapes, {}, partial=partial)
        except _Unknown:
            raise
        except ValueError as exc:
            given = "".join("  %s: %s\n" % (k, v) for k, v in shapes.items())
            raise MXNetValueError("%s error. Arguments:\n%s%s" % (what, given, exc)) from None

    def infer_shape_partial(self, *args, **kwargs):
        """Like :meth:`infer_shape`, with ``None`` for shapes that cannot be inferred."""
        shapes = {k: tuple(int(s) for s in v)
                  for k, v in self._shape_dict(args, kwargs, "infer_shape_partial").items()}
        arg_info, out_info, aux_info = self._infer_named(shapes, "infer_shape_partial", True)
        return ([s for s, _ in arg_info], [s for s, _ in out_info],
                [s for s, _ in aux_info])

    def infer_type(self, *args, **kwargs):
        """Infer the dtypes of the arguments and outputs from the given argument dtypes.

        Arguments without a given or declared dtype are float32. Output dtypes are exact
        when argument shapes are declared; otherwise each op is probed with 0-d inputs, and
        an op that needs more dimensions falls back to NumPy's type promotion.

        Returns
        -------
        arg_types, out_types, aux_types : list of numpy.dtype
        """
        dtypes = {k: np.dtype(v)
                  for k, v in self._shape_dict(args, kwargs, "infer_type").items()}
        try:
            arg_info, out_info, aux_info = self._infer({}, dtypes, partial=False)
        except (_Unknown, ValueError):
            arg_info, out_info, aux_info = self._infer_types_only(dtypes)
        return ([d for _, d in arg_info], [d for _, d in out_info],
                [d for _, d in aux_info])

    def _infer_types_only(self, dtypes):
        info = {}
        for node in topo_nodes(self._entries):
            if node.op == VARIABLE:
                info[(node.id, 0)] = np.dtype(dtypes.get(node.name, node.attrs.get("dtype"))
                                              or np.float32)
                continue
            if node.op == CONSTANT:
                info[(node.id, 0)] = np.asarray(node.value).dtype
                continue
            if node.op.startswith("mx.") and node.inputs:
                # MXNet's operators give their weights (and labels, states) the data's dtype.
                first = info.get((node.inputs[0][0].id, node.inputs[0][1]))
                for p, _ in node.inputs[1:]:
                    if (p.op == VARIABLE and p.name not in dtypes
                            and p.attrs.get("dtype") is None and first is not None):
                        info[(p.id, 0)] = first
            ins = [node_.value if node_.op == CONSTANT else np.zeros((), info[(node_.id, i)])
                   for node_, i in node.inputs]
            try:
                outs = _run_probe(node.fn, node, ins, node.params, node.name)
                kinds = [o.dtype for o in outs]
            except ValueError:
                common = np.result_type(*[np.asarray(v).dtype for v in ins]) if ins \
                    else np.dtype(np.float32)
                kinds = [common] * node.num_outputs
            for i, d in enumerate(kinds):
                info[(node.id, i)] = d
        args, aux = self._split_inputs()
        return ([(None, info[(n.id, 0)]) for n in args],
                [(None, info[(n.id, i)]) for n, i in self._entries],
                [(None, info[(n.id, 0)]) for n in aux])

    # ------------------------------------------------------------ serialization and binding
    def debug_str(self):
        r"""The graph as MXNet's ``Symbol.debug_str`` prints it: the outputs, then every
        variable and every operator in the order they run, with its inputs and attributes.

        Examples
        --------
        >>> import fastgrad as mx
        >>> x = mx.sym.var('x')
        >>> text = mx.sym.Activation(x, act_type='relu', name='act').debug_str()
        >>> print(text.expandtabs(4))
        Symbol Outputs:
            output[0]=act(0)
        Variable:x
        --------------------
        Op:Activation, Name=act
        Inputs:
            arg[0]=x(0) version=0
        Attrs:
            act_type=relu
        <BLANKLINE>
        """
        doc = json.loads(self.tojson())
        nodes = doc["nodes"]
        lines = ["Symbol Outputs:"]
        lines += ["\toutput[%d]=%s(%d)" % (i, nodes[n]["name"], k)
                  for i, (n, k, *_) in enumerate(doc["heads"])]
        for node in nodes:
            if node["op"] == "null":
                lines.append("Variable:%s" % node["name"])
                continue
            lines += ["-" * 20, "Op:%s, Name=%s" % (node["op"], node["name"]), "Inputs:"]
            for i, (n, k, *_) in enumerate(node["inputs"]):
                source = nodes[n]
                lines.append("\targ[%d]=%s(%d)%s" % (i, source["name"], k,
                                                     " version=0" if source["op"] == "null"
                                                     else ""))
            attrs = node.get("attrs") or node.get("param") or {}
            if attrs:
                lines.append("Attrs:")
                lines += ["\t%s=%s" % (key, attrs[key]) for key in sorted(attrs)]
        return "\n".join(lines) + "\n"

    def tojson(self, remove_amp_cast=True, layout="auto"):
        """The graph as JSON text (see :func:`fastgrad.sym.load_json`).

        Parameters
        ----------
        remove_amp_cast : bool
            Accepted for MXNet compatibility (fastgrad inserts no casts).
        layout : {'auto', 'mxnet', 'fastgrad'}
            ``'auto'`` writes MXNet's format when MXNet can read the graph, else fastgrad's
            (Note [MXNet JSON] in ``fastgrad/symbol/_mxnet_json.py``); ``'mxnet'`` raises
            ``ValueError`` naming a node MXNet cannot hold.
        """
        return _hook("to_json")(self, layout)

    def save(self, fname, remove_amp_cast=True, layout="auto"):
        """Write :meth:`tojson` to the file ``fname`` (MXNet's ``model-symbol.json``)."""
        with open(fname, "w", encoding="utf-8") as f:
            f.write(self.tojson(remove_amp_cast, layout))

    def bind(self, ctx, args, args_grad=None, grad_req="write", aux_states=None,
             group2ctx=None, shared_exec=None, static_alloc=True):
        """Bind argument values to this symbol and return an :class:`fastgrad.executor.Executor`.

        Parameters
        ----------
        ctx : Context
            Accepted for MXNet compatibility (fastgrad runs on the CPU).
        args : dict of str to array, or list of array
            Argument values (copied in), by name or in ``list_arguments()`` order.
        args_grad : dict or list of array, optional
            Buffers that receive the gradients. Allocated when not given.
        grad_req : str, list of str or dict of str to str
            ``'write'``, ``'add'`` or ``'null'``, for all, for each (in order), or by name.
        aux_states : dict or list, optional
            Auxiliary states (fastgrad ops have none; must be empty).
        """
        return _hook("executor")(self, ctx, args, args_grad, grad_req, aux_states)

    def _bind(self, ctx, args, args_grad=None, grad_req="write", aux_states=None):
        """The same as :meth:`bind` (MXNet 2.x's name)."""
        return self.bind(ctx, args, args_grad, grad_req, aux_states)

    def simple_bind(self, ctx, grad_req="write", type_dict=None, stype_dict=None,
                    group2ctx=None, shared_arg_names=None, shared_exec=None,
                    shared_buffer=None, **kwargs):
        """Bind with zero-filled arguments, gradients and auxiliary states whose shapes and
        dtypes are inferred from the shapes given in ``kwargs`` (and ``type_dict``).

        Parameters
        ----------
        ctx : Context
            Accepted for MXNet compatibility (fastgrad runs on the CPU).
        grad_req : str, list or dict
            As in :meth:`bind`.
        type_dict : dict of str to dtype, optional
            Dtypes of inputs (float32 when neither given nor declared).
        **kwargs : tuple of int
            Shapes of inputs by name; the others are inferred (``fc1_weight`` from the data
            and ``num_hidden``) or declared on the variables.

        Raises
        ------
        ValueError
            If some input's shape cannot be inferred (the error names it).
        """
        if stype_dict and any(v != "default" for v in dict(stype_dict).values()):
            raise ValueError("simple_bind: fastgrad arrays are dense; stype_dict must be "
                             "'default'")
        shapes = {k: tuple(int(d) for d in v)
                  for k, v in self._shape_dict((), kwargs, "simple_bind").items()}
        dtypes = {k: np.dtype(v)
                  for k, v in self._shape_dict((), dict(type_dict or {}), "simple_bind").items()}
        try:
            arg_info, _, aux_info = self._infer(shapes, dtypes, partial=False)
        except _Unknown as exc:
            raise ValueError("simple_bind: cannot infer the shape of input %r; pass it as "
                             "simple_bind(..., %s=shape)" % (str(exc), str(exc))) from None
        args, aux = self._split_inputs()
        arg_values = {n.name: _wrap(np.zeros(s, d), NDArray) for n, (s, d) in zip(args, arg_info)}
        aux_values = {n.name: _wrap(np.zeros(s, d), NDArray) for n, (s, d) in zip(aux, aux_info)}
        return self.bind(ctx, arg_values, grad_req=grad_req, aux_states=aux_values)

    def _simple_bind(self, ctx, grad_req="write", type_dict=None, stype_dict=None,
                     group2ctx=None, shared_arg_names=None, shared_exec=None,
                     shared_buffer=None, **kwargs):
        """The same as :meth:`simple_bind` (MXNet 2.x's name)."""
        return self.simple_bind(ctx, grad_req, type_dict, stype_dict, group2ctx,
                                shared_arg_names, shared_exec, shared_buffer, **kwargs)

    def eval(self, ctx=None, **kwargs):
        """Bind ``kwargs`` (input name to array) and run forward: the list of outputs.

        Examples
        --------
        >>> import fastgrad as mx
        >>> x = mx.sym.var('x')
        >>> (x * 2).eval(x=mx.nd.array([1, 2]))[0].asnumpy()
        array([2., 4.], dtype=float32)
        """
        args, aux = self._split_inputs()
        aux_names = {n.name for n in aux}
        arg_values = {k: v for k, v in kwargs.items() if k not in aux_names}
        aux_values = {k: v for k, v in kwargs.items() if k in aux_names}
        ex = self.bind(ctx, arg_values, grad_req="null", aux_states=aux_values)
        return ex.forward()


def _binary(opname, reflected):
    def method(self, other):
        prim = _registry.REGISTRY[opname]
        if reflected:
            return apply_primitive(prim, (other, self), {})
        return apply_primitive(prim, (self, other), {})
    return method


for _m, _op in _BINARY.items():
    setattr(Symbol, _m, _binary(_op, False))
for _m, _op in _REFLECTED.items():
    setattr(Symbol, _m, _binary(_op, True))
del _m, _op
