"""``SymbolBlock``: a block made from a Symbol (MXNet 1.9.1's ``gluon.SymbolBlock``).

A SymbolBlock runs its Symbol on fastgrad's Executor at every call, hybridized or not, with
the machinery of ``HybridBlock.hybridize`` (Note [Hybridize on the executor] in
``_hybrid.py``): one tape node per recorded call, gradients into its Parameters. Its
Parameters are the Symbol's arguments that are not inputs (``grad_req='write'``) and its
auxiliary states (``grad_req='null'``), named as in the Symbol, with shapes inferred from
the first input when no file gave them. Called on Symbols it composes its Symbol with them,
so it can sit inside a traced HybridBlock.

Examples
--------
>>> import fastgrad as mx
>>> data = mx.sym.var('data')
>>> out = mx.sym.FullyConnected(data, num_hidden=2, name='fc')
>>> net = mx.gluon.SymbolBlock(out, data)
>>> net.initialize(mx.init.One())
>>> net(mx.nd.ones((1, 3)))
<BLANKLINE>
[[4. 4.]]
<NDArray 1x2 @cpu(0)>

(``initialize``'s initializer fills every Parameter the Symbol does not give one, the bias
too, as in MXNet.)
"""

import json

import numpy as np

from fastgrad import symbol as _sym
from fastgrad.symbol._graph import Symbol, topo_nodes
from fastgrad.symbol._ops import VARIABLE
from fastgrad.gluon import _hybrid
from fastgrad.gluon.block import HybridBlock
from fastgrad.gluon.parameter import ParameterDict

__all__ = ["SymbolBlock"]


class _SymbolGraph(_hybrid.CachedGraph):
    """A SymbolBlock's graphs: its own Symbol, never traced."""

    def params_ready(self):
        return True             # deferred shapes were inferred; data() names the others

    def trace(self, flat, fmt):
        block = self.block
        real = [a for a in flat if a is not None]
        names = block._input_names
        if len(real) != len(names):
            raise ValueError("%s: expected %d inputs %s, got %d"
                             % (_hybrid.describe(block), len(names), names, len(real)))
        return _hybrid._bind_sources(block, block._symbol, names, block._params_by_name(),
                                     block._sym_out_fmt)


class SymbolBlock(HybridBlock):
    """A block that computes a Symbol (MXNet's ``gluon.SymbolBlock``).

    Parameters
    ----------
    outputs : Symbol or list of Symbol
        The outputs.
    inputs : Symbol or list of Symbol
        The input variables (``mx.sym.var('data')``).
    params : ParameterDict, optional
        Parameters to share: those named like the Symbol's arguments are used instead of new
        ones.
    """

    def __init__(self, outputs, inputs, params=None):
        super().__init__(prefix=None, params=None)
        self._prefix = ""
        self._name = ""
        self._params = ParameterDict("", params)
        if isinstance(inputs, Symbol) and len(inputs.list_outputs()) == 1:
            inputs = [inputs]
        if isinstance(outputs, (list, tuple)) and len(outputs) == 1:
            outputs = outputs[0]
        if isinstance(outputs, (list, tuple)):
            outputs = _sym.Group(list(outputs))
        if not isinstance(outputs, Symbol):
            raise TypeError("SymbolBlock: outputs must be a Symbol or a list of Symbols, not %s"
                            % type(outputs).__name__)
        flat, self._in_fmt = _hybrid.flatten(list(inputs), "input")
        names = []
        for s in flat:
            if not isinstance(s, Symbol) or s.get_children() is not None or len(s) != 1:
                raise ValueError("SymbolBlock: inputs must be variables (mx.sym.var), but %s is "
                                 "an output of an operator" % (s,))
            names.append(s.name)
        arguments = outputs.list_arguments()
        aux = outputs.list_auxiliary_states()
        unknown = [n for n in names if n not in arguments and n not in aux]
        if unknown:
            raise ValueError("SymbolBlock: the inputs %s are not arguments of the Symbol "
                             "(its arguments: %s)" % (unknown, arguments))
        self._input_names = names
        self._symbol = outputs
        n_out = len(outputs.list_outputs())
        self._sym_out_fmt = (list, (0,) * n_out) if n_out > 1 else 0
        arg_types, aux_types = _param_types(flat, outputs)
        for n, t in zip(arguments, arg_types):
            if n not in names:
                self.params.get(n, allow_deferred_init=True, dtype=t)
        for n, t in zip(aux, aux_types):
            if n not in names:
                self.params.get(n, grad_req="null", allow_deferred_init=True, dtype=t)
        self._cached_graph = (flat, outputs)

    def __repr__(self):
        return "%s(\n%s : %d -> %d\n)" % (type(self).__name__, self._symbol,
                                          len(self._input_names),
                                          len(self._symbol.list_outputs()))

    def _params_by_name(self):
        return dict(self.params.items())

    def _clear_cached_op(self):
        kept = self._cached_graph
        super()._clear_cached_op()
        self._cached_graph = kept

    def hybrid_forward(self, F, x, *args, **kwargs):
        raise NotImplementedError("SymbolBlock computes its Symbol; it has no hybrid_forward")

    def _is_np_style(self):
        return False

    def forward(self, x, *args):
        inputs = (x,) + args
        flat = _hybrid.flatten(list(inputs), "input")[0]
        if any(isinstance(a, Symbol) for a in flat):
            return self._compose(inputs)
        self._finish_deferred(inputs)
        return self._call_cached_op(*inputs)

    def _call_cached_op(self, *args):
        graph = self._cached_op
        if not isinstance(graph, _SymbolGraph):
            graph = self._cached_op = _SymbolGraph(self)
        return graph(args, None)

    def _compose(self, inputs):
        flat, fmt = _hybrid.flatten(list(inputs), "input")
        if len(flat) != len(self._input_names):
            raise ValueError("SymbolBlock: expected %d inputs %s, got %d"
                             % (len(self._input_names), self._input_names, len(flat)))
        out = self._symbol(**dict(zip(self._input_names, flat)))
        scope = _hybrid.current_scope()
        if scope is not None:
            for name, param in self.params.items():
                scope.adopt(name, param)
        if self._sym_out_fmt == 0:
            return out
        return list(out)

    # ------------------------------------------------------------ shapes and dtypes
    def _inputs_attr(self, args, attr):
        flat = [a for a in _hybrid.flatten(list(args), "input")[0] if a is not None]
        return {n: getattr(a, attr) for n, a in zip(self._input_names, flat)}

    def infer_shape(self, *args):
        """Set the Parameters' shapes from the Symbol and the input arrays ``args``."""
        given = self._inputs_attr(args, "shape")
        arg_shapes, _, aux_shapes = self._symbol.infer_shape(**given)
        if arg_shapes is None:
            raise ValueError("SymbolBlock: cannot infer the Parameters' shapes from inputs %s"
                             % given)
        self._set_attr("shape", self._symbol.list_arguments(), arg_shapes,
                       self._symbol.list_auxiliary_states(), aux_shapes)

    def infer_type(self, *args):
        """Set the Parameters' dtypes from the Symbol and the input arrays ``args``."""
        given = self._inputs_attr(args, "dtype")
        arg_types, _, aux_types = self._symbol.infer_type(**given)
        if arg_types is None:
            return
        self._set_attr("dtype", self._symbol.list_arguments(), arg_types,
                       self._symbol.list_auxiliary_states(), aux_types)

    def _set_attr(self, attr, arg_names, arg_values, aux_names, aux_values):
        params = self._params_by_name()
        for n, v in list(zip(arg_names, arg_values)) + list(zip(aux_names, aux_values)):
            if n in params and v is not None:
                setattr(params[n], attr, tuple(v) if attr == "shape" else v)

    def cast(self, dtype):
        super().cast(dtype)

    # ------------------------------------------------------------ files
    @staticmethod
    def imports(symbol_file, input_names, param_file=None, ctx=None, allow_missing=False,
                ignore_extra=False):
        """A SymbolBlock from ``model-symbol.json`` (``export``'s, or MXNet's) and, optionally,
        its ``model-0000.params``.

        Parameters
        ----------
        symbol_file : str
        input_names : str or list of str
            The names of the input variables (``'data'``).
        param_file : str, optional
            Without it, initialise the block before use.
        ctx : Context, optional
            Accepted for MXNet compatibility (fastgrad computes on the CPU).
        allow_missing, ignore_extra : bool
            As :meth:`ParameterDict.load`.

        Examples
        --------
        >>> net = mx.gluon.SymbolBlock.imports('model-symbol.json', ['data'],
        ...                                    'model-0000.params')   # doctest: +SKIP
        """
        symbol = _load_symbol(symbol_file)
        if isinstance(input_names, str):
            input_names = [input_names]
        if param_file is None:
            inputs = [_sym.var(n, dtype=np.float32) for n in input_names]
        else:
            inputs = [_sym.var(n) for n in input_names]
        block = SymbolBlock(symbol, inputs)
        if param_file is not None:
            _load_params(block, param_file, ctx, allow_missing, ignore_extra)
        return block


def _param_types(inputs, outputs):
    """The dtypes of the Symbol's arguments and auxiliary states, inferred from the inputs'
    declared dtypes; float32 for all when an input declares none (as MXNet's
    ``_infer_param_types``)."""
    declared = {}
    for s in inputs:
        dtype = s._entries[0][0].attrs.get("dtype")
        if dtype is None:
            declared = None
            break
        declared[s.name] = dtype
    n_args = len(outputs.list_arguments())
    n_aux = len(outputs.list_auxiliary_states())
    if declared and _conflicts(outputs, declared):
        declared = None             # MXNet's inference fails: everything float32
    if declared is not None:
        try:
            arg_types, _, aux_types = outputs.infer_type(**declared)
        except (ValueError, TypeError, NotImplementedError):
            arg_types = aux_types = None
        # (``t is None``: a NumPy dtype compares equal to None, the default float64)
        if arg_types is not None and aux_types is not None and \
                not any(t is None for t in list(arg_types) + list(aux_types)):
            return list(arg_types), list(aux_types)
    return [np.float32] * n_args, [np.float32] * n_aux


def _conflicts(outputs, declared):
    """Whether a Parameter variable declares a floating dtype other than the inputs' (MXNet's
    type inference then fails, and ``_infer_param_types`` falls back to float32)."""
    wanted = {np.dtype(t) for t in declared.values() if np.dtype(t).kind == "f"}
    if len(wanted) != 1:
        return False
    wanted, = wanted
    for node in topo_nodes(outputs._entries):
        if node.op != VARIABLE or node.name in declared:
            continue
        dtype = node.attrs.get("dtype")
        if dtype is not None and np.dtype(dtype).kind == "f" and np.dtype(dtype) != wanted:
            return True
    return False


def _load_symbol(path):
    try:
        with open(path, "r", encoding="utf-8") as f:
            text = f.read()
    except UnicodeDecodeError as exc:
        raise ValueError("SymbolBlock.imports: %s is not a symbol JSON file (not UTF-8 text: "
                         "%s)" % (path, exc)) from exc
    try:
        json.loads(text)
    except ValueError as exc:
        raise ValueError("SymbolBlock.imports: %s is not a valid symbol JSON file (corrupt or "
                         "truncated: %s)" % (path, exc)) from exc
    try:
        return _sym.load_json(text)
    except Exception as exc:
        raise ValueError("SymbolBlock.imports: %s could not be read as an MXNet symbol: %s"
                         % (path, exc)) from exc


def _load_params(block, path, ctx, allow_missing, ignore_extra):
    try:
        block.collect_params().load(path, ctx=ctx, allow_missing=allow_missing,
                                    ignore_extra=ignore_extra, cast_dtype=True,
                                    dtype_source="saved")
    except (ValueError, EOFError, OSError, TypeError, KeyError) as exc:
        if path in str(exc) or isinstance(exc, FileNotFoundError):
            raise
        raise type(exc)("SymbolBlock.imports: cannot load %s: %s" % (path, exc)) from exc
