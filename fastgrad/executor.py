"""The executor: a symbol bound to argument values, run forward and backward from a plan.

The plan, a forward schedule and a backward replay in the engine's order, is built at bind,
and once more before the second forward with MXNet's layer operators replaced by the primitives
the first forward traced (Note [Composite expansion] in ``symbol/_expand.py``): see Note
[Executor plan] and Note [Backward replay] in ``fastgrad/symbol/_plan.pyx``. The replay
runs the derivative rules and then the engine's own fitting, accumulation and gradient writing
(``_engine.pxd``), so the executor's gradients are the tape's bit for bit.

Note [Executor buffers]
~~~~~~~~~~~~~~~~~~~~~~~
Arguments are copied in at bind and live in the executor (``arg_dict``); gradients are written
into buffers allocated once (or the ``args_grad`` arrays given to bind), with ``'write'``
overwriting and ``'add'`` accumulating across backward calls. Like an ``attach_grad`` buffer,
a ``grad_dict`` array the executor allocated stays the same object but may receive a gradient
buffer the pass computed instead of a copy of it (read it through ``grad_dict`` after each
backward); ``args_grad`` arrays keep their memory; outputs are copied into arrays
allocated at the first forward and reused while their shapes do not change, so
``executor.outputs`` are the same objects after every forward (MXNet's static allocation).
An executor is not meant to be shared between threads.
"""

import numpy as np

from fastgrad._core._array import ndarray, unwrap, _wrap, parse_grad_req
from fastgrad.symbol._plan import Plan
from fastgrad.symbol._expand import expand, traced_symbol
from fastgrad.symbol._optimize import optimize


def _copy_in(value, what):
    if isinstance(value, ndarray):
        return _wrap(np.array(unwrap(value)), type(value))
    if isinstance(value, (np.ndarray, list, tuple, int, float, np.generic)):
        data = np.array(value)
        if not isinstance(value, np.ndarray) and data.dtype.kind in "fiu":
            data = data.astype(np.float32)
        return _wrap(data)
    raise TypeError("%s must be an array, not %s" % (what, type(value).__name__))


def _named(values, names, what, allow_missing=False, kind="arguments"):
    """``values`` (dict or list) as a dict over ``names``, with clear errors."""
    if values is None:
        values = {}
    if isinstance(values, dict):
        unknown = [k for k in values if k not in names]
        if unknown:
            raise ValueError("bind: %s has names %s that are not %s of the symbol "
                             "(%s: %s)" % (what, unknown, kind, kind, names))
        out = dict(values)
    elif isinstance(values, (list, tuple)):
        if len(values) != len(names):
            raise ValueError("bind: %s has %d values but the symbol has %d %s %s"
                             % (what, len(values), len(names), kind, names))
        out = dict(zip(names, values))
    else:
        raise TypeError("bind: %s must be a dict or a list, not %s"
                        % (what, type(values).__name__))
    if not allow_missing:
        missing = [n for n in names if n not in out or out[n] is None]
        if missing:
            raise ValueError("bind: no value for %s %s" % (kind, missing))
    return out


class Executor:
    """A symbol bound to argument values (see :meth:`fastgrad.sym.Symbol.bind`).

    Examples
    --------
    >>> import fastgrad as mx
    >>> a, b = mx.sym.var('a'), mx.sym.var('b')
    >>> ex = (2 * a + b).bind(mx.cpu(), {'a': mx.nd.array([1, 2]), 'b': mx.nd.array([2, 3])})
    >>> ex.forward()[0].asnumpy()
    array([4., 7.], dtype=float32)
    >>> ex.backward(mx.nd.array([1, 1]))
    >>> ex.grad_dict['a'].asnumpy()
    array([2., 2.], dtype=float32)
    """

    def __init__(self, symbol, ctx, args, args_grad=None, grad_req="write", aux_states=None):
        self._symbol = symbol
        self._ctx = ctx
        names = symbol.list_arguments()
        dups = sorted({n for n in names if names.count(n) > 1})
        if dups:
            raise ValueError("bind: the symbol has several arguments named %s; give every "
                             "variable a distinct name" % dups)
        self._arg_names = names
        self._aux_names = symbol.list_auxiliary_states()
        self._output_names = symbol.list_outputs()
        given = _named(args, names, "args")
        self._args = [_copy_in(given[n], "argument %r" % n) for n in names]
        aux_given = _named(aux_states, self._aux_names, "aux_states",
                           kind="auxiliary states")
        # Auxiliary states live after the arguments in the plan's lists (Note [Executor
        # buffers]); they never get a gradient and their operator updates them in place.
        aux_arrays = [_copy_in(aux_given[n], "auxiliary state %r" % n) for n in self._aux_names]
        # Outputs have the array type of the arguments (``nd.NDArray`` in, ``nd.NDArray`` out).
        self._out_cls = type(self._args[0]) if self._args else ndarray
        self._reqs = self._parse_reqs(grad_req)
        grads = _named(args_grad, names, "args_grad", allow_missing=True)
        self._grads = []
        self._own_grad = []
        for n, a, req in zip(names, self._args, self._reqs):
            g = grads.get(n)
            if g is not None:
                if not isinstance(g, (ndarray, np.ndarray)):
                    raise TypeError("bind: args_grad[%r] must be an array" % n)
                if isinstance(g, np.ndarray):
                    g = _wrap(g)
                if g.shape != a.shape:
                    raise ValueError("bind: args_grad[%r] has shape %s but the argument has "
                                     "shape %s" % (n, g.shape, a.shape))
                self._own_grad.append(False)
            elif req != "null":
                g = _wrap(np.zeros_like(unwrap(a)), type(a))
                self._own_grad.append(True)
            else:
                self._own_grad.append(True)
            self._grads.append(g)
        self._n_args = len(names)
        self._args.extend(aux_arrays)
        self._grads.extend([None] * len(aux_arrays))
        self._own_grad.extend([True] * len(aux_arrays))
        self._plan = self._make_plan(symbol, trace=True)
        self._replan = False            # an argument's shape changed: plan the symbol again
        self._requires_grad = self._plan.any_grad
        self.outputs = None
        self._ran_forward = False
        self._is_train = False
        self._allocate_outputs()

    def _allocate_outputs(self, like=None):
        """Output arrays of the inferred shapes and dtypes, as MXNet allocates them at bind;
        with ``like`` (another executor's outputs, for ``reshape``) an output no larger than
        its counterpart is a view of the start of its memory, as in MXNet. An output whose
        shape cannot be inferred before the first forward is allocated by that forward."""
        shapes = {n: a.shape for n, a in zip(self._arg_names, self._args)}
        dtypes = {n: a.dtype for n, a in zip(self._arg_names, self._args)}
        try:
            _, out_shapes, _ = self._symbol.infer_shape(**shapes)
            _, out_types, _ = self._symbol.infer_type(**dtypes)
        except (ValueError, TypeError, NotImplementedError):
            return
        if out_shapes is None or any(t is None for t in out_types):
            return
        outputs = []
        for i, (shape, dtype) in enumerate(zip(out_shapes, out_types)):
            shape, size = tuple(shape), int(np.prod(shape))
            old = None if like is None else unwrap(like[i])
            if old is not None and old.dtype == dtype and size <= old.size \
                    and old.flags.c_contiguous:
                data = old.reshape(-1)[:size].reshape(shape)
            else:
                data = np.zeros(shape, dtype)
            outputs.append(_wrap(data, self._out_cls))
        self.outputs = outputs
        self._plan.set_outputs(outputs)

    def _make_plan(self, symbol, trace):
        return Plan(symbol, self._arg_names + self._aux_names,
                    self._reqs + ["null"] * len(self._aux_names), self._args, self._grads,
                    self._own_grad, self._out_cls, trace)

    def _next_plan(self):
        """The plan the next forward runs (Note [Composite expansion] in
        ``symbol/_expand.py``): the symbol planned again after a new argument shape, or with
        the composites the last forward traced replaced by their primitives."""
        if self._replan:
            self._replan = False
            new = self._make_plan(self._symbol, trace=True)
        else:
            traces = self._plan.take_traces()
            if traces is None:
                return
            subs = {}
            for node_id, (inputs, outputs) in traces.items():
                sub = traced_symbol(inputs, outputs)
                if sub is not None:
                    subs[node_id] = sub
            if not subs:
                return
            new = self._make_plan(expand(self._symbol, subs), trace=False)
        new.adopt_outputs(self._plan)
        self._plan = new

    def _parse_reqs(self, grad_req):
        names = self._arg_names
        if isinstance(grad_req, str):
            reqs = [grad_req] * len(names)
        elif isinstance(grad_req, (list, tuple)):
            if len(grad_req) != len(names):
                raise ValueError("bind: grad_req has %d entries for %d arguments %s"
                                 % (len(grad_req), len(names), names))
            reqs = list(grad_req)
        elif isinstance(grad_req, dict):
            unknown = [k for k in grad_req if k not in names]
            if unknown:
                raise ValueError("bind: grad_req names %s that are not arguments (arguments: "
                                 "%s)" % (unknown, names))
            reqs = [grad_req.get(n, "null") for n in names]
        else:
            raise TypeError("bind: grad_req must be a str, list or dict")
        for n, r in zip(names, reqs):
            parse_grad_req(r)
        out = []
        for n, r, a in zip(names, reqs, self._args):
            if r == "inplace":
                r = "write"
            # Gradients exist only for floating-point arguments (indices, labels, masks).
            out.append(r if a.dtype.kind in "fc" else "null")
        return out

    # ------------------------------------------------------------ views
    @property
    def arg_arrays(self):
        """The argument arrays, in ``list_arguments()`` order."""
        return self._args[:self._n_args]

    @property
    def grad_arrays(self):
        """The gradient buffers, in ``list_arguments()`` order (``None`` for ``'null'``)."""
        return self._grads[:self._n_args]

    @property
    def aux_arrays(self):
        """The auxiliary state arrays, in ``list_auxiliary_states()`` order."""
        return self._args[self._n_args:]

    @property
    def arg_dict(self):
        """``{argument name: array}``; write into these to change the inputs."""
        return dict(zip(self._arg_names, self._args))

    @property
    def grad_dict(self):
        """``{argument name: gradient buffer}`` (``None`` for ``'null'`` arguments)."""
        return dict(zip(self._arg_names, self._grads))

    @property
    def aux_dict(self):
        """``{auxiliary state name: array}`` (``BatchNorm``'s moving statistics)."""
        return dict(zip(self._aux_names, self.aux_arrays))

    @property
    def output_dict(self):
        """``{output name: array}`` of the last forward."""
        if self.outputs is None:
            raise RuntimeError("output_dict: call forward() first")
        return dict(zip(self._output_names, self.outputs))

    def get_optimized_symbol(self):
        """The bound symbol with constants folded and common subexpressions merged.

        See Note [Graph optimization] in ``fastgrad/symbol/_optimize.py``.
        """
        return optimize(self._symbol)

    def debug_str(self):
        """The bound graph as MXNet's ``Executor.debug_str`` prints it: the symbol's
        :meth:`~fastgrad.sym.Symbol.debug_str`, then the backward steps in the order backward
        replays them, and the memory the executor holds.

        The backward steps are fastgrad's (one per symbol node a gradient flows through, named
        ``<node>_backward``), not MXNet's backward operators.
        """
        lines = [self._symbol.debug_str().rstrip("\n")]
        for step in self._plan.backward_steps:
            op = step.op.rsplit(".", 1)[-1]          # mx.Activation -> Activation
            lines += ["-" * 20, "Op:_backward_%s, Name=%s_backward" % (op, step.name),
                      "Control deps:", "\tcdep[0]=%s" % step.name]
        arrays = list(self._args) + [g for g in self._grads if g is not None] + \
            list(self.outputs or [])
        megabytes = sum(unwrap(a).nbytes for a in arrays) // (1 << 20)
        lines.append("Total %d MB allocated" % megabytes)
        return "\n".join(lines) + "\n"

    # ------------------------------------------------------------ parameters
    def copy_params_from(self, arg_params, aux_params=None, allow_extra_params=False):
        """Copy values into the bound arguments (cast to each argument's dtype).

        Parameters
        ----------
        arg_params : dict of str to array
        aux_params : dict of str to array, optional
            Values for the auxiliary states.
        allow_extra_params : bool
            Ignore names that are not arguments instead of raising ``ValueError``.
        """
        index = {n: i for i, n in enumerate(self._arg_names)}
        for name, value in dict(arg_params).items():
            if name not in index:
                if allow_extra_params:
                    continue
                raise ValueError("copy_params_from: %r is not an argument of the symbol "
                                 "(arguments: %s)" % (name, self._arg_names))
            self._set_arg(index[name], value, "copy_params_from", reshape=False)
        aux_index = {n: self._n_args + i for i, n in enumerate(self._aux_names)}
        for name, value in dict(aux_params or {}).items():
            if name not in aux_index:
                if allow_extra_params:
                    continue
                raise ValueError("copy_params_from: %r is not an auxiliary state of the symbol "
                                 "(auxiliary states: %s)" % (name, self._aux_names))
            self._set_arg(aux_index[name], value, "copy_params_from", reshape=False)

    def _set_arg(self, i, value, what, reshape):
        dst = self._args[i]
        names = self._arg_names + self._aux_names
        data = np.asarray(unwrap(value))
        if data.shape != dst.shape:
            if not reshape:
                raise ValueError("%s: %r has shape %s but the argument has shape %s"
                                 % (what, names[i], data.shape, dst.shape))
            if not self._own_grad[i]:
                raise ValueError("%s: %r has shape %s but its args_grad buffer has shape %s"
                                 % (what, names[i], data.shape, dst.shape))
            self._args[i] = _wrap(np.array(data, dtype=dst.dtype), type(dst))
            self._replan = True         # traces were made for the old shapes
            if self._grads[i] is not None:
                self._grads[i] = _wrap(np.zeros(data.shape, dst.dtype), type(dst))
                self._plan.set_grad(i, self._grads[i])
            return
        np.copyto(unwrap(dst), data, casting="unsafe")

    def reshape(self, partial_shaping=False, allow_up_sizing=False, **kwargs):
        """A new executor for new input shapes (``data=(64, 3, 32, 32)``), as MXNet's.

        The other inputs' shapes are inferred again; an input whose shape does not change
        is shared with this executor (the same array), one that shrinks is a view of the start
        of its memory (as in MXNet), one that grows is a new zero array.

        Parameters
        ----------
        partial_shaping : bool
            Allow inputs not named in ``kwargs`` to change shape (else ``ValueError``).
        allow_up_sizing : bool
            Allow an input to grow (else ``ValueError``, as MXNet, which reuses memory).
        **kwargs : tuple of int
            New shapes by input name.
        """
        names = self._arg_names + self._aux_names
        unknown = [k for k in kwargs if k not in names]
        if unknown:
            raise ValueError("reshape: %s are not inputs of the symbol (inputs: %s)"
                             % (unknown, names))
        new_shapes = {k: tuple(int(d) for d in v) for k, v in kwargs.items()}
        arg_shapes, _, aux_shapes = self._symbol.infer_shape(**new_shapes)
        if arg_shapes is None:
            current = {n: a.shape for n, a in zip(names, self._args)}
            current.update(new_shapes)
            arg_shapes, _, aux_shapes = self._symbol.infer_shape(**current)
        values = {}
        shared = []
        for i, (name, shape) in enumerate(zip(names, list(arg_shapes) + list(aux_shapes))):
            old = self._args[i]
            if tuple(shape) == old.shape:
                values[name] = old
                shared.append(i)
                continue
            if name not in new_shapes and not partial_shaping:
                raise ValueError("reshape: the shape of %r changes from %s to %s; pass "
                                 "partial_shaping=True to allow it" % (name, old.shape,
                                                                       tuple(shape)))
            if int(np.prod(shape)) > old.size and not allow_up_sizing:
                raise ValueError("reshape: %r grows from %s to %s; pass allow_up_sizing=True"
                                 % (name, old.shape, tuple(shape)))
            size = int(np.prod(shape))
            if size <= old.size:
                # As MXNet: a smaller array reuses the start of the old one's memory.
                flat = unwrap(old).reshape(-1)
                values[name] = _wrap(flat[:size].reshape(shape), type(old))
                shared.append(i)
            else:
                values[name] = _wrap(np.zeros(shape, old.dtype), type(old))
        out = Executor(self._symbol, self._ctx,
                       {n: values[n] for n in self._arg_names},
                       grad_req=list(self._reqs),
                       aux_states={n: values[n] for n in self._aux_names})
        for i in shared:
            out._args[i] = values[names[i]]
        if self.outputs is not None:
            out._allocate_outputs(like=self.outputs)
        return out

    # ------------------------------------------------------------ running
    def forward(self, is_train=False, **kwargs):
        """Run the graph and return the list of outputs.

        Parameters
        ----------
        is_train : bool
            Run in training mode (``autograd.is_training()`` is true inside compositions such
            as dropout).
        **kwargs : array
            New values for arguments, by name (copied in; a new shape is allowed).

        Returns
        -------
        list of ndarray
            ``self.outputs``: the same arrays after every forward (Note [Executor buffers]).
        """
        index = None
        for name, value in kwargs.items():
            if index is None:
                index = {n: i for i, n in enumerate(self._arg_names)}
            if name not in index:
                raise ValueError("forward: %r is not an argument of the symbol (arguments: %s)"
                                 % (name, self._arg_names))
            self._set_arg(index[name], value, "forward", reshape=True)
        self._next_plan()
        self.outputs = self._plan.forward(bool(is_train))
        self._ran_forward = True
        self._is_train = bool(is_train)
        return self.outputs

    def backward(self, out_grads=None, is_train=True):
        """Compute the gradients of the outputs with respect to the arguments.

        Writes (``'write'``) or adds (``'add'``) them into ``grad_dict``; arguments with
        ``grad_req='null'`` are left alone. Runs :meth:`forward` first if it never ran.

        Parameters
        ----------
        out_grads : array, list of arrays or dict of output name to array, optional
            The gradient with respect to each output; ones when omitted (the gradient of the
            sum of the outputs). Each must have its output's shape (a scalar fills it). With
            a dict, outputs it does not name get a zero gradient.
        is_train : bool
            Accepted for MXNet compatibility.
        """
        if not self._ran_forward:
            self.forward(is_train=True)
        if not self._requires_grad:
            return
        self._plan.backward(None if out_grads is None else self._head_grads(out_grads),
                            bool(is_train))

    def _head_grads(self, out_grads):
        n = len(self._output_names)
        if isinstance(out_grads, dict):
            unknown = [k for k in out_grads if k not in self._output_names]
            if unknown:
                raise ValueError("backward: out_grads names %s that are not outputs (outputs: "
                                 "%s)" % (unknown, self._output_names))
            # Outputs a dict does not name contribute no gradient.
            out_grads = [out_grads.get(k, 0.0) for k in self._output_names]
        elif isinstance(out_grads, (ndarray, np.ndarray)) or np.isscalar(out_grads):
            out_grads = [out_grads]
        else:
            out_grads = list(out_grads)
        if len(out_grads) != n:
            raise ValueError("backward: got %d output gradients for %d outputs"
                             % (len(out_grads), n))
        heads = []
        for i, (o, hg) in enumerate(zip(self.outputs, out_grads)):
            data = unwrap(o)
            if hg is None:
                g = np.ones_like(data)
            else:
                g = np.asarray(unwrap(hg))
                if g.ndim == 0 and not isinstance(hg, ndarray):
                    g = np.full(data.shape, g, dtype=data.dtype)
                elif g.shape != data.shape:
                    raise ValueError("backward: the gradient of output %d (%s) has shape %s but "
                                     "the output has shape %s"
                                     % (i, self._output_names[i], g.shape, data.shape))
                if g.dtype != data.dtype:
                    g = g.astype(data.dtype)
            heads.append(g)
        return heads
