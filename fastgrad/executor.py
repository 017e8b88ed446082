"""The executor: a symbol bound to argument values, run forward and backward from a plan.

Note [Executor plan]
~~~~~~~~~~~~~~~~~~~~
Binding plans the graph once. Every output of every node gets a *slot* in a list of values;
nodes become *steps* in creation order (Note [Symbol graph] in ``symbol/_graph.py``):

* arguments' slots are filled from the bound arrays at each forward;
* constants, and primitives that depend on no argument, are computed once at bind (constant
  folding) and never again;
* every other primitive is a step that calls its NumPy kernel on the slots of its inputs. The
  slots are kept until the next forward, so they *are* what the backward pass needs: there is
  no per-call recording, no wrapping, no dispatch;
* a composition (``sym.npx.softmax``, ``sym.npx.dropout``) calls its function on fastgrad
  arrays, recorded on the tape when a gradient will be needed, and its backward is one
  ``autograd.grad``-style pass of the tape engine over that small graph.

Backward visits the steps in reverse and calls each primitive's generated derivative rule
exactly as the tape engine does (same arguments, same input mask), sums each gradient back to
its input's shape and dtype, and accumulates contributions in the engine's way: the first is
kept, later ones are added (Note [Accumulation] in ``_engine.pyx``). Because the steps run in
the order the operations were created, which is the order the engine visits the same program
recorded imperatively, the executor's gradients are equal to the imperative ones bit for bit
(``tests/test_executor.py`` checks this). Which inputs a step differentiates is fixed at bind:
those that depend on an argument whose ``grad_req`` is not ``'null'``.

Note [Executor buffers]
~~~~~~~~~~~~~~~~~~~~~~~
Arguments are copied in at bind and live in the executor (``arg_dict``); gradients are written
into buffers allocated once (or the ``args_grad`` arrays given to bind), with ``'write'``
overwriting and ``'add'`` accumulating across backward calls; outputs are copied into arrays
allocated at the first forward and reused while their shapes do not change, so
``executor.outputs`` are the same objects after every forward (MXNet's static allocation).
An executor is not meant to be shared between threads.
"""

import numpy as np

from fastgrad._array import ndarray, unwrap, _wrap, parse_grad_req
from fastgrad._kernels import sum_to
from fastgrad._state import set_recording, set_training
from fastgrad import _engine
from fastgrad.symbol._graph import topo_nodes, dfs_nodes, run_composite
from fastgrad.symbol._ops import VARIABLE, CONSTANT, is_primitive
from fastgrad.symbol._optimize import optimize

_PRIM, _COMPOSITE = 0, 1


class _Step:
    __slots__ = ("kind", "fn", "name", "ins", "params", "outs", "mask", "needs", "n_out",
                 "tape", "rule", "saved_slots", "shape_slots", "result", "need_slots")

    def __init__(self, kind, fn, name, ins, params, outs):
        self.kind = kind
        self.fn = fn
        self.name = name
        self.ins = ins
        self.params = params
        self.outs = outs
        self.n_out = len(outs)
        self.mask = 0
        self.needs = ()
        self.tape = None
        self.rule = None
        self.saved_slots = ()
        self.shape_slots = ()
        self.result = False
        self.need_slots = ()

    def prepare_rule(self):
        """Precompute where the derivative rule's arguments live (Note [Executor plan])."""
        save_inputs, save_shapes, save_result = self.fn.saves
        self.rule = self.fn.backward
        self.saved_slots = tuple(self.ins[j] for j in save_inputs)
        self.shape_slots = tuple(self.ins[j] for j in save_shapes)
        self.result = bool(save_result)
        self.need_slots = tuple((i, self.ins[i]) for i in self.needs)


def _diff_flag(prim, i):
    if prim.n_in < 0:
        return prim.diff[0] if prim.diff else 1
    return prim.diff[i]


class _Plan:
    """Slots and steps of a bound graph (Note [Executor plan])."""

    def __init__(self, symbol, arg_names, requires_grad):
        nodes = topo_nodes(symbol._entries)
        self.slot = {}
        self.values = []
        self.arg_slots = {}
        static = []       # slot holds a value fixed at bind
        requires = []     # slot depends on an argument that wants a gradient
        self.steps = []

        def new_slot(value, is_static, req):
            self.values.append(value)
            static.append(is_static)
            requires.append(req)
            return len(self.values) - 1

        for node in nodes:
            if node.op == VARIABLE:
                s = new_slot(None, False, requires_grad[node.name])
                self.slot[(node.id, 0)] = s
                self.arg_slots[node.name] = s
                continue
            if node.op == CONSTANT:
                self.slot[(node.id, 0)] = new_slot(node.value, True, False)
                continue
            fn = node.fn
            ins = tuple(self.slot[(p.id, k)] for p, k in node.inputs)
            if is_primitive(fn):
                if all(static[s] for s in ins):
                    with np.errstate(all="ignore"):
                        out = fn.forward(*[self.values[s] for s in ins], *node.params)
                    outs = [out] if fn.n_out == 1 else list(out)
                    if len(outs) != node.num_outputs:
                        raise ValueError("bind: %s (op %s) produced %d outputs, its node "
                                         "declares %d" % (node.name, node.op, len(outs),
                                                          node.num_outputs))
                    for i, o in enumerate(outs):
                        self.slot[(node.id, i)] = new_slot(np.asarray(o), True, False)
                    continue
                mask = 0
                needs = []
                if fn.differentiable:
                    for i, s in enumerate(ins):
                        if not requires[s]:
                            continue
                        flag = _diff_flag(fn, i)
                        if flag == 1:
                            mask |= (1 << i) if i < 30 else (1 << 30)
                            needs.append(i)
                        elif flag == -1:
                            raise NotImplementedError(
                                "bind: fastgrad.%s (node %r) has no derivative with respect "
                                "to its input %d, which depends on an argument that wants a "
                                "gradient; use grad_req='null' for it" % (fn.name, node.name, i))
                req = mask != 0
                outs = tuple(new_slot(None, False, req) for _ in range(node.num_outputs))
                step = _Step(_PRIM, fn, node.name, ins, tuple(node.params), outs)
                step.mask = mask
                step.needs = tuple(needs)
                if mask:
                    step.prepare_rule()
            else:
                needs = tuple(i for i, s in enumerate(ins) if requires[s])
                outs = tuple(new_slot(None, False, bool(needs))
                             for _ in range(node.num_outputs))
                step = _Step(_COMPOSITE, fn, node.op, ins, node.params, outs)
                step.needs = needs
                step.mask = 1 if needs else 0
            for i in range(node.num_outputs):
                self.slot[(node.id, i)] = outs[i]
            self.steps.append(step)
        self.out_slots = [self.slot[(n.id, k)] for n, k in symbol._entries]
        self.requires = requires
        self.any_grad = any(step.mask for step in self.steps) or any(
            requires[s] for s in self.out_slots)


def _copy_in(value, what):
    if isinstance(value, ndarray):
        return _wrap(np.array(unwrap(value)), type(value))
    if isinstance(value, (np.ndarray, list, tuple, int, float, np.generic)):
        data = np.array(value)
        if not isinstance(value, np.ndarray) and data.dtype.kind in "fiu":
            data = data.astype(np.float32)
        return _wrap(data)
    raise TypeError("%s must be an array, not %s" % (what, type(value).__name__))


def _named(values, names, what, allow_missing=False):
    """``values`` (dict or list) as a dict over ``names``, with clear errors."""
    if values is None:
        values = {}
    if isinstance(values, dict):
        unknown = [k for k in values if k not in names]
        if unknown:
            raise ValueError("bind: %s has names %s that are not arguments of the symbol "
                             "(arguments: %s)" % (what, unknown, names))
        out = dict(values)
    elif isinstance(values, (list, tuple)):
        if len(values) != len(names):
            raise ValueError("bind: %s has %d values but the symbol has %d arguments %s"
                             % (what, len(values), len(names), names))
        out = dict(zip(names, values))
    else:
        raise TypeError("bind: %s must be a dict or a list, not %s"
                        % (what, type(values).__name__))
    if not allow_missing:
        missing = [n for n in names if n not in out or out[n] is None]
        if missing:
            raise ValueError("bind: no value for argument(s) %s" % missing)
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
        if aux_states:
            raise ValueError("bind: fastgrad ops have no auxiliary states, got %r"
                             % (list(aux_states) if isinstance(aux_states, dict)
                                else aux_states,))
        given = _named(args, names, "args")
        self._args = [_copy_in(given[n], "argument %r" % n) for n in names]
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
        requires = {n: req != "null" for n, req in zip(names, self._reqs)}
        self._plan = _Plan(symbol, names, requires)
        self._requires_grad = any(requires.values())
        self.outputs = None
        self._is_train = False

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
        return list(self._args)

    @property
    def grad_arrays(self):
        """The gradient buffers, in ``list_arguments()`` order (``None`` for ``'null'``)."""
        return list(self._grads)

    @property
    def aux_arrays(self):
        """Auxiliary state arrays (fastgrad ops have none)."""
        return []

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
        return {}

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

    # ------------------------------------------------------------ parameters
    def copy_params_from(self, arg_params, aux_params=None, allow_extra_params=False):
        """Copy values into the bound arguments (cast to each argument's dtype).

        Parameters
        ----------
        arg_params : dict of str to array
        aux_params : dict of str to array, optional
            Auxiliary states; fastgrad ops have none, so any name is extra.
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
        for name in dict(aux_params or {}):
            if not allow_extra_params:
                raise ValueError("copy_params_from: %r is not an auxiliary state of the symbol "
                                 "(it has none)" % (name,))

    def _set_arg(self, i, value, what, reshape):
        dst = self._args[i]
        data = np.asarray(unwrap(value))
        if data.shape != dst.shape:
            if not reshape:
                raise ValueError("%s: %r has shape %s but the argument has shape %s"
                                 % (what, self._arg_names[i], data.shape, dst.shape))
            if not self._own_grad[i]:
                raise ValueError("%s: %r has shape %s but its args_grad buffer has shape %s"
                                 % (what, self._arg_names[i], data.shape, dst.shape))
            self._args[i] = _wrap(np.array(data, dtype=dst.dtype), type(dst))
            if self._grads[i] is not None:
                self._grads[i] = _wrap(np.zeros(data.shape, dst.dtype), type(dst))
            return
        np.copyto(unwrap(dst), data, casting="unsafe")

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
        plan = self._plan
        vals = plan.values
        for name, a in zip(self._arg_names, self._args):
            vals[plan.arg_slots[name]] = unwrap(a)
        prev_train = set_training(bool(is_train))
        prev_rec = set_recording(False)
        try:
            for step in plan.steps:
                if step.kind == _PRIM:
                    out = step.fn.forward(*[vals[s] for s in step.ins], *step.params)
                    if step.n_out == 1:
                        vals[step.outs[0]] = out if type(out) is np.ndarray else np.asarray(out)
                    else:
                        for s, o in zip(step.outs, out):
                            vals[s] = o if type(o) is np.ndarray else np.asarray(o)
                else:
                    self._forward_composite(step, vals, bool(is_train))
        finally:
            set_recording(prev_rec)
            set_training(prev_train)
        self._is_train = bool(is_train)
        self._store_outputs(vals)
        return self.outputs

    def _forward_composite(self, step, vals, is_train):
        inputs = []
        variables = []
        for i, s in enumerate(step.ins):
            a = _wrap(vals[s])
            if i in step.needs and a.dtype.kind in "fc":
                a.attach_grad()
                variables.append((i, a))
            inputs.append(a)
        set_recording(bool(variables))
        try:
            outs = run_composite(step.fn, step.name, step.params, inputs, step.n_out)
        finally:
            set_recording(False)
        for s, o in zip(step.outs, outs):
            vals[s] = unwrap(o)
        step.tape = (variables, outs) if variables else None

    def _store_outputs(self, vals):
        outs = self.outputs
        fresh = outs is None
        if not fresh:
            for o, s in zip(outs, self._plan.out_slots):
                v = np.asarray(vals[s])
                if o.shape != v.shape or o.dtype != v.dtype:
                    fresh = True
                    break
        if fresh:
            self.outputs = [_wrap(np.array(vals[s]), self._out_cls)
                            for s in self._plan.out_slots]
            return
        for o, s in zip(outs, self._plan.out_slots):
            np.copyto(unwrap(o), vals[s])

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
        if self.outputs is None:
            self.forward(is_train=True)
        if not self._requires_grad:
            return
        plan = self._plan
        vals = plan.values
        n_slots = len(vals)
        acc = [None] * n_slots
        owned = [False] * n_slots
        heads = self._head_grads(out_grads)
        for s, g in zip(plan.out_slots, heads):
            if plan.requires[s]:
                _accumulate(acc, owned, s, g)
        for step in reversed(plan.steps):
            if not step.mask:
                continue
            if step.n_out == 1:
                g = acc[step.outs[0]]
                if g is None:
                    continue
                acc[step.outs[0]] = None
            else:
                gs = [acc[s] for s in step.outs]
                if all(x is None for x in gs):
                    continue
                g = tuple(x if x is not None else np.zeros(np.shape(vals[s]),
                                                           np.asarray(vals[s]).dtype)
                          for x, s in zip(gs, step.outs))
                for s in step.outs:
                    acc[s] = None
            if step.kind == _PRIM:
                grads = _call_rule(step, g, vals)
                if len(grads) != len(step.ins):
                    raise RuntimeError("fastgrad.%s: its derivative rule returned %d gradients "
                                       "for %d inputs" % (step.fn.name, len(grads),
                                                          len(step.ins)))
                for i, s in step.need_slots:
                    gi = grads[i]
                    if gi is None:
                        continue
                    v = vals[s]
                    if (type(gi) is not ndarray_np or type(v) is not ndarray_np
                            or gi.shape != v.shape or gi.dtype != v.dtype):
                        gi = _fit(gi, v, step, i)
                    cur = acc[s]
                    if cur is None:
                        acc[s] = gi
                    elif owned[s]:
                        np.add(cur, gi, out=cur)
                    else:
                        acc[s] = cur + gi
                        owned[s] = True
            else:
                for i, gi in self._backward_composite(step, g):
                    s = step.ins[i]
                    _accumulate(acc, owned, s, _fit(gi, vals[s], step, i))
        for name, grad, req in zip(self._arg_names, self._grads, self._reqs):
            if req == "null" or grad is None:
                continue
            g = acc[plan.arg_slots[name]]
            buf = unwrap(grad)
            if g is None:
                if req == "write":
                    buf[...] = 0
            elif req == "write":
                np.copyto(buf, g)
            else:
                np.add(buf, g, out=buf)

    def _backward_composite(self, step, g):
        if step.tape is None:
            return []
        variables, outs = step.tape
        gs = [g] if step.n_out == 1 else list(g)
        heads, hgs = [], []
        for o, gk in zip(outs, gs):
            if gk is not None and o.node is not None:
                heads.append(o)
                hgs.append(gk)
        if not heads:
            return []
        grads = _engine.run_backward(heads, hgs, [a for _, a in variables], False, False, True,
                                     True)
        return [(i, unwrap(gr)) for (i, _), gr in zip(variables, grads)]

    def _head_grads(self, out_grads):
        n = len(self._output_names)
        if out_grads is None:
            out_grads = [None] * n
        elif isinstance(out_grads, dict):
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


ndarray_np = np.ndarray


def _call_rule(step, g, vals):
    # The arguments in the order the generated rule takes them (see _registry._compile):
    # g, needs, saved inputs, saved shapes, result, params.
    args = [g, step.mask]
    for s in step.saved_slots:
        args.append(vals[s])
    for s in step.shape_slots:
        v = vals[s]
        args.append(v.shape if type(v) is ndarray_np else np.shape(v))
    if step.result:
        if step.n_out == 1:
            args.append(vals[step.outs[0]])
        else:
            args.append(tuple([vals[s] for s in step.outs]))
    if step.params:
        args.extend(step.params)
    return step.rule(*args)


def _fit(g, value, step, i):
    """``g`` summed back to the shape of ``value`` and cast to its dtype (as the engine does)."""
    if type(g) is not np.ndarray:
        g = unwrap(g) if isinstance(g, ndarray) else np.asarray(g)
    if type(value) is np.ndarray:
        shape, dtype = value.shape, value.dtype
    else:
        v = np.asarray(value)
        shape, dtype = v.shape, v.dtype
    if g.shape != shape:
        try:
            g = sum_to(g, shape)
        except ValueError:
            raise ValueError("fastgrad.%s: the gradient for input %d has shape %s, which cannot "
                             "be summed to the input's shape %s"
                             % (step.name, i, g.shape, shape)) from None
    if g.dtype != dtype:
        g = g.astype(dtype)
    return g


def _accumulate(acc, owned, s, g):
    # Note [Accumulation] in _engine.pyx: keep the first, add the second out of place, then
    # add in place into the buffer this pass owns.
    cur = acc[s]
    if cur is None:
        acc[s] = g
    elif owned[s]:
        np.add(cur, g, out=cur)
    else:
        acc[s] = cur + g
        owned[s] = True
