"""``HybridBlock.hybridize``: a block traced into a Symbol and run on fastgrad's Executor.

Note [Hybridize on the executor]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
A hybridized block keeps a :class:`CachedGraph`. At a call it computes the *signature* of its
inputs: training mode (``autograd.is_training()``) and, per flattened input, its shape and
dtype or ``None``. The first call with a signature *traces* the block: ``hybrid_forward`` is
called with ``F = fastgrad.sym``, a ``sym.var('data')`` (``data0``, ``data1``, ... for several
inputs) per input and a variable per Parameter, as MXNet 1.x does; child blocks called on
Symbols trace themselves the same way (``symbolic_call``). The Symbol is bound to an
:class:`~fastgrad.executor.Executor` and every later call with that signature only runs its
plan. A call with a new signature traces again; which inputs are ``None`` (and how they
nest) is fixed by the first call, as MXNet's CachedOp fixes it (``structure``).

The executor reads its arguments from its list of argument arrays at each forward (Note
[Executor plan] in ``_plan.pyx``), so a call puts the caller's input arrays and each
Parameter's current ``data()`` array into that list: nothing is copied in, and a Trainer
step, ``set_data`` or ``load_parameters`` is seen by the next call. ``BatchNorm``'s moving
statistics are the executor's auxiliary states and are the Parameters' own arrays, which the
operator updates in place in a training forward, exactly as imperatively. The outputs are
copied out of the executor (it reuses its output arrays; a caller keeps each call's own).

Recording. Inside ``autograd.record()`` the call records ONE node on the tape (``_HybridOp``)
whose inputs are the block's input arrays and its Parameters' arrays. Its backward runs the
executor's backward replay with the head gradients and hands the gradients of the inputs and
Parameters to the engine, which writes each Parameter's ``.grad()`` with its ``grad_req``
(``'write'``/``'add'``; ``'null'`` Parameters are bound without a gradient). The executor's
replay is the tape's (Note [Backward replay]), and the plan runs the primitives a recorded
program runs: MXNet 1.x operators that the executor would replace by their primitives only
from its second forward (Note [Composite expansion] in ``symbol/_expand.py``) are expanded
before the first real call, by one warm-up forward in predict mode on the call's own values
(skipped when the graph draws random numbers in predict mode, which a warm-up would consume;
dropout draws only in training). So outputs and gradients equal the imperative path's bit for
bit, and with the same seed a hybridized dropout draws the same masks as an imperative one.

Cost. Nothing is copied in; the outputs are copied out once; a call costs about 10 us of
Python besides the plan. The engine never owns what a custom node returns (Note [Gradient
buffer ownership] in ``_engine.pyx``), so it copies each Parameter's gradient into
``.grad()``, as it copies the transposed weight gradients imperatively; a
``FullyConnected`` weight is bound as its transpose so that the replay makes no copy of its
own (Note [Transposed weights]), and other arguments read through a transpose get buffers
of that layout (Note [Gradient layout]). Measured with one thread (``FASTGRAD_NUM_THREADS=1
OPENBLAS_NUM_THREADS=1``, ``benchmarks/gluon_hybridize.py``): the workload-2 MLP step
(784-256-256-10, batch 128, Trainer) takes the same time hybridized as imperatively (forward,
backward and update each within noise), LeNet's step about 0.65 of the imperative time, and
small networks about half, where the plan saves the per-operation recording.

A block keeps at most ``MAX_SIGNATURES`` signatures traced (the least recently used goes),
since each keeps its executors and their last forward's values.

An executor holds the values of its last forward until its backward; a block called twice
in one recording (a shared layer) needs both forwards' values. So executors live in a pool
per signature and per set of inputs that want gradients: a recorded call takes one out, and
its node gives it back when the backward pass releases the node (or the node is garbage
collected); calls outside ``record()`` bind without gradients and give theirs back at once.

What cannot be traced. Python code in ``hybrid_forward`` that needs values (``if x.sum() >
0``, ``x.asnumpy()``, ``float(x)``, ``x.shape``) fails on a Symbol; the error is raised again
naming the block (``TraceError``), as MXNet fails. A 2.x block (``forward(self, x)`` on
``mx.np`` arrays, no ``hybrid_forward``) is not traced: recording it on the tape and turning
the tape into a Symbol (``from_history``) was tried and bakes a dropout mask (recorded as a
multiplication by a constant array), or the branch a value took, into the graph as
constants, silently; nothing on the tape tells such a constant from a legitimate one. Such a
block (or a parent containing one) runs imperatively after a one-time warning naming it. A
block whose Parameters are still waiting for their shapes
(deferred initialisation) runs its first call imperatively, which finishes the
initialisation, and is traced from the next call on.
"""

import inspect
import re
import threading
import warnings
from collections import OrderedDict

import numpy as np

from fastgrad import symbol as _sym
from fastgrad.ndarray import save as _nd_save
from fastgrad._core._array import ndarray, unwrap, _wrap, history, record_custom
from fastgrad._core._state import is_recording, is_training, current_pass
from fastgrad.base import (MXNetError, MXNetValueError, MXNetTypeError, MXNetIndexError,
                           NotImplementedForSymbol)
from fastgrad.executor import Executor
from fastgrad.symbol import name as _sym_name
from fastgrad.symbol._graph import Symbol, SymNode, topo_nodes
from fastgrad.symbol._expand import expand, traced_symbol
from fastgrad.symbol._ops import VARIABLE


class TraceError(MXNetError, TypeError):
    """A ``hybrid_forward`` that cannot run on Symbols (it needs values), naming the block."""


class _Stale(Exception):
    """A Parameter's array no longer has the shape or dtype its graph was traced with."""


class _Untraceable(Exception):
    """A block in the graph has no ``hybrid_forward`` (a 2.x block): run imperatively."""

    def __init__(self, block):
        super().__init__(block)
        self.block = block


def describe(block):
    """``'dense0 (Dense)'``: how errors name a block."""
    name = getattr(block, "name", None)
    if not name:
        return type(block).__name__
    return "%s (%s)" % (name, type(block).__name__)


# ---------------------------------------------------------------- nested inputs and outputs

def flatten(args, what):
    """``args`` (arrays, Symbols, ``None`` and nested lists/tuples of them) as a flat list
    and the format ``regroup`` rebuilds it from (as MXNet's ``_flatten``)."""
    if args is None or isinstance(args, (ndarray, Symbol)):
        return [args], 0
    if isinstance(args, (list, tuple)):
        flat, fmts = [], []
        for a in args:
            f, fmt = flatten(a, what)
            flat.extend(f)
            fmts.append(fmt)
        return flat, (type(args), tuple(fmts))
    raise ValueError("When hybridized, the %s of HybridBlock must be (nested) list of Symbol "
                     "or NDArray, but got %r of type %s" % (what, args, type(args)))


def structure(args):
    """What must stay the same between calls of a hybridized block (MXNet's input format):
    the nesting and which inputs are None, trailing None arguments left out (a default)."""
    args = list(args)
    while args and args[-1] is None:
        args.pop()
    flat, fmt = flatten(args, "input")
    return fmt, tuple(a is None for a in flat)


def regroup(flat, fmt):
    """The nested structure ``fmt`` (from ``flatten``) rebuilt from the items of ``flat``."""
    if fmt == 0:
        return flat[0]
    return _build(flat, 0, fmt)[0]


def _build(flat, pos, fmt):
    # Not a closure: a recursive closure is a reference cycle, which would keep the outputs
    # (and the executor their tape node holds) alive until the cyclic collector runs.
    if fmt == 0:
        return flat[pos], pos + 1
    kind, fmts = fmt
    items = []
    for f in fmts:
        item, pos = _build(flat, pos, f)
        items.append(item)
    return kind(items), pos


# ---------------------------------------------------------------- tracing

_state = threading.local()


class _TraceScope:
    """The trace in progress: one variable per Parameter, named by the traced block's
    ``collect_params()`` keys (``dense0_weight`` in 1.x, ``0.weight`` in 2.x)."""

    def __init__(self, block):
        self.names = {}
        for key, p in _collected(block).items():
            self.names.setdefault(id(p), key)
        self.vars = {}          # id(param) -> (Symbol, Parameter)
        self.used = set()
        self.by_name = {}       # variable name -> Parameter

    def adopt(self, name, param):
        """A Parameter that a composed Symbol already names ``name`` (``SymbolBlock``)."""
        hit = self.by_name.get(name)
        if hit is not None and hit is not param:
            raise ValueError("hybridize: two Parameters are both named %r in the traced graph"
                             % name)
        self.by_name[name] = param
        self.used.add(name)

    def var(self, param):
        hit = self.vars.get(id(param))
        if hit is not None:
            return hit[0]
        name = self.names.get(id(param)) or getattr(param, "name", "param")
        if name == getattr(param, "name", None) and name not in self.used and \
                hasattr(param, "var"):
            # The Parameter's own variable (made again when its shape, dtype or multipliers
            # changed): every graph that uses it, each step of an unrolled cell included,
            # names one argument.
            v = param.var()
            self.used.add(name)
            self.vars[id(param)] = (v, param)
            self.by_name[name] = param
            return v
        base, k = name, 1
        while name in self.used:
            name = "%s_%d" % (base, k)
            k += 1
        self.used.add(name)
        # As Parameter.var(), but from the Parameter's current shape and dtype (its cached
        # var() may predate a cast or the end of deferred initialisation).
        attrs = {}
        shape = getattr(param, "shape", None)
        if shape is not None and all(int(d) > 0 for d in shape):
            attrs["shape"] = tuple(int(d) for d in shape)
        dtype = getattr(param, "dtype", None)
        if dtype is not None:
            attrs["dtype"] = np.dtype(dtype)
        for key in ("lr_mult", "wd_mult"):
            if getattr(param, key, None) is not None:
                attrs[key] = getattr(param, key)
        init = getattr(param, "init", None)
        if init is not None:
            attrs["init"] = init
        v = _sym.var(name, **attrs)
        self.vars[id(param)] = (v, param)
        self.by_name[name] = param
        return v

    def __enter__(self):
        self.saved = getattr(_state, "scope", None)
        _state.scope = self
        return self

    def __exit__(self, *exc):
        _state.scope = self.saved
        return False


def _collected(block):
    return dict(block.collect_params().items())


def own_params(block):
    """The Parameters ``hybrid_forward`` receives as keyword arguments, by attribute name."""
    return dict(getattr(block, "_reg_params", {}))


def is_1x(block):
    """Whether ``block`` computes in ``hybrid_forward(F, ...)`` (MXNet 1.x style)."""
    np_style = getattr(block, "_is_np_style", None)
    if np_style is not None:
        return not np_style()
    return callable(getattr(block, "hybrid_forward", None))


_VALUE_READS = ("asnumpy", "asscalar", "item", "shape", "tolist", "__array__", "ndim",
                "size", "dtype", "context", "ctx")


def _value_dependent(exc):
    """Whether ``exc`` came from Python reading a Symbol's value or shape (``bool(x)``,
    ``x.asnumpy()``, ``float(x)``, ``x.shape``), which a trace cannot give."""
    if isinstance(exc, NotImplementedForSymbol):
        return True
    text = str(exc)
    if isinstance(exc, AttributeError):
        return "'Symbol' object has no attribute" in text and any(
            "'%s'" % name in text for name in _VALUE_READS)
    if isinstance(exc, TypeError):
        return "not 'Symbol'" in text
    return False


def current_scope():
    """The trace in progress in this thread, or ``None``."""
    return getattr(_state, "scope", None)


def symbolic_call(block, args):
    """``block.hybrid_forward(mx.sym, *args, **param_vars)`` for Symbol ``args`` (a traced
    call, or a block used while building a Symbol by hand)."""
    if not is_1x(block):
        if getattr(_state, "scope", None) is not None:
            raise _Untraceable(block)
        raise TypeError("HybridBlock %s was called on Symbols but defines forward(), not "
                        "hybrid_forward(F, ...): only 1.x blocks can build Symbols"
                        % describe(block))
    scope = getattr(_state, "scope", None)
    if scope is None:
        with _TraceScope(block) as scope:
            return _symbolic(block, scope, args)
    return _symbolic(block, scope, args)


def _symbolic(block, scope, args):
    params = {k: scope.var(p) for k, p in own_params(block).items()}
    try:
        inspect.signature(block.hybrid_forward).bind(_sym, *args, **params)
    except TypeError as exc:
        raise TypeError("HybridBlock %s: hybrid_forward cannot take %d inputs and the "
                        "Parameters %s: %s" % (describe(block), len(args), sorted(params), exc)
                        ) from None
    scope_of = getattr(block, "name_scope", None)
    manager = scope_of() if scope_of is not None else _sym_name.NameManager()
    try:
        with manager:
            return block.hybrid_forward(_sym, *args, **params)
    except TraceError:
        raise
    except _Untraceable:
        raise
    except Exception as exc:
        if not _value_dependent(exc):
            raise
        raise TraceError(
            "HybridBlock %s: hybridize traces hybrid_forward with F=mx.sym and Symbol inputs, "
            "which have no values, and it failed with %s: %s. Python control flow or reads "
            "that depend on values or shapes (if x.sum() > 0, x.asnumpy(), float(x), x.shape) "
            "cannot be hybridized: use F operators (F.where, F.contrib.cond), or do not "
            "hybridize this block" % (describe(block), type(exc).__name__, exc)) from exc


class _Traced:
    """One traced signature: the Symbol, where each of its arguments comes from, and its
    executors (by the tuple of arguments that want a gradient)."""

    __slots__ = ("symbol", "arg_sources", "aux_params", "out_fmt", "n_inputs", "pools",
                 "expanded", "arg_names", "aux_names", "random", "transposed")

    def __init__(self, symbol, arg_sources, aux_params, out_fmt, n_inputs):
        self.symbol = symbol
        self.arg_names = symbol.list_arguments()
        self.aux_names = symbol.list_auxiliary_states()
        self.arg_sources = arg_sources      # per argument: int (input index) or a Parameter
        self.aux_params = aux_params        # per auxiliary state: its Parameter
        self.out_fmt = out_fmt
        self.n_inputs = n_inputs
        self.pools = {}
        self.expanded = None
        self.transposed = ()                # per argument: bound as its transpose
        self.random = any(_draws_in_predict_mode(n) for n in topo_nodes(symbol._entries))


_RANDOM_WORDS = ("random", "sample", "shuffle", "bernoulli", "multinomial", "Dropout",
                 "dropout")


def _draws_in_predict_mode(node):
    """Whether running ``node`` in predict mode may draw random numbers (a warm-up forward
    would then move the generator). Dropout draws only in training mode, unless its mode is
    ``'always'``."""
    op = node.op
    if not isinstance(op, str) or not any(w in op for w in _RANDOM_WORDS):
        return False
    if op in ("mx.Dropout", "npx.dropout"):
        return "always" in repr(node.params)
    return True


def _layer_of(block, text):
    """The block (``block`` or a descendant) whose prefix begins the longest word of
    ``text`` that one does, or ``None``."""
    best, best_len = None, 0
    stack = [block]
    failed = re.search(r"failed at (\S+)", text)       # shape inference names the node
    if failed is not None:
        text = failed.group(1)
    words = text.replace("(", " ").replace(",", " ").split()
    while stack:
        b = stack.pop()
        stack.extend(getattr(b, "_children", {}).values())
        prefix = getattr(b, "prefix", "") or ""
        if len(prefix) > best_len and any(w.startswith(prefix) for w in words):
            best, best_len = b, len(prefix)
    return best


def trace_block(block, flat_inputs, in_fmt):
    """Trace ``block`` for the flattened inputs (arrays or ``None``): a ``_Traced``."""
    real = [a for a in flat_inputs if a is not None]
    if not real:
        raise ValueError("HybridBlock %s: every input is None; hybridize needs at least one "
                         "array input" % describe(block))
    names = ["data"] if len(real) == 1 else ["data%d" % i for i in range(len(real))]
    sym_flat, k = [], 0
    for a in flat_inputs:
        if a is None:
            sym_flat.append(None)
        else:
            sym_flat.append(_sym.var(names[k]))
            k += 1
    with _TraceScope(block) as scope:
        scope.used.update(names)
        out = symbolic_call(block, regroup(sym_flat, in_fmt))
    out_flat, out_fmt = flatten(out, "output")
    if not out_flat or not all(isinstance(o, Symbol) for o in out_flat):
        raise TypeError("HybridBlock %s: hybrid_forward must return Symbols when traced "
                        "(got %s)" % (describe(block), [type(o).__name__ for o in out_flat]))
    symbol = _sym.Group(out_flat) if len(out_flat) > 1 else out_flat[0]
    return _bind_sources(block, symbol, names, scope.by_name, out_fmt)


def _bind_sources(block, symbol, input_names, params_by_name, out_fmt):
    index = {n: i for i, n in enumerate(input_names)}
    sources = []
    for n in symbol.list_arguments():
        if n in index:
            sources.append(index[n])
        elif n in params_by_name:
            sources.append(params_by_name[n])
        else:
            raise ValueError("HybridBlock %s: the graph has an argument %r that is neither an "
                             "input (%s) nor a Parameter" % (describe(block), n, input_names))
    aux = []
    for n in symbol.list_auxiliary_states():
        if n not in params_by_name:
            raise ValueError("HybridBlock %s: the graph has an auxiliary state %r that is not "
                             "a Parameter" % (describe(block), n))
        aux.append(params_by_name[n])
    return _Traced(symbol, sources, aux, out_fmt, len(input_names))


# ---------------------------------------------------------------- running

def _bind_transposed(symbol, candidates):
    """``symbol`` with every variable of ``candidates`` that feeds only a 2-D ``transpose``
    that feeds only the right operand of one ``matmul`` (a ``FullyConnected`` weight, once
    expanded) replaced by a variable of the same name standing for the transpose, and the
    set of those names.

    Note [Transposed weights]
    ~~~~~~~~~~~~~~~~~~~~~~~~~
    Bound to the transposed view of the Parameter's array (what ``transpose`` made), such a
    variable is ``matmul``'s right operand itself: the forward multiplies the same memory
    by the same BLAS call, and the replay's weight gradient is the product ``x.T @ g`` it
    computes, which the executor's buffer takes instead of copying a transposed view of it;
    the gradient handed to the engine is that product's transpose, the very values
    ``transpose``'s rule would give. A variable whose transpose or product has other
    consumers is left alone (the replay could then sum, or defer, differently from the
    tape). Only the copy the engine makes into ``.grad()`` remains, as imperatively.
    """
    nodes = topo_nodes(symbol._entries)
    consumers = {}
    for node in nodes:
        for i, (parent, k) in enumerate(node.inputs):
            consumers.setdefault(parent.id, []).append((node, i))
    heads = {n.id for n, _ in symbol._entries}
    replace = {}                         # transpose node id -> new variable node
    flipped = set()
    for node in nodes:
        if node.op != VARIABLE or node.name not in candidates or node.id in heads:
            continue
        users = consumers.get(node.id, [])
        if len(users) != 1:
            continue
        tr, _ = users[0]
        if tr.op != "transpose" or tuple(tr.params) not in ((), (None,)) or tr.id in heads:
            continue
        mm = consumers.get(tr.id, [])
        if len(mm) != 1 or mm[0][0].op != "matmul" or mm[0][1] != 1:
            continue
        attrs = dict(node.attrs)
        if attrs.get("shape") is not None:
            attrs["shape"] = tuple(attrs["shape"])[::-1]
        replace[tr.id] = SymNode(VARIABLE, node.name, attrs=attrs)
        flipped.add(node.name)
    if not replace:
        return symbol, set()
    entry = {}
    for node in nodes:
        if node.id in replace:
            entry[(node.id, 0)] = (replace[node.id], 0)
            continue
        if node.op == VARIABLE and node.name in flipped:
            continue
        inputs = [entry[(p.id, k)] for p, k in node.inputs]
        if inputs == list(node.inputs):
            new = node
        else:
            new = SymNode(node.op, node.name, inputs, node.params, node.value,
                          dict(node.attrs), node.num_outputs)
        for k in range(node.num_outputs):
            entry[(node.id, k)] = (new, k)
    return Symbol([entry[(n.id, k)] for n, k in symbol._entries]), flipped


def _transposed_arguments(symbol):
    """Names of the variables of ``symbol`` read only by a 2-D ``transpose`` (a
    ``FullyConnected`` weight, once expanded): their gradients come out in Fortran order.

    Note [Gradient layout]
    ~~~~~~~~~~~~~~~~~~~~~~
    Such a gradient is the transpose of a product, a Fortran-order view, which the replay
    copies into the executor's buffer and the engine copies into the Parameter's ``.grad()``
    (neither may take it, Note [Hybridize on the executor]). Copied into a C-order buffer it
    is a strided transposing copy (about 1 ms for a 784x256 float32 weight here); so these
    arguments get Fortran-order executor buffers, the copies run over contiguous memory, and
    a Parameter's ``.grad()`` made by its first backward pass takes the same layout, as it
    does imperatively (where the buffer takes the array itself). Values are unchanged.
    """
    consumers = {}
    for node in topo_nodes(symbol._entries):
        for parent, _ in node.inputs:
            consumers.setdefault(parent.id, []).append(node)
    out = set()
    for node in topo_nodes(symbol._entries):
        if node.op != VARIABLE:
            continue
        users = consumers.get(node.id, [])
        if users and all(u.op == "transpose" and tuple(u.params) in ((), (None,))
                         for u in users):
            out.add(node.name)
    return out


def _param_array(block, param):
    return param.data()


class _HybridOp:
    """The op of the one tape node a recorded hybridized call makes (Note [Hybridize on the
    executor]): its backward is the executor's backward replay."""

    __slots__ = ("name", "ex", "pool", "grad_of", "out_shapes", "out_dtypes", "in_shapes",
                 "in_dtypes", "is_train", "block", "transposed", "__weakref__")

    def __init__(self, block, ex, pool, grad_of, inputs, outputs, is_train, transposed=()):
        self.block = describe(block)
        self.name = "HybridBlock %s" % self.block
        self.ex = ex
        self.pool = pool
        self.grad_of = grad_of          # per node input: its argument index, or -1
        self.in_shapes = [a.shape for a in inputs]
        self.in_dtypes = [a.dtype for a in inputs]
        self.out_shapes = [o.shape for o in outputs]
        self.out_dtypes = [o.dtype for o in outputs]
        self.is_train = is_train
        self.transposed = transposed

    def node_backward(self, node, g, needs, create_graph):
        ex = self.ex
        if ex is None:
            raise RuntimeError("%s: this call's graph was already freed by an earlier backward "
                               "pass; pass retain_graph=True to differentiate it again"
                               % self.name)
        if create_graph:
            raise NotImplementedError(
                "%s: a hybridized block is differentiated by its executor, once; "
                "create_graph=True (higher-order gradients) needs the block run imperatively "
                "(call hybridize(False))" % self.name)
        n_out = len(self.out_shapes)
        gs = list(g) if n_out > 1 else [g]
        heads = []
        for k in range(n_out):
            gk = gs[k]
            if gk is None:
                heads.append(np.zeros(self.out_shapes[k], self.out_dtypes[k]))
                continue
            gk = np.asarray(unwrap(gk))
            if gk.dtype != self.out_dtypes[k]:
                gk = gk.astype(self.out_dtypes[k])
            heads.append(gk)
        # A pass that does not retain the graph releases this node once its rule has run:
        # the plan may drop each value as soon as its last step has read it (Note [Slot
        # lifetimes] in _plan.pyx), as the tape drops a node's.
        running = current_pass()
        ex._plan.backward(heads, self.is_train,
                          release=running is not None and not running.retain)
        grads = ex._grads
        transposed = self.transposed
        out = []
        for k in self.grad_of:
            if k < 0 or grads[k] is None:
                out.append(None)
            elif transposed and transposed[k]:
                out.append(unwrap(grads[k]).T)      # Note [Transposed weights]
            else:
                out.append(unwrap(grads[k]))
        return tuple(out)

    def release(self):
        ex, self.ex = self.ex, None
        if ex is not None:
            self.pool.append(ex)

    def __del__(self):
        try:
            self.release()
        except Exception:       # interpreter shutdown
            pass


def _show_structure(found):
    fmt, nones = found
    return "%d inputs, None at %s" % (len(nones), [i for i, n in enumerate(nones) if n])


#: How many input signatures a hybridized block keeps traced (least recently used dropped).
MAX_SIGNATURES = 32


class CachedGraph:
    """A hybridized block's traced graphs and executors (Note [Hybridize on the executor])."""

    def __init__(self, block, static_alloc=False, static_shape=False):
        self.block = block
        self.static_alloc = static_alloc
        self.static_shape = static_shape
        self.graphs = OrderedDict()     # signature -> _Traced, least recently used first
        self.last = None            # the last _Traced (export, infer_shape)
        self.imperative = None      # the reason the block runs imperatively, once known
        self.structure = None       # ``structure()`` of the first traced call (as MXNet)

    # The graph of a signature; None means "run imperatively".
    def _graph(self, key, flat, fmt, flat_args=()):
        traced = self.graphs.get(key)
        if traced is not None:
            return traced
        try:
            traced = self.trace(flat, fmt)
        except _Untraceable as exc:
            self.imperative = exc.block
            warnings.warn(
                "HybridBlock %s: hybridize() runs this block imperatively: %s defines "
                "forward() on arrays instead of hybrid_forward(F, ...), and fastgrad traces "
                "only hybrid_forward (a recorded trace of forward() could bake random masks "
                "or value-dependent branches into the graph)"
                % (describe(self.block), "it" if exc.block is self.block
                   else "its child %s" % describe(exc.block)), stacklevel=4)
            return None
        self.graphs[key] = traced
        if self.structure is None:
            self.structure = structure(flat_args)
        if len(self.graphs) > MAX_SIGNATURES:
            # Each signature's executors keep their last forward's values: a block fed many
            # shapes (sequences of every length) keeps only the recent ones.
            self.graphs.popitem(last=False)
        self.last = traced
        return traced

    def trace(self, flat, fmt):
        """The ``_Traced`` graph of the block for these flattened inputs."""
        return trace_block(self.block, flat, fmt)

    def params_ready(self):
        """Whether every Parameter has its data (not waiting for deferred initialisation)."""
        for p in _collected(self.block).values():
            if getattr(p, "_data", 1) is None:
                return False
        return True

    def __call__(self, args, imperative):
        """Run the block on ``args`` (a tuple); ``imperative()`` runs it without the graph."""
        if self.imperative is not None:
            return imperative()
        flat, fmt = flatten(list(args), "input")
        training = bool(is_training())
        key = [training, fmt]
        for a in flat:
            if a is None:
                key.append(None)
            elif isinstance(a, ndarray):
                key.append((a.shape, a.dtype.str, type(a)))
            else:
                raise ValueError("HybridBlock %s: a hybridized block takes arrays (or None), "
                                 "got a %s" % (describe(self.block), type(a).__name__))
        key = tuple(key)
        traced = self.graphs.get(key)
        inputs = [a for a in flat if a is not None]
        if traced is None and self.structure is not None:
            given = structure(args)
            if given != self.structure:
                raise ValueError(
                    "HybridBlock %s: the argument structure does not match the cached "
                    "version (which inputs are None or nested lists): first called with %s, "
                    "now with %s; call hybridize() again to trace it anew"
                    % (describe(self.block), _show_structure(self.structure),
                       _show_structure(given)))
        if traced is not None:
            if len(self.graphs) > 1:
                self.graphs.move_to_end(key)
            try:
                return self.run(traced, inputs, training)
            except _Stale:
                self.graphs.clear()
                return self(args, imperative)
        if not self.params_ready():
            out = imperative()              # finishes deferred initialisation
            if self.params_ready():
                self._graph(key, flat, fmt, args)   # traced now: export works after one call
            return out
        traced = self._graph(key, flat, fmt, args)
        if traced is None:
            return imperative()
        try:
            return self.run(traced, inputs, training)
        except _Stale:
            raise RuntimeError("HybridBlock %s: a Parameter changed shape while the block was "
                               "traced" % describe(self.block)) from None
        except (ValueError, TypeError, IndexError) as exc:
            self.graphs.pop(key, None)
            raise self._explain(traced, inputs, exc) from exc

    def _explain(self, traced, inputs, exc):
        """The error of a graph's first run, naming the block (and the layer, when shape
        inference finds where the shapes disagree)."""
        if str(exc).startswith("HybridBlock "):
            return exc
        shapes = {}
        try:
            for name, src in zip(traced.arg_names, traced.arg_sources):
                shapes[name] = inputs[src].shape if type(src) is int else src.shape
            for name, p in zip(traced.aux_names, traced.aux_params):
                shapes[name] = p.shape
            traced.symbol.infer_shape(**shapes)
            detail = "%s: %s" % (type(exc).__name__, exc)
        except Exception as found:          # noqa: BLE001 (the better message)
            detail = str(found)
        where = ""
        layer = _layer_of(self.block, detail)
        if layer is not None and layer is not self.block:
            where = " in %s" % describe(layer)
        kind = {ValueError: MXNetValueError, TypeError: MXNetTypeError,
                IndexError: MXNetIndexError}.get(type(exc), type(exc))
        return kind("HybridBlock %s: inputs of shapes %s do not fit the graph traced "
                         "from its Parameters%s: %s"
                         % (describe(self.block), [tuple(a.shape) for a in inputs], where,
                            detail))

    def run(self, traced, inputs, training):
        block = self.block
        if len(inputs) != traced.n_inputs:
            raise ValueError("HybridBlock %s: expected %d inputs, got %d"
                             % (describe(block), traced.n_inputs, len(inputs)))
        if traced.expanded is None:
            self._prepare(traced, inputs)
        sources = traced.arg_sources
        arg_arrays = []
        for src in sources:
            arg_arrays.append(inputs[src] if type(src) is int else _param_array(block, src))
        aux_arrays = [_param_array(block, p) for p in traced.aux_params]
        bound_arrays = arg_arrays
        if traced.transposed:
            bound_arrays = [_wrap(unwrap(a).T, type(a)) if t else a
                            for a, t in zip(arg_arrays, traced.transposed)]
        recording = is_recording()
        if recording:
            wants = []
            for src, a in zip(sources, arg_arrays):
                if type(src) is int:
                    wants.append(history(a)[0] is not None and a.dtype.kind in "fc")
                else:
                    wants.append(src.grad_req != "null" and history(a)[0] is not None)
            wants = tuple(wants)
            if not any(wants):
                recording = False
        if not recording:
            wants = (False,) * len(sources)
        pool = traced.pools.setdefault(wants, [])
        try:
            ex = pool.pop()
        except IndexError:          # every executor of this signature is held by a tape node
            ex = self._bind(traced, wants, bound_arrays, aux_arrays)
        try:
            self._load(ex, traced, bound_arrays, aux_arrays)
            ex.forward(is_train=training)
            cls = type(inputs[0])
            outs = [_wrap(np.array(unwrap(o)), cls) for o in ex.outputs]
        except BaseException:
            pool.append(ex)
            raise
        if recording:
            node_inputs = list(inputs) + [a for a, src in zip(arg_arrays, sources)
                                          if type(src) is not int]
            grad_of = [-1] * len(node_inputs)
            j = len(inputs)
            for k, src in enumerate(sources):
                if type(src) is int:
                    if wants[k]:
                        grad_of[src] = k
                else:
                    if wants[k]:
                        grad_of[j] = k
                    j += 1
            op = _HybridOp(block, ex, pool, grad_of, node_inputs, outs, training,
                           traced.transposed)
            outs = tuple(outs)
            recorded = record_custom(op, tuple(node_inputs), outs)
            if recorded is outs:
                op.release()            # nothing was linked: no node holds the executor
            outs = list(recorded)
        else:
            pool.append(ex)
        out = regroup(outs, traced.out_fmt)
        return out

    def _load(self, ex, traced, arg_arrays, aux_arrays):
        """Point the executor's argument list at this call's arrays (no copy)."""
        bound = ex._args
        for k, a in enumerate(arg_arrays):
            old = bound[k]
            if a.shape != old.shape or a.dtype != old.dtype:
                self._mismatch(traced, k, a, old)
            bound[k] = a
        n = len(arg_arrays)
        for k, a in enumerate(aux_arrays):
            old = bound[n + k]
            if a.shape != old.shape or a.dtype != old.dtype:
                self._mismatch(traced, n + k, a, old)
            bound[n + k] = a

    def _mismatch(self, traced, k, a, old):
        # A Parameter changed shape or dtype since the trace (re-initialised, loaded): the
        # call traces again (``__call__``).
        raise _Stale()

    def _prepare(self, traced, inputs):
        """Expand ``traced``'s composites (``_expand``) and put its arguments in the expanded
        Symbol's order, which its executors list them in."""
        arg_arrays = [inputs[src] if type(src) is int else _param_array(self.block, src)
                      for src in traced.arg_sources]
        aux_arrays = [_param_array(self.block, p) for p in traced.aux_params]
        expanded = self._expand(traced, arg_arrays, aux_arrays)
        sources = dict(zip(traced.arg_names, traced.arg_sources))
        aux = dict(zip(traced.aux_names, traced.aux_params))
        candidates = {n for n, src in sources.items()
                      if type(src) is not int and len(getattr(src, "shape", ()) or ()) == 2}
        expanded, flipped = _bind_transposed(expanded, candidates)
        names = expanded.list_arguments()
        aux_names = expanded.list_auxiliary_states()
        if sorted(names) != sorted(sources) or sorted(aux_names) != sorted(aux):
            expanded, names, aux_names = traced.symbol, traced.arg_names, traced.aux_names
            flipped = set()
        traced.arg_names = names
        traced.arg_sources = [sources[n] for n in names]
        traced.aux_names = aux_names
        traced.aux_params = [aux[n] for n in aux_names]
        traced.transposed = tuple(n in flipped for n in names) if flipped else ()
        traced.expanded = expanded

    def _bind(self, traced, wants, arg_arrays, aux_arrays):
        """A new executor for ``traced`` with gradients for the arguments ``wants`` names."""
        symbol = traced.expanded
        names = traced.arg_names
        try:
            ex = Executor(symbol, None, dict(zip(names, arg_arrays)),
                          grad_req=["write" if w else "null" for w in wants],
                          aux_states=dict(zip(traced.aux_names, aux_arrays)))
        except (ValueError, TypeError) as exc:
            raise type(exc)("HybridBlock %s: %s" % (describe(self.block), exc)) from exc
        transposed = _transposed_arguments(symbol)
        for k, (name, want) in enumerate(zip(names, wants)):
            buf = ex._grads[k]
            if want and name in transposed and buf is not None and buf.ndim == 2:
                # Note [Gradient layout]
                buf = _wrap(np.zeros(buf.shape, buf.dtype, order="F"), type(buf))
                ex._grads[k] = buf
                ex._plan.set_grad(k, buf)
        return ex

    def _expand(self, traced, arg_arrays, aux_arrays):
        """The traced Symbol with the composites the executor would expand at its second
        forward already expanded (Note [Hybridize on the executor]): one warm-up forward in
        predict mode, with no gradients and the auxiliary states copied."""
        if traced.random:
            return traced.symbol
        try:
            warm = Executor(traced.symbol, None, dict(zip(traced.arg_names, arg_arrays)),
                            grad_req="null",
                            aux_states=dict(zip(traced.aux_names, aux_arrays)))
        except (ValueError, TypeError) as exc:
            raise type(exc)("HybridBlock %s: %s" % (describe(self.block), exc)) from exc
        bound = warm._args
        for k, a in enumerate(arg_arrays):
            bound[k] = a                    # no copies; auxiliary states stay copies
        warm.forward(is_train=False)
        traces = warm._plan.take_traces()
        if not traces:
            return traced.symbol
        subs = {}
        for node_id, (ins, outs) in traces.items():
            sub = traced_symbol(ins, outs)
            if sub is not None:
                subs[node_id] = sub
        return expand(traced.symbol, subs) if subs else traced.symbol


# ---------------------------------------------------------------- the block's entry points

def call_cached(block, args):
    """Run the hybridized ``block`` on ``args`` (``HybridBlock._call_cached_op``)."""
    graph = block._cached_op
    if not isinstance(graph, CachedGraph):
        graph = block._cached_op = CachedGraph(block)
    return graph(args, lambda: block._imperative_call(*args))


def export(block, path, epoch=0, remove_amp_cast=True):
    """Write ``path-symbol.json`` and ``path-%04d.params`` (``HybridBlock.export``): the
    last traced graph in MXNet's JSON and its Parameters as ``arg:``/``aux:`` entries in
    MXNet's binary format, as MXNet 1.9.1 writes them (``SymbolBlock.imports`` reads both).
    """
    graph = getattr(block, "_cached_op", None)
    traced = graph.last if isinstance(graph, CachedGraph) else None
    if traced is None:
        if isinstance(graph, CachedGraph) and graph.imperative is not None:
            raise RuntimeError("HybridBlock %s cannot be exported: it runs imperatively "
                               "because %s defines forward() instead of hybrid_forward(F, ...)"
                               % (describe(block), describe(graph.imperative)))
        raise RuntimeError("Please first call block.hybridize() and then run forward with "
                           "this block at least once before calling export.")
    symbol = traced.symbol
    symbol.save("%s-symbol.json" % path, remove_amp_cast=remove_amp_cast)
    arrays = {}
    for name, src in zip(traced.arg_names, traced.arg_sources):
        if type(src) is not int:
            arrays["arg:%s" % name] = src._reduce()
    for name, param in zip(traced.aux_names, traced.aux_params):
        arrays["aux:%s" % name] = param._reduce()
    _nd_save("%s-%04d.params" % (path, epoch), arrays)
