"""The public functions of ``fastgrad.sym``: variables, groups and one function per op."""

import functools
import types

import numpy as np

from fastgrad._ops._registry import REGISTRY
from fastgrad._api import _mxnet_slicing as _slicing
from fastgrad.symbol._graph import (Symbol, SymNode, apply_primitive, apply_composite,
                                    constant, _auto_name, _as_entry)
from fastgrad.symbol._ops import VARIABLE, composites, is_primitive
from fastgrad.symbol._values import InputRef
from fastgrad.symbol import _legacy, _attribute
from fastgrad.symbol._mxnet_json import HIDDEN_KEYS


def var(name, attr=None, shape=None, dtype=None, init=None, stype=None, **kwargs):
    """A named argument of a symbol graph, given a value at ``bind``.

    Parameters
    ----------
    name : str
    attr : dict, optional
        Extra string attributes, kept in the JSON.
    shape : tuple of int, optional
        The argument's shape, used by ``infer_shape`` when no shape is passed.
    dtype : dtype, optional
        The argument's dtype (float32 when not declared).
    init : str or initializer, optional
        Kept as the ``__init__`` attribute, as MXNet does (fastgrad initializes nothing).
    stype, **kwargs
        ``stype`` must be dense; other keywords (``lr_mult=``) become ``__key__`` attributes.

    Examples
    --------
    >>> import fastgrad as mx
    >>> x = mx.sym.var('x', shape=(2, 3))
    >>> mx.sym.exp(x, name='e').list_outputs()
    ['e_output']
    """
    if not isinstance(name, str) or not name:
        raise TypeError("sym.var: name must be a non-empty string, got %r" % (name,))
    if stype not in (None, "default"):
        raise ValueError("sym.var: fastgrad arrays are dense; stype must be 'default'")
    attrs = dict(_attribute.current())
    attrs.update({str(k): str(v) for k, v in dict(attr or {}).items()})
    for k, v in kwargs.items():
        attrs["__%s__" % k] = str(v)
    if init is not None:
        # MXNet keeps the initializer as its JSON description (fastgrad does not use it).
        attrs["__init__"] = init if isinstance(init, str) else init.dumps()
    if shape is not None:
        if isinstance(shape, (int, np.integer)):
            shape = (int(shape),)
        shape = tuple(int(s) for s in shape)
        if any(s < 0 for s in shape):
            raise ValueError("sym.var(%r): negative dimension in shape %s" % (name, shape))
    attrs["shape"] = shape
    attrs["dtype"] = None if dtype is None else np.dtype(dtype)
    return Symbol.from_node(SymNode(VARIABLE, name, attrs=attrs))


Variable = var


def Group(symbols):
    """One symbol whose outputs are the outputs of ``symbols``, in order."""
    symbols = list(symbols)
    if not symbols:
        raise ValueError("sym.Group needs at least one symbol")
    entries = []
    for i, s in enumerate(symbols):
        if not isinstance(s, Symbol):
            raise TypeError("sym.Group: item %d is a %s, not a Symbol" % (i, type(s).__name__))
        entries.extend(s._entries)
    return Symbol(entries)


def const(value, name=None):
    """A constant stored in the graph (a number or an array)."""
    return Symbol.from_node(constant(value, name))


@functools.lru_cache(maxsize=None)
def symbol_op(opname):
    """The ``fastgrad.sym`` function of op ``opname`` (a registry name, ``np.f`` or ``npx.f``).

    The function takes the op's inputs (symbols, numbers or arrays) and parameters as the op
    does, plus ``name=`` (the node's name; automatic when omitted) and, for ops whose number
    of outputs depends on their inputs, ``num_outputs=``.
    """
    prim = REGISTRY.get(opname)
    if prim is not None:
        mxnet_twin = _legacy.CATALOGUE.get(opname)

        def op(*args, **kwargs):
            if mxnet_twin is not None and _wants_mxnet(prim, mxnet_twin, args, kwargs):
                return legacy_op(opname)(*args, **kwargs)
            return apply_primitive(prim, args, kwargs)
        params = ", ".join(prim.param_names)
        op.__doc__ = ("Symbolic ``%s`` (the fastgrad op of the same name)%s. Returns a Symbol."
                      % (opname, "; parameters: " + params if params else ""))
    else:
        fn = composites().get(opname)
        if fn is None:
            raise AttributeError("fastgrad.sym has no op %r" % opname)

        def op(*args, **kwargs):
            return apply_composite(opname, fn, args, kwargs)
        op.__doc__ = ("Symbolic ``fastgrad.%s``: the node calls it on the bound arrays.\n\n%s"
                      % (opname, fn.__doc__ or ""))
    op.__name__ = op.__qualname__ = opname.split(".")[-1]
    return op


class _Namespace(types.ModuleType):
    """``fastgrad.sym.np`` / ``fastgrad.sym.npx``: the module's functions as symbol ops."""

    def __init__(self, prefix):
        super().__init__("fastgrad.sym." + prefix)
        self._prefix = prefix

    def __getattr__(self, attr):
        if attr.startswith("__"):
            raise AttributeError(attr)
        if attr == "_Symbol":
            return Symbol       # MXNet's NumPy-mode symbol class (mx.sym.np._Symbol)
        full = self._prefix + "." + attr
        if full in composites():
            fn = composites()[full]
            if is_primitive(fn):
                return symbol_op(fn.name)
            return symbol_op(full)
        sub = full + "."
        if any(k.startswith(sub) for k in composites()):
            return _Namespace(full)
        raise AttributeError("fastgrad.sym.%s has no function %r" % (self._prefix, attr))

    def __dir__(self):
        p = self._prefix + "."
        return sorted({k[len(p):].split(".")[0] for k in composites() if k.startswith(p)})


np_ns = _Namespace("np")
npx_ns = _Namespace("npx")
image_ns = _Namespace("image")      # mx.sym.image: nd.image's functions as symbol ops


def op_names():
    """Every name ``fastgrad.sym`` resolves to an op (registry names and compositions)."""
    names = set(REGISTRY)
    for full, fn in composites().items():
        if full.startswith("image."):
            continue            # sym.image.<name> (image_ns), not sym.<name>
        short = full.split(".", 1)[1]
        if "." not in short and short not in names:
            names.add(short)
    return sorted(names)


# Names whose MXNet 1.x meaning differs from NumPy's: ``sym.concat(*data, dim=)``, ``sym.dot``
# (contracts the last axis of lhs with the first of rhs),
# ``sym.flatten`` (keeps the batch axis); ``sym.split`` is MXNet's when called with
# ``num_outputs=`` and no sections (see ``_split``).
_MXNET_FIRST = frozenset({"concat", "flatten", "dot", "pad"})


def resolve(attr):
    """``fastgrad.sym.<attr>``: a registry op, else a composite of ``np``, else of ``npx``,
    else an MXNet 1.x operator (Note [MXNet 1.x operators])."""
    if attr in _MXNET_FIRST:
        return legacy_op(attr)
    if attr == "split":
        return _split
    if attr == "slice":
        return _slice
    if attr == "image":
        return image_ns
    if attr in REGISTRY:
        return symbol_op(attr)
    for prefix in ("np.", "npx."):
        fn = composites().get(prefix + attr)
        if fn is not None:
            return symbol_op(fn.name) if is_primitive(fn) else symbol_op(prefix + attr)
    if attr in _legacy.CATALOGUE:
        return legacy_op(attr)
    if attr in ("zeros", "ones"):
        return legacy_op("_" + attr)
    raise AttributeError("module 'fastgrad.sym' has no attribute %r" % attr)


def _split(*args, **kwargs):
    """``sym.split``: MXNet's ``split(data, num_outputs, axis=1, squeeze_axis=False)`` when
    called with ``num_outputs=`` only, else NumPy's ``split(ary, indices_or_sections)``."""
    if len(args) == 1 and "num_outputs" in kwargs and "indices_or_sections" not in kwargs:
        return legacy_op("SliceChannel")(*args, **kwargs)
    return symbol_op("split")(*args, **kwargs)


def _slice(data, begin, end, step=(), name=None):
    """``sym.slice``: MXNet's ``slice(data, begin, end, step)`` (NumPy slicing of the leading
    axes; ``None`` entries take the default)."""
    return apply_primitive(REGISTRY["getitem"], (data,),
                           {"key": _slicing.begin_end_key(begin, end, step, "sym.slice"),
                            "name": name})


_HIDDEN_KEYS = frozenset(HIDDEN_KEYS)


@functools.lru_cache(maxsize=None)
def legacy_op(name):
    """The ``fastgrad.sym`` function of MXNet 1.x operator ``name`` (or one of its aliases).

    It takes the inputs by position or by MXNet's input names (``data``, ``weight``, ...),
    MXNet's parameters, ``name=`` and ``attr=``; inputs not given become variables named
    ``<name>_<input>`` (Note [MXNet 1.x operators] in ``_legacy.py``).
    """
    spec = _legacy.CATALOGUE[name]

    def op(*args, **kwargs):
        kwargs = dict(kwargs)
        node_name = kwargs.pop("name", None)
        attr = dict(kwargs.pop("attr", None) or {})
        # MXNet's "hidden keys" are attributes, not parameters (fc(..., lr_mult=2)).
        for key in _HIDDEN_KEYS.intersection(kwargs):
            attr["__%s__" % key] = str(kwargs.pop(key))
        # as MXNet, any __key__ argument is an attribute (Activation(..., __layout__='TNC'))
        for key in [k for k in kwargs if k.startswith("__") and k.endswith("__")]:
            attr[key] = str(kwargs.pop(key))
        where = "sym.%s" % name
        if spec.variadic:
            inputs = list(args[0]) if len(args) == 1 and isinstance(args[0], (list, tuple)) \
                else list(args)
            kwargs.setdefault("num_args", len(inputs))
            given = spec.parse(kwargs, where)
            if given["num_args"] != len(inputs):
                raise ValueError("%s: num_args=%d but %d inputs were given"
                                 % (where, given["num_args"], len(inputs)))
            names = ["arg%d" % i for i in range(len(inputs))]
        else:
            trial = {k: v for k, v in kwargs.items() if k in spec.params}
            given = spec.parse(trial, where)
            possible = _defaults_for_doc(spec)
            possible.update(given)
            names = spec.input_names(possible)
            if len(args) > len(names) and not any(isinstance(a, Symbol)
                                                  for a in args[len(names):]):
                # MXNet's operator functions take the parameters after the inputs by
                # position too (Dropout(data, 0.5))
                free = [k for k in spec.params if k not in kwargs]
                if len(args) - len(names) > len(free):
                    raise TypeError("%s takes at most %d inputs and %d parameters (%d "
                                    "arguments given)" % (where, len(names), len(free),
                                                          len(args)))
                kwargs.update(zip(free, args[len(names):]))
                args = args[:len(names)]
                trial = {k: v for k, v in kwargs.items() if k in spec.params}
                given = spec.parse(trial, where)
                possible = _defaults_for_doc(spec)
                possible.update(given)
                names = spec.input_names(possible)
            extra = [k for k in kwargs if k not in spec.params and k not in names]
            if extra:
                raise TypeError("%s: unknown argument(s) %s (inputs: %s; parameters: %s)"
                                % (where, extra, names, sorted(spec.params)))
            if len(args) > len(names):
                raise TypeError("%s takes at most %d inputs (%d given)"
                                % (where, len(names), len(args)))
            inputs = list(args) + [kwargs.get(n) for n in names[len(args):]]
            for n in names[:len(args)]:
                if n in kwargs:
                    raise TypeError("%s got multiple values for input %r" % (where, n))
        node_name = _auto_name(spec.name.lower(), node_name)
        full = spec.full(given, where)
        # MXNet keeps an operator's user attributes as __key__ (its parameters are plain).
        user = dict(_attribute.current())
        user.update({(str(k) if str(k).startswith("__") and str(k).endswith("__")
                      else "__%s__" % k): str(v) for k, v in dict(attr or {}).items()})
        var_attrs = {k: _legacy.format_attr(v) for k, v in given.items()}
        var_attrs.update(user)
        for i, (n, x) in enumerate(zip(names, inputs)):
            if x is None:
                # MXNet makes a variable of every input not given, the data too.
                if not spec.auto:
                    raise TypeError("%s: input %r is required" % (where, n))
                a = dict(var_attrs)
                if n in spec.var_attrs:
                    a["__init__"] = spec.var_attrs[n]
                inputs[i] = var("%s_%s" % (node_name, n), attr=a)
        entries = [_as_entry(x, name, "input %r" % n) for n, x in zip(names, inputs)]
        node = SymNode("mx." + spec.name, node_name, entries,
                       (tuple(InputRef(i) for i in range(len(entries))),
                        dict(sorted(given.items()))),
                       attrs=user, num_outputs=spec.num_outputs(full))
        return Symbol.from_node(node)

    op.__name__ = op.__qualname__ = name
    params = ", ".join("%s=%s" % (k, "<required>" if d is _legacy.REQUIRED else repr(d))
                       for k, (kind, d) in spec.params.items())
    op.__doc__ = ("MXNet 1.x operator ``%s`` (a Symbol). Inputs: %s. Parameters: %s."
                  % (spec.name, "any number" if spec.variadic else
                     ", ".join(spec.input_names(_defaults_for_doc(spec))), params or "none"))
    return op


def _defaults_for_doc(spec):
    return {k: (None if d is _legacy.REQUIRED else d) for k, (kind, d) in spec.params.items()}


def _wants_mxnet(prim, spec, args, kwargs):
    """Whether a call of a table op is meant as the MXNet operator of the same name: it uses
    a parameter only MXNet's has (``sum(..., exclude=True)``, ``softmax(temperature=)``), takes
    its inputs as separate arguments (``stack(a, b)``) or, for ``reshape``, MXNet's special
    codes (0, -2, -3, -4) or ``reverse=``."""
    if prim.n_in < 0 and args and not isinstance(args[0], (list, tuple)):
        return True     # MXNet's stack(*data, axis=) rather than stack([data...], axis)
    if prim.n_in >= 0 and any(isinstance(a, Symbol) for a in args[prim.n_in:]):
        return True     # MXNet's take(a, indices) takes as an input what ours takes as a value
    own = set(prim.param_names) | {"name", "attr", "num_outputs"}
    extra = {k for k in kwargs if k not in own}
    if "data" in extra and not args:
        return True     # MXNet's sum(data=x, axis=1): the input by MXNet's name
    if extra and extra <= set(spec.params):
        return True
    if prim.name == "reshape":
        shape = kwargs.get("shape", args[1] if len(args) > 1 else None)
        if isinstance(shape, (tuple, list)) and any(
                isinstance(d, int) and (d == 0 or d < -1) for d in shape):
            return True
    return False
