"""Saving and loading symbols as JSON (fastgrad's format; MXNet's is in ``_mxnet_json.py``).

Note [Symbol JSON]
~~~~~~~~~~~~~~~~~~
The format is one object::

    {"format": "fastgrad-symbol", "version": 1,
     "nodes": [{"op": "null", "name": "x", "inputs": [], "attrs": {...}},
               {"op": "_const", "name": "const0", "inputs": [], "value": <value>},
               {"op": "exp", "name": "e", "inputs": [[0, 0]], "params": {"...": <value>}},
               {"op": "npx.softmax", "name": "softmax0", "inputs": [[1, 0]],
                "call": {"args": [...], "kwargs": {...}}, "num_outputs": 1}],
     "heads": [[2, 0]]}

Nodes are listed in creation order (Note [Symbol graph]) and an input is ``[node index,
output index]`` of an earlier node, so a file cannot describe a cycle. Values are encoded as in
Note [Symbol values]. Loading parses with ``json`` and then checks everything before building
a single node: the op must be in the registry or the catalogue of compositions, parameters must
be exactly the op's parameters, input counts and output indices must match, argument names must
be unique. Any violation is a ``ValueError`` that names the node. Nothing in the text is ever
evaluated, imported or unpickled.
"""

import json

import numpy as np

from fastgrad.base import MXNetValueError
from fastgrad._core._array import REQUIRED
from fastgrad._ops._registry import REGISTRY
from fastgrad.symbol import _values, _mxnet_json
from fastgrad.symbol._graph import Symbol, SymNode, topo_nodes, _count_outputs
from fastgrad.symbol._ops import VARIABLE, CONSTANT, composites

FORMAT = "fastgrad-symbol"
VERSION = 1
_MAX_NODES = 10_000_000


def _node_json(node, index):
    d = {"op": node.op, "name": node.name,
         "inputs": [[index[p.id], k] for p, k in node.inputs]}
    if node.op == VARIABLE:
        attrs = {}
        for k, v in node.attrs.items():
            if k == "shape":
                attrs[k] = None if v is None else list(v)
            elif k == "dtype":
                attrs[k] = None if v is None else np.dtype(v).str
            else:
                attrs[k] = v
        d["attrs"] = attrs
    elif node.op == CONSTANT:
        d["value"] = _values.encode(node.value, node.name)
    elif node.op in REGISTRY:
        prim = REGISTRY[node.op]
        d["params"] = {k: _values.encode(v, node.name)
                       for k, v in zip(prim.param_names, node.params)}
        d["num_outputs"] = node.num_outputs
        if node.attrs:
            d["attrs"] = dict(node.attrs)
    else:
        targs, tkwargs = node.params
        d["call"] = {"args": [_values.encode(a, node.name) for a in targs],
                     "kwargs": {k: _values.encode(v, node.name) for k, v in tkwargs.items()}}
        d["num_outputs"] = node.num_outputs
        if node.attrs:
            d["attrs"] = dict(node.attrs)
    return d


def to_json(symbol, layout="auto"):
    """JSON text for ``symbol``: MXNet's format when MXNet can read the graph (Note [MXNet
    JSON] in ``_mxnet_json.py``), else fastgrad's (Note [Symbol JSON]); ``layout`` forces
    one ('mxnet' or 'fastgrad')."""
    if layout not in ("auto", "mxnet", "fastgrad"):
        raise ValueError("tojson: layout must be 'auto', 'mxnet' or 'fastgrad', got %r"
                         % (layout,))
    if layout == "mxnet":
        bad = _mxnet_json.first_unrepresentable(symbol)
        if bad is not None:
            raise ValueError("tojson(layout='mxnet'): node %r (op %r) has no MXNet equivalent"
                             % (bad.name, bad.op))
    if layout != "fastgrad" and _mxnet_json.representable(symbol):
        return _mxnet_json.to_mxnet_json(symbol)
    nodes = topo_nodes(symbol._entries)
    index = {n.id: i for i, n in enumerate(nodes)}
    doc = {"format": FORMAT, "version": VERSION,
           "nodes": [_node_json(n, index) for n in nodes],
           "heads": [[index[n.id], k] for n, k in symbol._entries]}
    return json.dumps(doc, indent=1, sort_keys=False, allow_nan=False)


def _fail(msg, *args):
    # MXNet raises MXNetError for a graph it cannot load; this is also a ValueError.
    raise MXNetValueError("load_json: " + (msg % args if args else msg))


def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _check_keys(d, required, optional, where):
    if not isinstance(d, dict):
        _fail("%s must be an object", where)
    missing = required - set(d)
    extra = set(d) - required - optional
    if missing:
        _fail("%s is missing %s", where, sorted(missing))
    if extra:
        _fail("%s has unknown keys %s", where, sorted(extra))


def _load_var_attrs(attrs, where):
    if not isinstance(attrs, dict):
        _fail("%s: attrs must be an object", where)
    out = {}
    for k, v in attrs.items():
        if k == "shape":
            if v is not None and not (isinstance(v, list) and all(_is_int(s) and s >= 0
                                                                   for s in v)):
                _fail("%s: shape must be null or a list of non-negative integers", where)
            out[k] = None if v is None else tuple(v)
        elif k == "dtype":
            out[k] = None if v is None else _values._check_dtype(v, "load_json: " + where)
        elif isinstance(v, str):
            out[k] = v
        else:
            _fail("%s: attribute %r must be a string", where, k)
    out.setdefault("shape", None)
    out.setdefault("dtype", None)
    return out


def _load_str_attrs(attrs, where):
    if not isinstance(attrs, dict) or not all(isinstance(v, str) for v in attrs.values()):
        _fail("%s: attrs must be an object of strings", where)
    return dict(attrs)


def load_json(json_str):
    """Load a symbol saved with :meth:`Symbol.tojson`, or by MXNet 1.x/2.x.

    Parameters
    ----------
    json_str : str
        The JSON text, in fastgrad's format (Note [Symbol JSON]) or MXNet's (Note [MXNet
        JSON] in ``fastgrad/symbol/_mxnet_json.py``).

    Returns
    -------
    Symbol

    Raises
    ------
    ValueError
        If the text is not valid JSON or does not describe a valid graph: unknown op, wrong
        parameters or inputs, an input referring to a later node, duplicate argument names,
        a malformed value. An MXNet operator fastgrad does not implement is named. Loading
        never executes code (Note [Symbol JSON]).
    """
    if isinstance(json_str, (bytes, bytearray)):
        json_str = json_str.decode("utf-8")
    if not isinstance(json_str, str):
        raise TypeError("load_json: expected a str, got %s" % type(json_str).__name__)
    try:
        doc = json.loads(json_str)
    except (ValueError, RecursionError) as exc:
        raise ValueError("load_json: not valid JSON: %s" % exc) from None
    if _mxnet_json.is_mxnet_document(doc):
        return _mxnet_json.load_mxnet(doc)
    _check_keys(doc, {"format", "version", "nodes", "heads"}, set(), "the document")
    if doc["format"] != FORMAT:
        _fail("format is %r, expected %r", doc["format"], FORMAT)
    if doc["version"] != VERSION:
        _fail("unsupported version %r (this fastgrad reads version %d)", doc["version"], VERSION)
    items = doc["nodes"]
    if not isinstance(items, list) or not items:
        _fail("nodes must be a non-empty list")
    if len(items) > _MAX_NODES:
        _fail("too many nodes (%d)", len(items))
    nodes = []
    arg_names = set()
    for i, item in enumerate(items):
        where = "node %d" % i
        if not isinstance(item, dict):
            _fail("%s must be an object", where)
        op = item.get("op")
        name = item.get("name")
        if not isinstance(op, str):
            _fail("%s: op must be a string", where)
        if not isinstance(name, str) or not name:
            _fail("%s: name must be a non-empty string", where)
        where = "node %d (%r, op %r)" % (i, name, op)
        inputs = item.get("inputs")
        if not isinstance(inputs, list):
            _fail("%s: inputs must be a list", where)
        entries = []
        for j, ref in enumerate(inputs):
            if not (isinstance(ref, list) and len(ref) == 2 and _is_int(ref[0])
                    and _is_int(ref[1])):
                _fail("%s: input %d must be [node index, output index]", where, j)
            src, k = ref
            if not 0 <= src < i:
                _fail("%s: input %d refers to node %d, which is not an earlier node",
                      where, j, src)
            if not 0 <= k < nodes[src].num_outputs:
                _fail("%s: input %d refers to output %d of node %d, which has %d output(s)",
                      where, j, k, src, nodes[src].num_outputs)
            entries.append((nodes[src], k))
        nodes.append(_load_node(item, op, name, entries, where, arg_names))
    heads = doc["heads"]
    if not isinstance(heads, list) or not heads:
        _fail("heads must be a non-empty list")
    out = []
    for j, ref in enumerate(heads):
        if not (isinstance(ref, list) and len(ref) == 2 and _is_int(ref[0])
                and _is_int(ref[1])):
            _fail("head %d must be [node index, output index]", j)
        src, k = ref
        if not 0 <= src < len(nodes) or not 0 <= k < nodes[src].num_outputs:
            _fail("head %d refers to a missing node or output %r", j, ref)
        out.append((nodes[src], k))
    return Symbol(out)


def _load_node(item, op, name, entries, where, arg_names):
    if op == VARIABLE:
        _check_keys(item, {"op", "name", "inputs"}, {"attrs"}, where)
        if entries:
            _fail("%s: a variable has no inputs", where)
        if name in arg_names:
            _fail("%s: duplicate argument name %r", where, name)
        arg_names.add(name)
        return SymNode(VARIABLE, name, attrs=_load_var_attrs(item.get("attrs", {}), where))
    if op == CONSTANT:
        _check_keys(item, {"op", "name", "inputs", "value"}, set(), where)
        if entries:
            _fail("%s: a constant has no inputs", where)
        value = _values.decode(item["value"], "load_json: " + where)
        if _values.contains_input(value) or not isinstance(
                value, (bool, int, float, complex, np.ndarray, np.generic)):
            _fail("%s: a constant must be a number or an array", where)
        return SymNode(CONSTANT, name, value=value)
    n_out = item.get("num_outputs", 1)
    if not _is_int(n_out) or not 1 <= n_out <= _mxnet_json._MAX_OUTPUTS:
        _fail("%s: num_outputs must be an integer from 1 to %d", where,
              _mxnet_json._MAX_OUTPUTS)
    prim = REGISTRY.get(op)
    if prim is not None:
        _check_keys(item, {"op", "name", "inputs", "params"}, {"num_outputs", "attrs"}, where)
        attrs = _load_str_attrs(item.get("attrs", {}), where)
        if prim.n_in >= 0 and len(entries) != prim.n_in:
            _fail("%s: takes %d inputs, got %d", where, prim.n_in, len(entries))
        if prim.n_in < 0 and not entries:
            _fail("%s: needs at least one input", where)
        raw = item["params"]
        if not isinstance(raw, dict):
            _fail("%s: params must be an object", where)
        unknown = set(raw) - set(prim.param_names)
        if unknown:
            _fail("%s: unknown parameters %s (the op takes %s)", where, sorted(unknown),
                  list(prim.param_names))
        params = []
        for pname, default in zip(prim.param_names, prim.param_defaults):
            if pname in raw:
                v = _values.decode(raw[pname], "load_json: %s parameter %r" % (where, pname))
                if _values.contains_input(v):
                    _fail("%s: parameter %r holds an input placeholder", where, pname)
                params.append(v)
            elif default is REQUIRED:
                _fail("%s: missing required parameter %r", where, pname)
            else:
                params.append(default)
        if prim.n_out > 0 and n_out != prim.n_out:
            _fail("%s: the op has %d outputs, not %d", where, prim.n_out, n_out)
        if prim.n_out < 0:
            n_out = _count_checked(prim, entries, tuple(params), n_out)
        return SymNode(op, name, entries, tuple(params), attrs=attrs, num_outputs=n_out)
    if op in composites():
        _check_keys(item, {"op", "name", "inputs", "call"}, {"num_outputs", "attrs"}, where)
        attrs = _load_str_attrs(item.get("attrs", {}), where)
        call = item["call"]
        _check_keys(call, {"args", "kwargs"}, set(), where + " call")
        if not isinstance(call["args"], list) or not isinstance(call["kwargs"], dict):
            _fail("%s: call must have a list of args and an object of kwargs", where)
        targs = tuple(_values.decode(a, "load_json: " + where) for a in call["args"])
        tkwargs = {}
        for k, v in call["kwargs"].items():
            if not k.isidentifier():
                _fail("%s: keyword %r is not an identifier", where, k)
            tkwargs[k] = _values.decode(v, "load_json: " + where)
        used = _input_refs((targs, list(tkwargs.values())))
        if used != set(range(len(entries))):
            _fail("%s: the call uses inputs %s but the node has %d", where, sorted(used),
                  len(entries))
        return SymNode(op, name, entries, (targs, tkwargs), attrs=attrs, num_outputs=n_out)
    _fail("%s: unknown op %r", where, op)


def _input_refs(value, out=None):
    out = set() if out is None else out
    if isinstance(value, _values.InputRef):
        out.add(value.index)
    elif isinstance(value, (list, tuple)):
        for v in value:
            _input_refs(v, out)
    return out


def _count_checked(prim, entries, params, n_out):
    # A variable-output op: trust the stored count, but check it when shapes are known.
    try:
        counted = _count_outputs(prim, entries, params, None)
    except ValueError:
        return n_out
    if counted != n_out:
        _fail("op %r: stored num_outputs %d but its inputs give %d", prim.name, n_out, counted)
    return n_out


def load(fname):
    """Load a symbol from a file written by :meth:`Symbol.save`."""
    with open(fname, "r", encoding="utf-8") as f:
        return load_json(f.read())


fromjson = load_json
