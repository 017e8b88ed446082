"""Reading and writing MXNet's own JSON graph format (``Symbol.tojson``/``sym.load``).

Note [MXNet JSON]
~~~~~~~~~~~~~~~~~
MXNet 1.x and 2.x save a symbol as one object::

    {"nodes": [{"op": "null", "name": "data", "inputs": []},
               {"op": "null", "name": "fc1_weight", "attrs": {"num_hidden": "8"},
                "inputs": []},
               {"op": "FullyConnected", "name": "fc1", "attrs": {"num_hidden": "8"},
                "inputs": [[0, 0, 0], [1, 0, 0], [2, 0, 0]]}, ...],
     "arg_nodes": [0, 1, ...],          # the variable nodes (arguments and aux states)
     "node_row_ptr": [0, 1, 2, 3, ...], # running count of every node's outputs
     "heads": [[5, 0, 0]],              # [node, output, version] of each output
     "attrs": {"mxnet_version": ["int", 10901]}}

Nodes come in a depth-first order (each after its inputs); an input is ``[node, output,
version]`` (older files write ``[node, output]``); every attribute is a string, the op's
parameters as MXNet prints them (``"(3, 3)"``, ``"True"``) and the variables' ``__shape__``,
``__dtype__`` (MXNet's type number), ``__init__``, ``__lr_mult__``... Files of MXNet before
1.0 keep the parameters under ``param`` and user attributes under ``attr`` and leave out the
auxiliary states; they are read as MXNet upgrades them (``lr_mult`` becomes ``__lr_mult__``,
an operator's ``weight_lr_mult`` moves to its weight variable, and ``<node>_moving_mean``
variables are added with the operator's attributes).

MXNet 2.x writes the same layout (``mxnet_version`` 20000 and up); its layer operators keep
their 1.x names, and the names of its common NumPy operators (``_npi_add``,
``_npi_multiply_scalar``, ``_npi_exp``, ...) are aliases in the catalogue. Other 2.x NumPy
operators (``_np_sum``, ``_npi_mean``, ...) are not read yet.

Reading maps each op to the operator catalogue of ``_legacy.py`` (by name or alias) and parses
its attributes with the catalogue's checked parsers; an op outside the catalogue, an unknown
parameter, a wrong number of inputs or an input that is not an earlier node is a
``ValueError`` naming the node. Nothing is evaluated. A node may only use outputs MXNet shows
(``BatchNorm``'s hidden mean and variance outputs are not available in fastgrad).

Writing uses this format when every node of the symbol is a variable, an MXNet operator or
a fastgrad table op with an MXNet twin (``exp``, ``sum``, ``x + y`` as ``broadcast_add``,
``x * 2`` as ``_mul_scalar``: see :func:`translate`), so MXNet loads what fastgrad saves.
Any other symbol (``sym.npx.softmax``, indexing, array constants) is written in fastgrad's
format (Note [Symbol JSON] in ``_json.py``), which MXNet cannot read; loading it back in
fastgrad works either way.
"""

import json

import numpy as np

from fastgrad.base import MXNetValueError
from fastgrad._ops._registry import REGISTRY
from fastgrad.symbol import _legacy
from fastgrad.symbol._graph import Symbol, SymNode, dfs_nodes, aux_positions
from fastgrad.symbol._ops import VARIABLE, CONSTANT
from fastgrad.symbol._values import InputRef

MXNET_VERSION = 10901
_MAX_OUTPUTS = 1 << 16      # a file cannot make bind allocate without bound
_MAX_NODES = 10_000_000
# Attributes MXNet keeps as __key__ (not operator parameters).
HIDDEN_KEYS = ("ctx_group", "lr_mult", "wd_mult", "force_mirroring", "mirror_stage",
               "profiler_scope")

# MXNet's type numbers (mshadow's type flags) and the NumPy dtypes they stand for.
TYPE_FLAGS = {0: "float32", 1: "float64", 2: "float16", 3: "uint8", 4: "int32", 5: "int8",
              6: "int64", 7: "bool", 8: "int16", 9: "uint16", 10: "uint32", 11: "uint64"}
FLAG_OF_DTYPE = {np.dtype(v): k for k, v in TYPE_FLAGS.items()}


def is_mxnet_document(doc):
    """Whether a parsed JSON document is in MXNet's layout (not fastgrad's)."""
    return isinstance(doc, dict) and "format" not in doc and "nodes" in doc \
        and ("arg_nodes" in doc or "node_row_ptr" in doc)


# fastgrad table ops with an MXNet operator of the same meaning (written under MXNet's name).
_SAME_UNARY = frozenset({
    "abs", "cbrt", "ceil", "cos", "erf", "exp", "expm1", "floor", "log", "log1p", "negative",
    "reciprocal", "relu", "rsqrt", "sigmoid", "sign", "sin", "softsign", "sqrt", "square",
    "tanh"})
_REDUCTIONS = frozenset({"sum", "mean", "max", "min", "prod"})
_BINARY = {"add": ("broadcast_add", "_plus_scalar", "_plus_scalar"),
           "subtract": ("broadcast_sub", "_minus_scalar", "_rminus_scalar"),
           "multiply": ("broadcast_mul", "_mul_scalar", "_mul_scalar"),
           "divide": ("broadcast_div", "_div_scalar", "_rdiv_scalar"),
           "power": ("broadcast_power", "_power_scalar", "_rpower_scalar"),
           "maximum": ("broadcast_maximum", "_maximum_scalar", "_maximum_scalar"),
           "minimum": ("broadcast_minimum", "_minimum_scalar", "_minimum_scalar")}


def _scalar_constant(entry):
    node = entry[0]
    if node.op != CONSTANT:
        return None
    v = np.asarray(node.value)
    if v.ndim != 0 or v.dtype.kind not in "biuf":
        return None
    return v[()]


def translate(node):
    """``(MXNet op, attrs, inputs)`` for a node MXNet can hold, else ``None`` (see
    :func:`_translate`); a table op's user attributes are kept."""
    out = _translate(node)
    if out is not None and node.op != VARIABLE and not node.op.startswith("mx."):
        attrs = dict(out[1])
        # MXNet keeps an operator's user attributes as __key__ (its parameters are plain).
        attrs.update({(k if k.startswith("__") and k.endswith("__") else "__%s__" % k): str(v)
                      for k, v in ((str(k), v) for k, v in node.attrs.items())})
        out = (out[0], attrs, out[2])
    return out


def _translate(node):
    """``(MXNet op, attrs, inputs)`` for a node MXNet can hold, else ``None``.

    Variables and MXNet operators are written as they are; fastgrad table ops that have an
    MXNet twin are written as it (``add`` of two symbols as ``broadcast_add``, of a symbol
    and a number as ``_plus_scalar``; ``exp`` as ``exp``; ``sum(axis=, keepdims=)`` as
    ``sum``)."""
    if node.op == VARIABLE:
        return "null", _variable_attrs(node), []
    if node.op.startswith("mx."):
        spec = _legacy.CATALOGUE[node.op[3:]]
        given = node.params[1]
        attrs = {k: _legacy.format_attr(v) for k, v in given.items()}
        attrs.update({str(k): str(v) for k, v in node.attrs.items()})
        return spec.name, attrs, list(node.inputs)
    if node.op in _SAME_UNARY:
        if _scalar_constant(node.inputs[0]) is not None or node.inputs[0][0].op == CONSTANT:
            return None
        return node.op, {}, list(node.inputs)
    if node.op in _REDUCTIONS or node.op in ("softmax", "log_softmax", "transpose"):
        if node.inputs[0][0].op == CONSTANT:
            return None
        params = dict(zip(REGISTRY[node.op].param_names, node.params))
        attrs = {k: _legacy.format_attr(v) for k, v in params.items()
                 if v is not None and not (k == "keepdims" and v is False)}
        return node.op, attrs, list(node.inputs)
    if node.op in _BINARY:
        both, right, left = _BINARY[node.op]
        a, b = node.inputs
        sa, sb = _scalar_constant(a), _scalar_constant(b)
        if a[0].op != CONSTANT and b[0].op != CONSTANT:
            return both, {}, [a, b]
        if sb is not None and a[0].op != CONSTANT:
            return right, {"scalar": repr(float(sb))}, [a]
        if sa is not None and b[0].op != CONSTANT:
            return left, {"scalar": repr(float(sa))}, [b]
    return None


def first_unrepresentable(symbol):
    """The first node MXNet's format cannot hold, or ``None``."""
    for n in dfs_nodes(symbol._entries):
        if n.op == CONSTANT:
            continue
        t = translate(n)
        if t is None:
            return n
        # A constant is representable only when it was folded into a scalar attribute.
        kept = {p.id for p, _ in t[2]}
        for p, _ in n.inputs:
            if p.op == CONSTANT and p.id in kept:
                return p
    for n, _ in symbol._entries:
        if n.op == CONSTANT:
            return n
    return None


def representable(symbol):
    """Whether every node of ``symbol`` can be written in MXNet's format."""
    return first_unrepresentable(symbol) is None


# ---------------------------------------------------------------- writing

def _variable_attrs(node):
    attrs = {}
    for k, v in node.attrs.items():
        if k == "shape":
            if v is not None:
                attrs["__shape__"] = _legacy.format_attr(tuple(v))
        elif k == "dtype":
            if v is not None:
                flag = FLAG_OF_DTYPE.get(np.dtype(v))
                if flag is None:
                    raise ValueError("tojson: variable %r has dtype %s, which MXNet has no "
                                     "type number for" % (node.name, np.dtype(v)))
                attrs["__dtype__"] = str(flag)
        else:
            attrs[k] = str(v)
    return attrs


def to_mxnet_json(symbol):
    """MXNet-format JSON text for a symbol of variables and MXNet operators."""
    nodes = [n for n in dfs_nodes(symbol._entries) if n.op != CONSTANT]
    index = {n.id: i for i, n in enumerate(nodes)}
    items = []
    row_ptr = [0]
    for n in nodes:
        op, attrs, inputs = translate(n)
        item = {"op": op, "name": n.name}
        total = n.num_outputs
        if n.op.startswith("mx."):
            spec = _legacy.CATALOGUE[n.op[3:]]
            total = spec.total_outputs(spec.full(n.params[1]))
        if attrs:
            item["attrs"] = dict(sorted(attrs.items()))
        aux = aux_positions(n)
        item["inputs"] = [[index[p.id], k, 1 if i in aux else 0]
                          for i, (p, k) in enumerate(inputs)]
        items.append(item)
        row_ptr.append(row_ptr[-1] + total)
    doc = {"nodes": items,
           "arg_nodes": [i for i, n in enumerate(nodes) if n.op == VARIABLE],
           "node_row_ptr": row_ptr,
           "heads": [[index[n.id], k, 0] for n, k in symbol._entries],
           "attrs": {"mxnet_version": ["int", MXNET_VERSION]}}
    return json.dumps(doc, indent=2)


# ---------------------------------------------------------------- reading

def _fail(msg, *args):
    # MXNet raises MXNetError for a graph it cannot load; this is also a ValueError.
    raise MXNetValueError("load_json: " + (msg % args if args else msg))


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _string_attrs(item, where):
    attrs = {}
    for key in ("param", "attr", "attrs"):
        part = item.get(key)
        if part is None:
            continue
        if not isinstance(part, dict):
            _fail("%s: %s must be an object", where, key)
        for k, v in part.items():
            if not isinstance(v, str):
                _fail("%s: attribute %r must be a string, got %r", where, k, v)
            attrs[k] = v
    return attrs


def _upgrade_hidden_keys(attrs, entries, is_variable):
    """MXNet's upgrade of old attributes: a hidden key (``lr_mult``) becomes ``__lr_mult__``;
    on an operator, ``<input>_lr_mult`` moves to that input's variable as ``__lr_mult__``
    (``weight_lr_mult`` of ``fc1`` to ``fc1_weight``). ``entries`` maps input names to
    entries for an operator."""
    out = {}
    for k, v in attrs.items():
        if k in HIDDEN_KEYS:
            out["__%s__" % k] = v
            continue
        moved = False
        for key in HIDDEN_KEYS:
            if not is_variable and k.endswith("_" + key) and len(k) > len(key) + 1:
                target = entries.get(k[:-len(key) - 1])
                if target is not None and target[0].op == VARIABLE:
                    target[0].attrs["__%s__" % key] = v
                    moved = True
                break
        if not moved:
            out[k] = v
    return out


def _parse_var_shape(text, where):
    try:
        shape = _legacy._parse_shape(text, where + " __shape__")
    except ValueError as exc:
        _fail("%s", exc)
    if any(d <= 0 for d in shape) or not shape:
        return None     # MXNet writes 0 (1.x) or -1 (numpy shapes) for an unknown size
    return shape


def _load_variable(item, name, where):
    attrs = _upgrade_hidden_keys(_string_attrs(item, where), {}, True)
    shape = dtype = None
    out = {}
    for k, v in attrs.items():
        if k == "__shape__":
            shape = _parse_var_shape(v, where)
        elif k == "__dtype__":
            try:
                flag = int(v)
            except ValueError:
                _fail("%s: __dtype__ must be MXNet's type number, got %r", where, v)
            if flag not in TYPE_FLAGS:
                _fail("%s: unknown MXNet type number %d", where, flag)
            dtype = np.dtype(TYPE_FLAGS[flag])
        else:
            out[k] = v
    out["shape"] = shape
    out["dtype"] = dtype
    return SymNode(VARIABLE, name, attrs=out)


def _load_operator(item, op, name, entries, where):
    spec = _legacy.CATALOGUE.get(op)
    if spec is None:
        _fail("%s: unknown MXNet operator %r (fastgrad implements %d of MXNet's operators; "
              "see fastgrad.sym.%s)", where, op, len(set(_legacy.CATALOGUE.values())),
              "FullyConnected")
    raw = _string_attrs(item, where)
    try:
        names = spec.input_names(spec.full(spec.parse(
            {k: v for k, v in raw.items() if k in spec.params}, where), where))
    except (TypeError, ValueError):
        names = []
    attrs = _upgrade_hidden_keys(raw, dict(zip(names, entries)), False)
    params = {k: v for k, v in attrs.items() if not (k.startswith("__") and k.endswith("__"))}
    extra = {k: v for k, v in attrs.items() if k not in params}
    try:
        given = spec.parse(params, "%s (%s)" % (where, spec.name))
        full = spec.full(given, "%s (%s)" % (where, spec.name))
    except (TypeError, ValueError) as exc:
        _fail("%s", exc)
    if spec.variadic:
        if given.get("num_args", len(entries)) != len(entries):
            _fail("%s: num_args=%s but the node has %d inputs", where, given["num_args"],
                  len(entries))
        given.setdefault("num_args", len(entries))
    else:
        names = spec.input_names(full)
        missing = names[len(entries):]
        if missing and all(n in spec.aux for n in missing):
            # Files before 1.0 leave out the auxiliary states; MXNet adds them on loading.
            # ... with the operator's attributes, as MXNet's upgrade does.
            entries = list(entries)
            for n in missing:
                var_attrs = dict(attrs, shape=None, dtype=None)
                if n in spec.var_attrs:
                    var_attrs["__init__"] = spec.var_attrs[n]
                entries.append((SymNode(VARIABLE, "%s_%s" % (name, n), attrs=var_attrs), 0))
        elif len(entries) != len(names):
            _fail("%s: %s takes %d inputs (%s), the node has %d", where, spec.name,
                  len(names), ", ".join(names), len(entries))
    n_out = spec.num_outputs(full)
    if not 1 <= n_out <= _MAX_OUTPUTS:
        _fail("%s: %d outputs (fastgrad reads 1 to %d)", where, n_out, _MAX_OUTPUTS)
    node = SymNode("mx." + spec.name, name, entries,
                   (tuple(InputRef(i) for i in range(len(entries))), dict(sorted(given.items()))),
                   attrs=extra, num_outputs=n_out)
    return node


def load_mxnet(doc):
    """The Symbol of a parsed MXNet-format document (Note [MXNet JSON])."""
    items = doc.get("nodes")
    if not isinstance(items, list) or not items:
        _fail("nodes must be a non-empty list")
    if len(items) > _MAX_NODES:
        _fail("too many nodes (%d)", len(items))
    nodes = []
    names = set()
    for i, item in enumerate(items):
        where = "node %d" % i
        if not isinstance(item, dict):
            _fail("%s must be an object", where)
        op, name = item.get("op"), item.get("name")
        if not isinstance(op, str):
            _fail("%s: op must be a string", where)
        if not isinstance(name, str) or not name:
            _fail("%s: name must be a non-empty string", where)
        where = "node %d (%r, op %r)" % (i, name, op)
        inputs = item.get("inputs", [])
        if not isinstance(inputs, list):
            _fail("%s: inputs must be a list", where)
        entries = []
        for j, ref in enumerate(inputs):
            if not (isinstance(ref, list) and len(ref) in (2, 3) and all(_is_int(r) for r in ref)):
                _fail("%s: input %d must be [node, output, version]", where, j)
            src, k = ref[0], ref[1]
            if not 0 <= src < i:
                _fail("%s: input %d refers to node %d, which is not an earlier node",
                      where, j, src)
            if not 0 <= k < nodes[src].num_outputs:
                _fail("%s: input %d refers to output %d of node %d (%r), which has %d visible "
                      "output(s)", where, j, k, src, nodes[src].name, nodes[src].num_outputs)
            entries.append((nodes[src], k))
        if op == "null":
            if entries:
                _fail("%s: a variable has no inputs", where)
            if name in names:
                _fail("%s: duplicate variable name %r", where, name)
            names.add(name)
            nodes.append(_load_variable(item, name, where))
        else:
            nodes.append(_load_operator(item, op, name, entries, where))
    heads = doc.get("heads")
    if not isinstance(heads, list) or not heads:
        _fail("heads must be a non-empty list")
    out = []
    for j, ref in enumerate(heads):
        if not (isinstance(ref, list) and len(ref) in (2, 3) and all(_is_int(r) for r in ref)):
            _fail("head %d must be [node, output, version]", j)
        src, k = ref[0], ref[1]
        if not 0 <= src < len(nodes) or not 0 <= k < nodes[src].num_outputs:
            _fail("head %d refers to a missing node or output %r", j, ref)
        out.append((nodes[src], k))
    return Symbol(out)
