"""Gluon's blocks: ``Block`` and ``HybridBlock`` (MXNet 1.9.1's), in both styles.

A block holds child blocks and Parameters, registered when they are assigned as attributes.
1.x blocks create their parameters with ``self.params.get('weight', ...)`` under a prefix
(``dense0_weight``) and compute in ``hybrid_forward(self, F, x, weight=...)``; 2.x blocks
assign ``self.weight = Parameter('weight', ...)`` and compute in ``forward(self, x)``.

Note [Block names]
~~~~~~~~~~~~~~~~~~
Two naming schemes coexist, as in MXNet 1.9.1:

* *prefixed names* (1.x): a block created outside any ``name_scope()`` is named
  ``<class name lower-cased><n>_`` by the current ``mx.name`` manager (the counter symbols use
  too, so ``dense0_``, ``dense1_``, ...); inside a parent's ``with parent.name_scope():`` its
  prefix is the parent's prefix plus ``<class><n>_`` counted per parent. A Parameter made by
  ``self.params.get(name)`` is named ``prefix + name``; ``collect_params()`` keys it so.
* *structural names* (``_collect_params_with_prefix``): the attribute path from the block,
  ``0.weight``, ``features.3.bias``. ``save_parameters``/``load_parameters`` use them (as
  MXNet 1.9.1 does), so files do not depend on how many blocks were created before.

A Parameter assigned as an attribute but not made by ``self.params.get`` (2.x style) has no
prefixed name: ``collect_params()`` keys it by its structural name relative to the block
collected from (MXNet 1.9.1 would leave it out; MXNet 2 keys everything structurally).

Note [Hybridized execution seam]
~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
``HybridBlock.__call__``/``forward`` run the imperative path here. When ``hybridize()`` has
set ``self._active``, ``forward`` hands the call to ``self._call_cached_op(*args)``, which the
hybridization module (``_hybrid.py``) defines: it traces the block into a Symbol once per input
signature and runs it on fastgrad's Executor. ``_clear_cached_op()`` drops that cache whenever
the block changes (a child added, a cast, ``hybridize`` again).
"""

from collections import OrderedDict
import json
import re
import threading
import warnings

import numpy as _onp

from fastgrad import ndarray as _nd
from fastgrad import numpy as _mx_np
from fastgrad import symbol as _symbol
from fastgrad import initializer
from fastgrad._kernels._blas_policy import tick as _blas_tick
from fastgrad.symbol import name as _name
from fastgrad.gluon import _hybrid
from fastgrad.gluon.parameter import (Parameter, ParameterDict, DeferredInitializationError,
                                      _brief_print_list, _indent, _save)

__all__ = ["Block", "HybridBlock", "HookHandle"]


class _BlockScope:
    """The ``with block.name_scope():`` of a block: children created inside get the block's
    prefix (Note [Block names])."""

    _current = threading.local()

    def __init__(self, block):
        self._block = block
        self._counter = {}
        self._old_scope = None
        self._name_scope = None

    @staticmethod
    def create(prefix, params, hint):
        """The prefix and ParameterDict of a new block with class hint ``hint``."""
        current = getattr(_BlockScope._current, "value", None)
        if current is None:
            if prefix is None:
                prefix = _name.current().get(None, hint) + "_"
            if params is None:
                params = ParameterDict(prefix)
            else:
                params = ParameterDict(params.prefix, params)
            return prefix, params
        if prefix is None:
            count = current._counter.get(hint, 0)
            prefix = "%s%d_" % (hint, count)
            current._counter[hint] = count + 1
        if params is None:
            parent = current._block.params
            params = ParameterDict(parent.prefix + prefix, parent._shared)
        else:
            params = ParameterDict(params.prefix, params)
        return current._block.prefix + prefix, params

    def __enter__(self):
        if self._block._empty_prefix:
            return self
        self._old_scope = getattr(_BlockScope._current, "value", None)
        _BlockScope._current.value = self
        self._name_scope = _name.Prefix(self._block.prefix)
        self._name_scope.__enter__()
        return self

    def __exit__(self, ptype, value, trace):
        if self._block._empty_prefix:
            return
        self._name_scope.__exit__(ptype, value, trace)
        self._name_scope = None
        _BlockScope._current.value = self._old_scope


class HookHandle:
    """The handle :meth:`Block.register_forward_hook` returns: ``detach()`` removes the hook
    (also usable as a context manager)."""

    _next_id = [0]

    def __init__(self):
        self._hooks_dict_ref = None
        self._id = None

    def attach(self, hooks_dict, hook):
        if self._hooks_dict_ref is not None:
            raise RuntimeError("The same handle cannot be attached twice.")
        self._id = HookHandle._next_id[0]
        HookHandle._next_id[0] += 1
        hooks_dict[self._id] = hook
        self._hooks_dict_ref = hooks_dict

    def detach(self):
        hooks = self._hooks_dict_ref
        if hooks is not None and self._id in hooks:
            del hooks[self._id]

    def __enter__(self):
        return self

    def __exit__(self, ptype, value, trace):
        self.detach()


def _is_array(x):
    return isinstance(x, (_nd.NDArray, _mx_np.ndarray))


def _first_array(args):
    """The first array in the (nested) arguments, or None."""
    for a in args:
        if _is_array(a):
            return a
        if isinstance(a, (list, tuple)):
            found = _first_array(a)
            if found is not None:
                return found
    return None


def _has_symbol(args):
    for a in args:
        if isinstance(a, _symbol.Symbol):
            return True
        if isinstance(a, (list, tuple)) and _has_symbol(a):
            return True
    return False


def _shape_str(args):
    """The shapes of (nested) outputs as MXNet's summary prints them."""
    def shapes(a):
        if isinstance(a, (list, tuple)):
            return [shapes(x) for x in a]
        return a.shape if _is_array(a) else a
    result = shapes(args)
    if isinstance(result, list):
        return str(result)[1:-1]
    return str(result)


def _note_block(err, block):
    """Name the innermost block whose forward pass raised ``err``, as a note under its
    traceback (the message itself is left alone)."""
    if getattr(err, "_gluon_block_noted", False) or not hasattr(err, "add_note"):
        return
    try:
        err.add_note("(raised in the forward pass of block '%s', a %s)"
                     % (block.name, type(block).__name__))
        err._gluon_block_noted = True
    except (AttributeError, TypeError):    # an exception type that refuses attributes
        pass


class Block:
    """The base class of every layer and model (MXNet's ``gluon.Block``).

    Assign child blocks and Parameters as attributes: they are registered, so that
    :meth:`collect_params` finds them and :meth:`initialize`, :meth:`save_parameters` and the
    optimizer reach them. Override :meth:`forward`.

    Parameters
    ----------
    prefix : str, optional
        Prefix of the names of this block's parameters (Note [Block names]).
    params : ParameterDict, optional
        Parameters to share: ``params.get`` finds these before creating new ones.

    Examples
    --------
    >>> import fastgrad as mx
    >>> from fastgrad.gluon import Block, Parameter
    >>> class Scale(Block):
    ...     def __init__(self, **kwargs):
    ...         super().__init__(**kwargs)
    ...         self.w = self.params.get('w', shape=(1,), init=mx.init.Constant(2.0))
    ...     def forward(self, x):
    ...         return x * self.w.data()
    >>> net = Scale(prefix='scale_')
    >>> net.initialize()
    >>> net(mx.nd.array([1, 2]))
    <BLANKLINE>
    [2. 4.]
    <NDArray 2 @cpu(0)>
    """

    def __init__(self, prefix=None, params=None):
        object.__setattr__(self, "_children", OrderedDict())
        object.__setattr__(self, "_reg_params", OrderedDict())
        self._empty_prefix = prefix == ""
        self._prefix, self._params = _BlockScope.create(prefix, params, self._alias())
        self._name = self._prefix[:-1] if self._prefix.endswith("_") else self._prefix
        self._scope = _BlockScope(self)
        self._forward_hooks = OrderedDict()
        self._forward_pre_hooks = OrderedDict()

    def __repr__(self):
        lines = ["  (%s): %s" % (key, _indent(repr(block), 2))
                 for key, block in self.__dict__.items() if isinstance(block, Block)]
        return "%s(\n%s\n)" % (self.__class__.__name__, "\n".join(lines))

    def __setattr__(self, name, value):
        """Register child blocks and Parameters assigned as attributes."""
        existing = self.__dict__.get(name, None)
        if isinstance(existing, (Parameter, Block)) and not isinstance(value, type(existing)):
            raise TypeError("%s: cannot replace attribute '%s' (a %s) by a %s; Parameter and "
                            "Block attributes keep their type"
                            % (type(self).__name__, name, type(existing).__name__,
                               type(value).__name__))
        if isinstance(value, Block):
            self.register_child(value, name)
        elif isinstance(value, Parameter):
            if name in self._reg_params and self._reg_params[name] is not value:
                raise AssertionError(
                    "%s: overriding Parameter attribute '%s' is not allowed. If you want to "
                    "share parameters between blocks, please set 'params' at Block "
                    "construction instead (or use share_parameters)."
                    % (type(self).__name__, name))
            self._register_param(name, value)
        object.__setattr__(self, name, value)

    def _register_param(self, name, param):
        self._reg_params[name] = param
        self.__dict__["_params_ready"] = False
        if self._is_np_style() and param._np_arrays is None:
            param._np_arrays = True     # Note [Parameter array type], rule 2

    def _is_np_style(self):
        """Whether this is a 2.x-style block (computes in ``forward`` on ``mx.np`` arrays)."""
        return False

    def _alias(self):
        return self.__class__.__name__.lower()

    @property
    def prefix(self):
        """The prefix of this block's parameter names (``dense0_``)."""
        return self._prefix

    @property
    def name(self):
        """The prefix without its trailing ``_`` (``dense0``)."""
        return self._name

    def name_scope(self):
        """A ``with`` block in which new child blocks get this block's prefix."""
        return self._scope

    @property
    def params(self):
        """This block's own ParameterDict (not its children's: see :meth:`collect_params`)."""
        return self._params

    # ------------------------------------------------------------------ parameters
    def _check_container_with_block(self):
        children = set(id(c) for c in self._children.values())

        def unregistered(data):
            if isinstance(data, (list, tuple)):
                return any(unregistered(x) for x in data)
            if isinstance(data, dict):
                return any(unregistered(x) for x in data.values())
            return isinstance(data, Block) and id(data) not in children

        for key, value in self.__dict__.items():
            if isinstance(value, (list, tuple, dict)) and not (
                    key.startswith("__") or key == "_children") and unregistered(value):
                warnings.warn('"%s.%s" is an unregistered container with Blocks. Note that '
                              'Blocks inside the list, tuple or dict will not be registered '
                              'automatically. Make sure to register them using '
                              'register_child() or switching to nn.Sequential/'
                              'nn.HybridSequential instead. '
                              % (self.__class__.__name__, key), stacklevel=3)

    def collect_params(self, select=None):
        """The parameters of this block and its children, as a ParameterDict keyed by name
        (Note [Block names]); ``select`` keeps those whose key matches the regular expression
        (``re.match``), e.g. ``'.*weight|.*bias'``."""
        self._check_container_with_block()
        ret = ParameterDict(self._params.prefix)
        pattern = re.compile(select) if select else None
        blocks = list(self._walk(""))

        def add(key, param):
            if pattern is not None and not pattern.match(key):
                return
            if key in ret._params and ret._params[key] is not param:
                raise AssertionError("Cannot update self with other because they have "
                                     "different Parameters with the same name '%s'" % key)
            ret._params[key] = param

        # 1.x parameters (made by params.get) under their names, then 2.x attribute
        # parameters under their structural names (Note [Block names])
        in_dicts = set()
        for block, _ in blocks:
            for key, param in block._params.items():
                in_dicts.add(id(param))
                add(key, param)
        seen = set(in_dicts)
        collected = set(id(p) for p in ret._params.values())
        for block, path in blocks:
            for attr, param in block._reg_params.items():
                if id(param) in collected:
                    ret._aliases[path + attr] = param     # ret['0.weight'] works too
                if id(param) not in seen:
                    seen.add(id(param))
                    add(path + attr, param)
        return ret

    def _walk(self, path):
        """This block and its descendants with their structural paths (``'features.3.'``)."""
        yield self, path
        for child_name, child in self._children.items():
            yield from child._walk(path + child_name + ".")

    def _collect_params_with_prefix(self, prefix=""):
        """Every registered parameter keyed by its structural name (``0.weight``)."""
        if prefix:
            prefix += "."
        ret = OrderedDict((prefix + key, value) for key, value in self._reg_params.items())
        for child_name, child in self._children.items():
            ret.update(child._collect_params_with_prefix(prefix + child_name))
        return ret

    def register_child(self, block, name=None):
        """Register ``block`` as a child (done for you when it is assigned as an attribute);
        ``name`` defaults to the number of children so far."""
        if name is None:
            name = str(len(self._children))
        self._children[name] = block

    def initialize(self, init=initializer.Uniform(), ctx=None, verbose=False,
                   force_reinit=False):
        """Initialise every parameter of this block and its children
        (``collect_params().initialize(...)``); ``init`` is the default for parameters
        without their own initializer."""
        self.collect_params().initialize(init, ctx, verbose, force_reinit)

    def zero_grad(self):
        """Set the gradient of every parameter to zero."""
        self.collect_params().zero_grad()

    def reset_ctx(self, ctx):
        """Move every parameter to ``ctx`` (any ``mx.cpu(i)``)."""
        self.collect_params().reset_ctx(ctx)

    def cast(self, dtype):
        """Cast every parameter of this block and its children to ``dtype``."""
        for child in self._children.values():
            child.cast(dtype)
        for param in self._own_params():
            param.cast(dtype)

    def _own_params(self):
        """This block's own parameters (its ParameterDict and attribute Parameters), once
        each."""
        seen, out = set(), []
        for param in list(self._params.values()) + list(self._reg_params.values()):
            if id(param) not in seen:
                seen.add(id(param))
                out.append(param)
        return out

    def apply(self, fn):
        """Call ``fn(block)`` on every child (recursively) and then on this block; returns
        this block."""
        for child in self._children.values():
            child.apply(fn)
        fn(self)
        return self

    def share_parameters(self, shared):
        """Use the parameters of ``shared`` (a dict such as another block's
        ``collect_params()``, keyed by structural names like ``0.weight`` or by parameter
        names) in place of this block's own of the same key; returns this block. Keys that
        match nothing warn."""
        if shared is None:
            return self
        if not hasattr(shared, "items"):
            raise ValueError("'shared' should be in type of Dict. Get type %s!" % type(shared))
        remaining = set(shared.keys())
        self._share_into(dict(shared.items()), remaining, "")
        for key in sorted(remaining):
            warnings.warn("Parameter name %s is not in the current model!" % key)
        return self

    def _share_into(self, shared, remaining, path):
        for attr, param in list(self._reg_params.items()):
            key = (path + "." if path else "") + attr
            for candidate in (key, param.name):
                if candidate in shared and shared[candidate] is not None:
                    new = shared[candidate]
                    self._reg_params[attr] = new
                    self.__dict__["_params_ready"] = False
                    object.__setattr__(self, attr, new)
                    for pkey, pvalue in list(self._params.items()):
                        if pvalue is param:
                            self._params._params[pkey] = new
                    remaining.discard(candidate)
                    break
        for child_name, child in self._children.items():
            child._share_into(shared, remaining, (path + "." if path else "") + child_name)

    # ------------------------------------------------------------------ files
    def save_parameters(self, filename, deduplicate=False):
        """Save the parameters to ``filename`` in MXNet's ``.params`` format, keyed by
        structural names (``0.weight``). ``deduplicate=True`` saves a shared parameter once
        (under the last of its names, as MXNet)."""
        params = self._collect_params_with_prefix()
        if deduplicate:
            by_param = OrderedDict()
            for key, param in params.items():
                by_param[id(param)] = (key, param)
            kept = set(key for key, _ in by_param.values())
            params = OrderedDict((k, v) for k, v in params.items() if k in kept)
        _save(filename, {key: param._reduce() for key, param in params.items()})

    def load_parameters(self, filename, ctx=None, allow_missing=False, ignore_extra=False,
                        cast_dtype=False, dtype_source="current"):
        """Load parameters saved by :meth:`save_parameters` (fastgrad's or MXNet's), or by
        ``collect_params().save()`` (prefixed names, the legacy format).

        Parameters
        ----------
        filename : str
        ctx : Context or list of Context, optional
            Any ``mx.cpu(i)``.
        allow_missing : bool, default False
            Leave parameters absent from the file as they are instead of raising.
        ignore_extra : bool, default False
            Skip entries of the file that name no parameter of this block instead of raising.
        cast_dtype : bool, default False
            Cast the saved values to the parameters' dtypes (``dtype_source='current'``), or
            the parameters to the saved dtypes (``'saved'``).
        """
        loaded = _nd.load(filename)
        if not isinstance(loaded, dict):
            raise ValueError("load_parameters: %s holds %d unnamed arrays; a parameter file "
                             "names its arrays" % (filename, len(loaded)))
        params = self._collect_params_with_prefix()
        if not loaded and not params:
            return
        structural = any("." in key for key in loaded) or (
            loaded and set(loaded) <= set(params))
        if not structural:
            self.collect_params().load(filename, ctx, allow_missing, ignore_extra, self.prefix,
                                       cast_dtype=cast_dtype, dtype_source=dtype_source)
            return
        if not allow_missing:
            names_of = {}
            for key, param in params.items():
                names_of.setdefault(id(param), []).append(key)
            for key, param in params.items():
                if not any(k in loaded for k in names_of[id(param)]):
                    raise AssertionError(
                        "Parameter '%s' is missing in file '%s', which contains parameters: "
                        "%s. Set allow_missing=True to ignore missing parameters."
                        % (key, filename, _brief_print_list(loaded.keys())))
        for key, value in loaded.items():
            if key not in params:
                if not ignore_extra:
                    raise ValueError(
                        "Parameter '%s' loaded from file '%s' is not present in ParameterDict, "
                        "which contains parameters %s. Set ignore_extra=True to ignore. "
                        % (key, filename, _brief_print_list(params.keys())))
                continue
            params[key]._load_init(value, ctx, cast_dtype=cast_dtype, dtype_source=dtype_source)

    def save(self, prefix):
        """Save the block's structure to ``prefix-model.json`` and its parameters to
        ``prefix-model.params`` (MXNet 1.9.1's ``Block.save``): each block is recorded by class
        and creation order with its name and its children's attribute names, so
        :meth:`load` on a network built the same way restores the names. Traced graphs are not
        saved: a hybridized block traces again at its next call."""
        model = {}
        counter = [0]

        def record(block, structure):
            entry = {"orig_name": block.name,
                     "hybridized": bool(getattr(block, "_active", False)),
                     "children": {}}
            structure["%s%d" % (type(block).__name__.lower(), counter[0])] = entry
            for child_name, child in block._children.items():
                counter[0] += 1
                entry["children"][child.name] = child_name
                record(child, entry)

        record(self, model)
        with open(prefix + "-model.json", "w") as f:
            json.dump(model, f)
        self.save_parameters(prefix + "-model.params")

    def load(self, prefix):
        """Load what :meth:`save` wrote into this block, built as the saved one was: the
        blocks take their saved names (and their parameters' keys in ``params`` follow), a
        block saved hybridized is hybridized, and the parameters are loaded."""
        with open(prefix + "-model.json") as f:
            model = json.load(f)
        counter = [0]

        def restore(block, structure):
            key = "%s%d" % (type(block).__name__.lower(), counter[0])
            if key not in structure:
                raise ValueError("%s-model.json does not describe this network: it has no "
                                 "block '%s' where this network has %s '%s'"
                                 % (prefix, key, type(block).__name__, block.name))
            entry = structure[key]
            block._name = entry["orig_name"]
            if isinstance(block, HybridBlock) and entry.get("hybridized"):
                block._active = True
            own = block._params
            for old in list(own._params.keys()):
                param = own._params.pop(old)
                own._params[block.name + "_" + old[len(own.prefix):]] = param
            for child in list(block._children.values()):
                counter[0] += 1
                restore(child, entry)
            renamed = OrderedDict()
            for child_name, child in block._children.items():
                renamed[entry["children"].get(child.name, child_name)] = child
            block._children.clear()
            block._children.update(renamed)

        restore(self, model)
        self.load_parameters(prefix + "-model.params")

    def save_params(self, filename):
        """Deprecated (MXNet): ``collect_params().save(filename, strip_prefix=prefix)``."""
        warnings.warn("save_params is deprecated. Please use save_parameters. Note that if you "
                      "want load from SymbolBlock later, please use export instead.")
        self.collect_params().save(filename, strip_prefix=self.prefix)

    def load_params(self, filename, ctx=None, allow_missing=False, ignore_extra=False):
        """Deprecated (MXNet): :meth:`load_parameters`."""
        warnings.warn("load_params is deprecated. Please use load_parameters.")
        self.load_parameters(filename, ctx, allow_missing, ignore_extra)

    # ------------------------------------------------------------------ calling
    def register_forward_pre_hook(self, hook):
        """Call ``hook(block, inputs)`` before each forward pass; returns a
        :class:`HookHandle` whose ``detach()`` removes it."""
        handle = HookHandle()
        handle.attach(self._forward_pre_hooks, hook)
        return handle

    def register_forward_hook(self, hook):
        """Call ``hook(block, inputs, outputs)`` after each forward pass; returns a
        :class:`HookHandle` whose ``detach()`` removes it."""
        handle = HookHandle()
        handle.attach(self._forward_hooks, hook)
        return handle

    def register_op_hook(self, callback, monitor_all=False):
        """MXNet's operator monitor hook: passed to the children (fastgrad calls nothing)."""
        for child in self._children.values():
            child.register_op_hook(callback, monitor_all)

    def __call__(self, *args):
        """Run the forward pre-hooks, :meth:`forward` and the forward hooks."""
        _blas_tick()            # Note [Load-aware BLAS threads] in _kernels/_blas_policy.py
        for hook in list(self._forward_pre_hooks.values()):
            hook(self, args)
        try:
            out = self.forward(*args)
        except Exception as err:
            _note_block(err, self)
            raise
        for hook in list(self._forward_hooks.values()):
            hook(self, args, out)
        return out

    def forward(self, *args):
        """The computation: override it."""
        raise NotImplementedError("%s must define forward()" % type(self).__name__)

    def hybridize(self, active=True, **kwargs):
        """Hybridize every HybridBlock among the children (a plain Block itself runs
        imperatively)."""
        for child in self._children.values():
            child.hybridize(active, **kwargs)

    def summary(self, *inputs):
        """Print a table of each layer's output shape and parameter count for ``inputs`` (as
        MXNet); the block must be initialised and not hybridized."""
        summary = OrderedDict()
        seen = set()
        hooks = []

        def summary_hook(block, _, outputs):
            key = "%s-%i" % (block.__class__.__name__, len(summary))
            entry = summary[key] = OrderedDict()
            entry["output_shape"] = _shape_str(outputs)
            entry["n_params"] = entry["trainable"] = entry["shared"] = 0
            for param in block._own_params():
                size = int(_onp.prod(param.data().shape))
                entry["n_params"] += size
                entry["trainable"] += 0 if param.grad_req == "null" else size
                if id(param) in seen:
                    entry["shared"] += size
                else:
                    seen.add(id(param))

        def register(block):
            if isinstance(block, HybridBlock) and block._active:
                raise AssertionError('"%s" must not be hybridized to print summary.'
                                     % block.name)
            if not block._is_container():
                hooks.append(block.register_forward_hook(summary_hook))

        summary["Input"] = OrderedDict([("output_shape", _shape_str(inputs)), ("n_params", 0),
                                        ("trainable", 0), ("shared", 0)])
        try:
            self.apply(register)
            self(*inputs)
            line = "{:>20}  {:>42} {:>15}"
            print("-" * 80)
            print(line.format("Layer (type)", "Output Shape", "Param #"))
            print("=" * 80)
            total = trainable = shared = 0
            for layer, entry in summary.items():
                print(line.format(layer, str(entry["output_shape"]), entry["n_params"]))
                total += entry["n_params"]
                trainable += entry["trainable"]
                shared += entry["shared"]
            print("=" * 80)
            print("Parameters in forward computation graph, duplicate included")
            print("   Total params: " + str(total))
            print("   Trainable params: " + str(trainable))
            print("   Non-trainable params: " + str(total - trainable))
            print("Shared params in forward computation graph: " + str(shared))
            print("Unique parameters in model: " + str(total - shared))
            print("-" * 80)
        finally:
            for handle in hooks:
                handle.detach()

    def _is_container(self):
        """Whether ``summary`` skips this block's own row (``Sequential`` containers say yes)."""
        return False


class HybridBlock(Block):
    """A block that can also be traced into a Symbol and run on fastgrad's Executor
    (``hybridize()``).

    1.x style: override ``hybrid_forward(self, F, x, *args, **params)``; ``F`` is ``mx.nd``
    imperatively and ``mx.sym`` when traced, and the block's parameters arrive as keyword
    arguments named by their attributes. 2.x style: override ``forward(self, x, ...)`` and
    read ``self.weight.data()``.

    A parameter whose shape has unknown dimensions is completed before the first forward
    pass by :meth:`infer_shape` (layers override it: ``Dense`` sets ``in_units`` from
    ``x.shape``).

    Examples
    --------
    >>> import fastgrad as mx
    >>> from fastgrad.gluon import HybridBlock
    >>> class Affine(HybridBlock):
    ...     def __init__(self, units, **kwargs):
    ...         super().__init__(**kwargs)
    ...         with self.name_scope():
    ...             self.weight = self.params.get('weight', shape=(units, 0),
    ...                                           allow_deferred_init=True)
    ...     def infer_shape(self, x):
    ...         self.weight.shape = (self.weight.shape[0], x.shape[1])
    ...     def hybrid_forward(self, F, x, weight):
    ...         return F.dot(x, weight.T)
    >>> net = Affine(2, prefix='affine_')
    >>> net.initialize(mx.init.One())
    >>> net(mx.nd.ones((1, 3)))
    <BLANKLINE>
    [[3. 3.]]
    <NDArray 1x2 @cpu(0)>
    >>> net.weight
    Parameter affine_weight (shape=(2, 3), dtype=<class 'numpy.float32'>)
    """

    def __init__(self, prefix=None, params=None):
        super().__init__(prefix=prefix, params=params)
        self._np_style = self._is_np_style()    # fixed by the class; read at every call
        self._cached_graph = ()
        self._cached_op = None
        self._cached_op_args = []
        self._in_format = None
        self._out_format = None
        self._active = False
        self._flags = []
        self._callback = None
        self._monitor_all = False
        self._backend = None
        self._backend_opts = {}

    def __setattr__(self, name, value):
        super().__setattr__(name, value)
        if isinstance(value, HybridBlock):
            self._clear_cached_op()

    def _is_np_style(self):
        cls = type(self)
        return (cls.forward is not HybridBlock.forward
                and cls.hybrid_forward is HybridBlock.hybrid_forward)

    def register_child(self, block, name=None):
        if not isinstance(block, HybridBlock):
            raise ValueError(
                "Children of HybridBlock must also be HybridBlock, but %s has type %s. If you "
                "are using Sequential, please try HybridSequential instead."
                % (str(block), str(type(block))))
        super().register_child(block, name)
        self._clear_cached_op()

    def _clear_cached_op(self):
        """Forget the traced graph (Note [Hybridized execution seam])."""
        self._cached_graph = ()
        self._cached_op = None
        self._cached_op_args = []

    def hybridize(self, active=True, backend=None, clear=True, static_alloc=False,
                  static_shape=False, inline_limit=2, forward_bulk_size=None,
                  backward_bulk_size=None, **kwargs):
        """Turn hybrid execution on (``active=True``) or off, for this block and its children
        recursively: the block is traced into a Symbol once per input signature and run on
        fastgrad's Executor. ``static_alloc``/``static_shape`` are accepted (the Executor
        always plans its memory once per signature)."""
        if kwargs:
            self._backend_opts = kwargs
        self._backend = backend
        self._active = active
        self._flags = [("static_alloc", static_alloc), ("static_shape", static_shape),
                       ("inline_limit", inline_limit)]
        if forward_bulk_size is not None:
            self._flags.append(("forward_bulk_size", forward_bulk_size))
        if backward_bulk_size is not None:
            self._flags.append(("backward_bulk_size", backward_bulk_size))
        if clear:
            self._clear_cached_op()
        if active and (self._forward_hooks or self._forward_pre_hooks):
            warnings.warn('"%s" is being hybridized while still having forward hook/pre-hook. '
                          'If "%s" is a child of HybridBlock, the hooks will not take effect.'
                          % (self, self))
        for child in self._children.values():
            child.hybridize(active, static_alloc=static_alloc, static_shape=static_shape,
                            inline_limit=inline_limit, forward_bulk_size=forward_bulk_size,
                            backward_bulk_size=backward_bulk_size)

    def cast(self, dtype):
        self._clear_cached_op()
        super().cast(dtype)

    # ------------------------------------------------------------------ shapes
    def _deferred_params(self):
        return [p for p in self._own_params()
                if p._data is None and p._deferred_init]

    def _finish_deferred(self, args):
        """Complete this block's deferred parameters from the inputs ``args`` (remembering
        when none is left, until a parameter is registered again)."""
        if self.__dict__.get("_params_ready"):
            return
        pending = self._deferred_params()
        if not pending:
            if all(p._data is not None for p in self._own_params()):
                self.__dict__["_params_ready"] = True
            return
        self._deferred_infer_shape(*args)
        for param in pending:
            param._finish_deferred_init()

    def _deferred_infer_shape(self, *args):
        try:
            self.infer_shape(*args)
        except Exception as err:
            raise ValueError("Deferred initialization failed because shape cannot be "
                             "inferred. %s" % err) from err

    def infer_shape(self, *args):
        """Fill the unknown dimensions of the parameters from the inputs ``args``.

        The default traces ``hybrid_forward`` with ``F=mx.sym`` and asks the Symbol for the
        parameters' shapes; layers whose parameter shapes follow from the input (``Dense``,
        ``Conv2D``, ...) override it, as in MXNet 2."""
        self._infer_attrs("shape", *args)

    def infer_type(self, *args):
        """Set the dtypes of the parameters from the inputs ``args`` (by tracing, as
        :meth:`infer_shape`)."""
        self._infer_attrs("dtype", *args)

    def _infer_attrs(self, attr, *args):
        if self._is_np_style():
            raise ValueError("%s defines forward() rather than hybrid_forward(), so the shapes "
                             "of its parameters cannot be traced; define infer_shape(self, "
                             "*args) to set them, or give them in full"
                             % type(self).__name__)
        names = ["data"] if len(args) == 1 else ["data%d" % i for i in range(len(args))]
        inputs = [_symbol.var(n) for n in names]
        params = {k: p.var() for k, p in self._reg_params.items()}
        with self.name_scope():
            out = self.hybrid_forward(_symbol, *inputs, **params)
        if isinstance(out, (list, tuple)):
            out = _symbol.Group(list(out))
        given = {n: getattr(a, attr) for n, a in zip(names, args) if a is not None}
        if attr == "shape":
            arg_attrs, _, aux_attrs = out.infer_shape(**given)
        else:
            arg_attrs, _, aux_attrs = out.infer_type(**given)
        if arg_attrs is None:
            raise ValueError("%s.infer_%s: the traced graph cannot infer its parameters' %ss"
                             % (type(self).__name__, attr, attr))
        found = dict(zip(out.list_arguments(), arg_attrs))
        found.update(zip(out.list_auxiliary_states(), aux_attrs))
        for param in self.collect_params().values():
            if param.name in found:
                setattr(param, attr, found[param.name])

    # ------------------------------------------------------------------ calling
    def __call__(self, x, *args):
        _blas_tick()            # Note [Load-aware BLAS threads] in _kernels/_blas_policy.py
        for hook in list(self._forward_pre_hooks.values()):
            hook(self, (x,) + args)
        try:
            if not self._np_style:
                out = self.forward(x, *args)
            elif _has_symbol((x,) + args):
                # a 2.x block inside a traced 1.x parent (hybridized or not): the parent's
                # trace learns it cannot trace this block and runs imperatively
                out = _hybrid.symbolic_call(self, (x,) + args)
            elif self._active:
                out = self._call_cached_op(x, *args)
            else:
                out = self._imperative_call(x, *args)
        except Exception as err:
            _note_block(err, self)
            raise
        for hook in list(self._forward_hooks.values()):
            hook(self, (x,) + args, out)
        return out

    def forward(self, x, *args):
        """Run ``hybrid_forward`` with ``F=mx.nd`` and this block's parameters (traced with
        ``F=mx.sym`` when given Symbols; on the Executor once hybridized)."""
        inputs = (x,) + args
        if all(map(_is_array, inputs)):      # the common case: arrays only
            if self._active:
                return self._call_cached_op(x, *args)
            return self._imperative_call(x, *args)
        if _has_symbol(inputs):
            if _first_array(inputs) is not None:
                raise ValueError("In HybridBlock, we do not support mixed NDArrays and Symbols "
                                 "types for the input. Please check the type of the args.\n")
            return _hybrid.symbolic_call(self, (x,) + args)
        if _first_array((x,) + args) is None:
            raise ValueError("In HybridBlock, there must be one NDArray or one Symbol in the "
                             "input. Please check the type of the args.\n")
        if self._active:
            return self._call_cached_op(x, *args)
        return self._imperative_call(x, *args)

    def _imperative_call(self, x, *args):
        """The block run eagerly on arrays: deferred parameters completed first, then the
        2.x ``forward`` or the 1.x ``hybrid_forward(F=mx.nd, ...)`` with the parameters in the
        type of the first input array (Note [Parameter array type])."""
        inputs = (x,) + args
        if self._np_style:
            self._finish_deferred(inputs)
            return self.forward(x, *args)
        try:
            params = self._param_arrays(inputs)
        except DeferredInitializationError:
            self._finish_deferred(inputs)
            params = self._param_arrays(inputs)
        return self.hybrid_forward(_nd, x, *args, **params)

    def _param_arrays(self, inputs):
        """The arrays of this block's parameters by attribute name, in the type of the first
        input array (a view when the type differs)."""
        first = inputs[0] if _is_array(inputs[0]) else _first_array(inputs)
        want_np = not isinstance(first, _nd.NDArray)
        params = {}
        for key, param in self._reg_params.items():
            value = param.data()
            if want_np == isinstance(value, _nd.NDArray):
                value = value.as_np_ndarray() if want_np else value.as_nd_ndarray()
            params[key] = value
        return params

    def _call_cached_op(self, *args):
        """Run the hybridized graph (Note [Hybridized execution seam]; Note [Hybridize on the
        executor] in ``_hybrid.py``)."""
        return _hybrid.call_cached(self, args)

    def export(self, path, epoch=0, remove_amp_cast=True):
        """Write ``path-symbol.json`` and ``path-%04d.params`` (``epoch``), loadable by
        ``SymbolBlock.imports`` here and in MXNet; hybridize and call the block first."""
        return _hybrid.export(self, path, epoch, remove_amp_cast)

    def hybrid_forward(self, F, x, *args, **kwargs):
        """The computation, written with ``F`` (``mx.nd`` or ``mx.sym``): override it."""
        raise NotImplementedError("%s must define hybrid_forward(self, F, x, ...) or "
                                  "forward(self, x, ...)" % type(self).__name__)
