"""Benchmark workloads for fastgrad and the reference backends.

Every workload computes the gradients of a scalar function of some NumPy
inputs.  It is implemented once for each *backend*:

``numpy``
    Forward and backward pass written by hand in NumPy, the way a careful
    person would write them (buffers reused where natural, no wasted passes).
    This is the reference for both speed ("the limit") and correctness.
``fastgrad``
    ``fastgrad.autograd`` (the MXNet ``autograd`` API): ``attach_grad``,
    ``autograd.record()``, ``backward()``.
``autograd``
    HIPS autograd (``autograd.grad``), if installed.
``torch``
    PyTorch eager mode on the CPU with its default number of intra-op
    threads (``torch.get_num_threads()``), if installed.
``jax``
    JAX ``jax.grad`` *without* ``jax.jit`` (eager, op-by-op dispatch) with
    64-bit floats enabled, if installed.  Compiled JAX would be much faster
    on the long op chains; eager mode is what is comparable to a tape.
``fastgrad-maximum``
    ``fastgrad`` with relu written as ``np.maximum(z, 0)`` (workload 6 only), as D2L and HIPS
    autograd programs write it.
``fastgrad-exec``, ``jax-jit``
    The compiled ways, for the training steps only (workloads 2, 8, 9): fastgrad's
    bound ``Executor`` (the model written with ``fastgrad.sym``, bound once) and
    ``jax.jit(jax.grad(...))``.
``mxnet``
    Apache MXNet 1.9 through ``mx.np``/``mx.npx``/``mx.autograd``, usually run
    with the interpreter of its own environment (``compare.py --mxnet-python``).
``fastgrad-sgd``, ``gluon-fastgrad``, ``gluon-fastgrad-hybrid``, ``torch-nn``
    Whole training steps, for workloads 2 and 8 only (Note [Training-step backends]): the
    hand-written ``fastgrad`` step followed by a hand-written SGD update; the same network
    written with fastgrad's Gluon (``gluon.nn`` blocks, ``SoftmaxCrossEntropyLoss``,
    ``gluon.Trainer('sgd')``), imperative and hybridized; and PyTorch's ``nn.Module`` with
    ``nn.CrossEntropyLoss`` and ``torch.optim.SGD``.

A backend that cannot be imported is *missing*; it is reported, never an
error.

The differentiable workloads (all but the fourth derivative) are written once
as a generic ``loss(ops, *arrays)`` over a small namespace of operations
(``ops.sin``, ``ops.sum``, ``ops.relu``, ...), so that every autodiff
backend evaluates exactly the same expression.  The hand-written NumPy
versions are separate code.

Examples
--------
>>> import workloads as wl
>>> work = wl.get_workload("3")
>>> backend = wl.get_backend("numpy")
>>> step = work.build(backend, work.make_inputs())
>>> grads = [backend.to_numpy(g) for g in step()]
"""

from __future__ import annotations

import copy
import importlib
import importlib.metadata
import os
import sys
from collections.abc import Callable, Sequence
from types import SimpleNamespace
from typing import Any

import numpy as onp

__all__ = [
    "BACKEND_NAMES",
    "Backend",
    "GradCheck",
    "WORKLOADS",
    "Workload",
    "check_gradients",
    "get_backend",
    "get_workload",
]

#: Backends in the order in which they are run and printed.
BACKEND_NAMES = ("numpy", "fastgrad", "fastgrad-maximum", "fastgrad-exec", "fastgrad-sgd",
                 "gluon-fastgrad", "gluon-fastgrad-hybrid", "autograd", "torch", "torch-nn",
                 "jax", "jax-jit", "mxnet")

#: Learning rate of the training-step backends' SGD update (Note [Training-step backends]).
SGD_LR = 0.01

#: The backends that run whole training steps (workloads 2 and 8 only).
TRAINING_BACKENDS = ("fastgrad-sgd", "gluon-fastgrad", "gluon-fastgrad-hybrid", "torch-nn")

_REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

Step = Callable[[], tuple[Any, ...]]


# ---------------------------------------------------------------------------
# Backends
# ---------------------------------------------------------------------------


def _dist_version(name: str) -> str | None:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


class Backend:
    """An automatic-differentiation backend that may or may not be installed.

    Subclasses import their library lazily in :meth:`_load` and provide an
    operation namespace (:attr:`ops`) for the generic workload losses and a
    generic gradient driver (:meth:`gradient_step`).

    Attributes
    ----------
    name : str
        Short name used on the command line and in tables.
    label : str
        Human-readable description.
    memory_method : str
        ``"tracemalloc"`` or ``"rss"``: how peak memory is measured for it.
    """

    name = ""
    label = ""
    memory_method = "tracemalloc"
    #: Whether every workload runs on this backend; if False, only those that name it in
    #: :attr:`Workload.optional_backends`.
    generic = True

    def __init__(self) -> None:
        self._state: bool | None = None
        self.error: str | None = None
        self.version: str | None = None
        self.details: dict[str, str] = {}
        self.ops: Any = None

    def load(self) -> bool:
        """Import the backend once.

        Returns
        -------
        bool
            True if the backend is usable.  On failure :attr:`error` holds
            the reason and the backend counts as missing.
        """
        if self._state is None:
            try:
                self._load()
                self._state = True
            except Exception as exc:  # ImportError, or a broken install
                self.error = f"{type(exc).__name__}: {exc}"
                self._state = False
        return self._state

    @property
    def available(self) -> bool:
        """bool: whether the backend could be imported."""
        return self.load()

    def _load(self) -> None:
        raise NotImplementedError

    def to_numpy(self, value: Any) -> onp.ndarray:
        """Copy a backend array into a new NumPy array."""
        return onp.array(value, copy=True)

    def block(self, value: Any) -> None:
        """Wait until ``value`` is computed (for asynchronous backends)."""

    def gradient_step(
        self,
        loss: Callable[..., Any],
        params: Sequence[onp.ndarray],
        consts: Sequence[onp.ndarray],
    ) -> Step:
        """Build a callable computing the gradient of ``loss`` wrt ``params``.

        Parameters
        ----------
        loss : callable
            ``loss(ops, *params, *consts)`` returning a scalar.
        params : sequence of numpy.ndarray
            Inputs to differentiate with respect to.
        consts : sequence of numpy.ndarray
            Inputs that are not differentiated.

        Returns
        -------
        callable
            Zero-argument function running one forward and backward pass and
            returning the gradients as backend arrays.  Converting the inputs
            happens here, outside of the returned function.
        """
        raise NotImplementedError


class NumpyBackend(Backend):
    """Hand-written NumPy forward and backward passes (the reference)."""

    name = "numpy"
    label = "hand-written NumPy"

    def _load(self) -> None:
        self.version = onp.__version__
        self.ops = NUMPY_OPS

    def gradient_step(self, loss, params, consts):  # pragma: no cover
        raise TypeError("NumPy has no autodiff: workloads hand-write it")


def _import_fastgrad():
    """Import fastgrad, falling back to the checkout containing this file."""
    try:
        return importlib.import_module("fastgrad")
    except ImportError:
        if not os.path.isfile(os.path.join(_REPO_ROOT, "fastgrad", "__init__.py")):
            raise
        sys.path.insert(0, _REPO_ROOT)
        sys.modules.pop("fastgrad", None)
        return importlib.import_module("fastgrad")


class FastgradBackend(Backend):
    """fastgrad through its MXNet-style ``autograd`` API."""

    name = "fastgrad"
    label = "fastgrad"

    def _load(self) -> None:
        fg = _import_fastgrad()
        from fastgrad import autograd as fg_autograd
        from fastgrad import np as fnp
        from fastgrad import npx

        self.fg, self.fnp, self.npx, self.autograd = fg, fnp, npx, fg_autograd
        self.version = getattr(fg, "__version__", None) or _dist_version("fastgrad") or "?"
        self.details["path"] = os.path.dirname(os.path.abspath(fg.__file__))
        for where in ("fastgrad._kernels._large", "fastgrad._large",  # move.py: keep line
                      "fastgrad._parallel"):  # newest first
            try:
                module = importlib.import_module(where)
            except ImportError:
                continue
            self.details["kernel threads"] = str(module.get_num_threads())
            break
        if hasattr(npx, "log_softmax"):
            log_softmax = lambda z: npx.log_softmax(z, axis=-1)  # noqa: E731
            self.details["log_softmax"] = "npx.log_softmax"
        else:
            log_softmax = self._log_softmax_composed
            self.details["log_softmax"] = "composed log-sum-exp (no npx.log_softmax)"
        self.ops = SimpleNamespace(
            sin=fnp.sin,
            cos=fnp.cos,
            exp=fnp.exp,
            tanh=fnp.tanh,
            sum=lambda x, axis=None, keepdims=False: fnp.sum(x, axis=axis, keepdims=keepdims),
            relu=npx.relu,
            log_softmax=log_softmax,
            sigmoid=npx.sigmoid,
            split=lambda x, n: fnp.split(x, n, axis=-1),
        )

    def _log_softmax_composed(self, z):
        """``z - logsumexp(z)`` along the last axis from basic operations.

        The row maximum is taken as a constant (not recorded): the gradient
        of log-sum-exp does not depend on the shift, so this is exact.
        """
        fnp = self.fnp
        shift = fnp.array(z.asnumpy().max(axis=-1, keepdims=True))
        z = z - shift
        return z - fnp.log(fnp.sum(fnp.exp(z), axis=-1, keepdims=True))

    def to_numpy(self, value):
        return onp.array(value.asnumpy(), copy=True)

    def gradient_step(self, loss, params, consts):
        fnp, fg_autograd, ops = self.fnp, self.autograd, self.ops
        xs = [fnp.array(p) for p in params]
        for x in xs:
            x.attach_grad()
        cs = [fnp.array(c) for c in consts]

        def step():
            with fg_autograd.record():
                out = loss(ops, *xs, *cs)
            out.backward()
            return tuple(x.grad for x in xs)

        step.arrays = xs            # the differentiated arrays (``fastgrad-sgd`` updates them)
        return step


# Note [Training-step backends]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# Workloads 2 and 8 also run as whole training steps, as a user of a framework's training API
# writes them: ``gluon-fastgrad`` (fastgrad's Gluon, imperative), ``gluon-fastgrad-hybrid``
# (the same network hybridized) and ``torch-nn`` (PyTorch's ``nn.Module`` and
# ``torch.optim.SGD``). A step also updates the weights (SGD, learning rate SGD_LR), so its
# reference is ``fastgrad-sgd``: the hand-written ``fastgrad`` step followed by
# ``w -= lr * w.grad`` for every weight; Gluon's own overhead is the ratio of the Gluon step's
# time to that one's. Every network starts from the workload's own inputs (a dense weight set
# to the transpose of the hand-written ``X @ W`` one, since ``nn.Dense`` and ``nn.Linear``
# hold (out, in)), the loss is the same mean softmax cross-entropy, and the step returns the
# gradients of its first call, which are checked against the hand-written NumPy ones after
# ``Workload.gradients`` brought them to the reference's layout: Gluon's ``loss.backward()``
# sums the per-sample losses (``trainer.step(batch)`` divides by the batch), so its gradients
# are divided by the batch there. Later steps train on, from the updated weights (the timed
# steps do not reset them; the update is part of what is timed).


class FastgradSGDBackend(FastgradBackend):
    """The hand-written ``fastgrad`` step followed by a hand-written SGD update of every
    differentiated array (``w -= lr * w.grad``): the reference of the Gluon steps (Note
    [Training-step backends])."""

    name = "fastgrad-sgd"
    label = "fastgrad step + SGD by hand"
    generic = False

    def sgd(self, step: Step, lr: float = SGD_LR) -> Step:
        """``step`` (a ``fastgrad`` step with its ``arrays``) followed by ``w -= lr * grad``."""
        ws = step.arrays

        def train():
            grads = step()
            for w, g in zip(ws, grads):
                w -= lr * g
            return grads

        train.arrays = ws
        return train


class GluonBackend(FastgradBackend):
    """fastgrad's Gluon: ``gluon.nn`` blocks, a ``gluon.loss``, ``gluon.Trainer('sgd')``; one
    step is ``with autograd.record(): loss = loss_fn(net(X), y)``, ``loss.backward()``,
    ``trainer.step(batch)``, as a Gluon user writes it (Note [Training-step backends])."""

    name = "gluon-fastgrad"
    label = "fastgrad Gluon, imperative"
    generic = False
    hybridize = False
    #: The step's gradients are of the loss summed over the batch (Note [Training-step
    #: backends]); dense weights are (out, in).
    sums_over_batch = True
    dense_out_in = True

    def _load(self) -> None:
        super()._load()
        from fastgrad import gluon

        self.gluon, self.nn = gluon, gluon.nn

    def train_step(self, net, loss_fn, X, y, batch: int, weights: dict[str, onp.ndarray],
                   lr: float = SGD_LR) -> Step:
        """The training step of ``net`` (a ``HybridSequential`` with known shapes), its
        parameters set to ``weights`` (in the order of ``collect_params()``).

        The step returns the parameters' gradients as the engine left them: those of the
        per-sample loss summed over the batch (``trainer.step(batch)`` divides by ``batch``).
        """
        fg, autograd = self.fg, self.autograd
        params = list(net.collect_params().values())
        if len(params) != len(weights):
            raise ValueError(f"{len(params)} parameters, {len(weights)} values")
        net.initialize()
        for p, value in zip(params, weights.values()):
            p.set_data(fg.nd.array(value, dtype=value.dtype))
        if self.hybridize:
            net.hybridize()
        trainer = self.gluon.Trainer(net.collect_params(), "sgd", {"learning_rate": lr})
        ws = [p.data() for p in params]

        def step():
            with autograd.record():
                loss = loss_fn(net(X), y)
            loss.backward()
            trainer.step(batch)
            return tuple(w.grad for w in ws)

        step.arrays = ws
        return step


class GluonHybridBackend(GluonBackend):
    """:class:`GluonBackend` with the network hybridized (traced once, run on the Executor)."""

    name = "gluon-fastgrad-hybrid"
    label = "fastgrad Gluon, hybridized"
    hybridize = True


class HipsAutogradBackend(Backend):
    """HIPS autograd (``pip install autograd``)."""

    name = "autograd"
    label = "HIPS autograd"

    def _load(self) -> None:
        import autograd
        import autograd.numpy as anp
        from autograd.scipy.special import logsumexp

        self.autograd, self.anp = autograd, anp
        self.version = _dist_version("autograd") or getattr(autograd, "__version__", "?")
        self.ops = SimpleNamespace(
            sin=anp.sin,
            cos=anp.cos,
            exp=anp.exp,
            tanh=anp.tanh,
            sum=lambda x, axis=None, keepdims=False: anp.sum(x, axis=axis, keepdims=keepdims),
            relu=lambda x: anp.maximum(x, 0.0),
            log_softmax=lambda z: z - logsumexp(z, axis=-1, keepdims=True),
            sigmoid=lambda x: 0.5 * (anp.tanh(0.5 * x) + 1.0),
            split=_split_by_slicing,
        )

    def gradient_step(self, loss, params, consts):
        ops = self.ops
        grad_fn = self.autograd.grad(lambda xs, cs: loss(ops, *xs, *cs))
        xs = tuple(onp.array(p, copy=True) for p in params)
        cs = tuple(onp.array(c, copy=True) for c in consts)
        return lambda: tuple(grad_fn(xs, cs))


class TorchBackend(Backend):
    """PyTorch eager mode on the CPU, default intra-op threads."""

    name = "torch"
    label = "PyTorch eager (CPU)"
    memory_method = "rss"

    def _load(self) -> None:
        import torch

        self.torch = torch
        self.version = torch.__version__
        self.details["threads"] = str(torch.get_num_threads())
        self.ops = SimpleNamespace(
            sin=torch.sin,
            cos=torch.cos,
            exp=torch.exp,
            tanh=torch.tanh,
            sum=self._sum,
            relu=torch.relu,
            log_softmax=lambda z: torch.log_softmax(z, dim=-1),
            sigmoid=torch.sigmoid,
            split=lambda x, n: torch.chunk(x, n, dim=-1),
        )

    def _sum(self, x, axis=None, keepdims=False):
        if axis is None:
            return self.torch.sum(x)
        return self.torch.sum(x, dim=axis, keepdim=keepdims)

    def tensor(self, a: onp.ndarray, requires_grad: bool = False):
        """A torch tensor owning a copy of ``a``."""
        t = self.torch.from_numpy(onp.array(a, copy=True))
        return t.requires_grad_(True) if requires_grad else t

    def to_numpy(self, value):
        return value.detach().numpy().copy()

    def gradient_step(self, loss, params, consts):
        torch, ops = self.torch, self.ops
        xs = [self.tensor(p, requires_grad=True) for p in params]
        cs = [self.tensor(c) for c in consts]

        def step():
            out = loss(ops, *xs, *cs)
            return torch.autograd.grad(out, xs)

        return step


class TorchNNBackend(TorchBackend):
    """PyTorch as its users train: an ``nn.Module``, ``nn.CrossEntropyLoss`` and
    ``torch.optim.SGD``; one step is ``opt.zero_grad()``, ``loss_fn(model(X), y).backward()``,
    ``opt.step()`` (Note [Training-step backends])."""

    name = "torch-nn"
    label = "PyTorch nn.Module + optim.SGD"
    generic = False
    dense_out_in = True

    def train_step(self, model, X, y, weights: dict[str, onp.ndarray], lr: float = SGD_LR) -> Step:
        """The training step of ``model``, its parameters set to ``weights`` (in the order of
        ``model.parameters()``); it returns the gradients (of the mean loss)."""
        torch = self.torch
        params = list(model.parameters())
        if len(params) != len(weights):
            raise ValueError(f"{len(params)} parameters, {len(weights)} values")
        with torch.no_grad():
            for p, value in zip(params, weights.values()):
                p.copy_(torch.from_numpy(onp.ascontiguousarray(value)))
        loss_fn = torch.nn.CrossEntropyLoss()
        opt = torch.optim.SGD(params, lr=lr)

        def step():
            opt.zero_grad()
            loss = loss_fn(model(X), y)
            loss.backward()
            opt.step()
            return tuple(p.grad for p in params)

        step.arrays = params
        return step


class JaxBackend(Backend):
    """JAX ``jax.grad`` without ``jit`` on the CPU, 64-bit floats enabled."""

    name = "jax"
    label = "JAX eager (no jit)"
    memory_method = "rss"

    def _load(self) -> None:
        os.environ.setdefault("JAX_PLATFORMS", "cpu")
        import jax
        import jax.numpy as jnp

        jax.config.update("jax_enable_x64", True)
        self.jax, self.jnp = jax, jnp
        self.version = jax.__version__
        self.details["jaxlib"] = _dist_version("jaxlib") or "?"
        self.ops = SimpleNamespace(
            sin=jnp.sin,
            cos=jnp.cos,
            exp=jnp.exp,
            tanh=jnp.tanh,
            sum=lambda x, axis=None, keepdims=False: jnp.sum(x, axis=axis, keepdims=keepdims),
            relu=jax.nn.relu,
            log_softmax=lambda z: jax.nn.log_softmax(z, axis=-1),
            sigmoid=jax.nn.sigmoid,
            split=lambda x, n: jnp.split(x, n, axis=-1),
        )

    def array(self, a: onp.ndarray):
        """A JAX array holding ``a`` (same dtype)."""
        return self.jnp.asarray(a)

    def block(self, value):
        self.jax.block_until_ready(value)

    def gradient_step(self, loss, params, consts):
        ops = self.ops
        grad_fn = self.jax.grad(lambda xs, cs: loss(ops, *xs, *cs))
        xs = tuple(self.array(p) for p in params)
        cs = tuple(self.array(c) for c in consts)
        return lambda: tuple(grad_fn(xs, cs))


class JaxJitBackend(JaxBackend):
    """JAX with the whole gradient step compiled by ``jax.jit`` (64-bit floats enabled).

    Only for the workloads that list it in :attr:`Workload.optional_backends` (the training
    steps): compiling a 100,000-op chain would take longer than running it.  The compilation
    happens in the warm-up run, which is not timed.
    """

    name = "jax-jit"
    label = "JAX jit"
    generic = False

    def gradient_step(self, loss, params, consts):
        ops = self.ops
        grad_fn = self.jax.jit(self.jax.grad(lambda xs, cs: loss(ops, *xs, *cs)))
        xs = tuple(self.array(p) for p in params)
        cs = tuple(self.array(c) for c in consts)
        return lambda: tuple(grad_fn(xs, cs))


class FastgradMaximumBackend(FastgradBackend):
    """fastgrad with relu written as ``np.maximum(z, 0)``, the way D2L and HIPS autograd
    programs write it (issue 27), for workload 6: the tie at 0 splits the gradient as
    ``maximum``'s rule does, so its gradient differs from ``npx.relu``'s only where ``z == 0``.
    """

    name = "fastgrad-maximum"
    label = "fastgrad, relu as np.maximum(z, 0)"
    generic = False

    def _load(self) -> None:
        super()._load()
        fnp = self.fnp
        self.ops.relu = lambda x: fnp.maximum(x, 0)  # noqa: E731


class FastgradExecutorBackend(FastgradBackend):
    """fastgrad's bound ``Executor``: a symbol bound once, then ``forward``/``backward``.

    Only for the workloads that list it in :attr:`Workload.optional_backends`; each writes its
    model with ``fastgrad.sym`` (``<workload>.fastgrad_exec_step``).
    """

    name = "fastgrad-exec"
    label = "fastgrad bound Executor"
    generic = False

    def _load(self) -> None:
        super()._load()
        self.sym = self.fg.sym

    def bind_step(self, symbol, inputs: dict[str, onp.ndarray], params: Sequence[str]) -> Step:
        """Bind ``symbol`` to ``inputs`` (gradients for ``params`` only) and return its step.

        Parameters
        ----------
        symbol : fastgrad.sym.Symbol
            A scalar loss.
        inputs : dict of numpy.ndarray
            A value for every argument of ``symbol``.
        params : sequence of str
            The arguments whose gradients the step returns, in this order.
        """
        fg, fnp = self.fg, self.fnp
        names = symbol.list_arguments()
        missing = [n for n in names if n not in inputs]
        if missing:
            raise ValueError(f"no value for the symbol's arguments {missing}")
        wanted = set(params)
        ex = symbol.bind(fg.cpu(), {n: fnp.array(inputs[n]) for n in names},
                         grad_req={n: "write" if n in wanted else "null" for n in names})
        grad_dict = ex.grad_dict

        def step():
            ex.forward(is_train=True)
            ex.backward()
            return tuple(grad_dict[n] for n in params)

        return step


class MxnetBackend(Backend):
    """Apache MXNet (1.9) through its NumPy interface: ``mx.np``, ``mx.npx``, ``mx.autograd``.

    MXNet 1.9 needs ``numpy<1.24``, so it usually lives in a virtual environment of its own;
    ``compare.py --mxnet-python PATH`` runs this backend with that interpreter.  MXNet runs
    operations asynchronously: :meth:`block` waits for them (``mx.npx.waitall()``).
    """

    name = "mxnet"
    label = "Apache MXNet"
    memory_method = "rss"

    def _load(self) -> None:
        try:
            import mxnet as mx
        except ImportError as exc:
            raise ImportError(f"{exc} (give compare.py --mxnet-python PATH, the interpreter of "
                              f"an environment with MXNet 1.9)") from exc

        mx.npx.set_np()
        self.mx, self.mnp, self.npx = mx, mx.np, mx.npx
        self.version = getattr(mx, "__version__", None) or _dist_version("mxnet") or "?"
        self.details["numpy"] = onp.__version__
        mnp, npx = mx.np, mx.npx
        self.ops = SimpleNamespace(
            sin=mnp.sin,
            cos=mnp.cos,
            exp=mnp.exp,
            tanh=mnp.tanh,
            sum=lambda x, axis=None, keepdims=False: mnp.sum(x, axis=axis, keepdims=keepdims),
            relu=npx.relu,
            log_softmax=lambda z: npx.log_softmax(z, axis=-1),
            sigmoid=npx.sigmoid,
            split=lambda x, n: mnp.split(x, n, axis=-1),
        )

    def array(self, a: onp.ndarray):
        """An MXNet array holding a copy of ``a`` (same dtype)."""
        return self.mnp.array(a, dtype=a.dtype)

    def to_numpy(self, value):
        return onp.array(value.asnumpy(), copy=True)

    def block(self, value):
        self.npx.waitall()

    def gradient_step(self, loss, params, consts):
        mx, ops = self.mx, self.ops
        xs = [self.array(p) for p in params]
        for x in xs:
            x.attach_grad()
        cs = [self.array(c) for c in consts]

        def step():
            with mx.autograd.record():
                out = loss(ops, *xs, *cs)
            out.backward()
            return tuple(x.grad for x in xs)

        return step


def _split_by_slicing(x, n):
    """``x`` cut into ``n`` equal parts along its last axis, by basic slicing."""
    width = x.shape[-1] // n
    return [x[..., k * width:(k + 1) * width] for k in range(n)]


def _np_log_softmax(z):
    z = z - z.max(axis=-1, keepdims=True)
    return z - onp.log(onp.sum(onp.exp(z), axis=-1, keepdims=True))


#: Plain NumPy operations: evaluates a workload's loss without gradients
#: (used for finite-difference checks of the hand-written gradients).
NUMPY_OPS = SimpleNamespace(
    sin=onp.sin,
    cos=onp.cos,
    exp=onp.exp,
    tanh=onp.tanh,
    sum=lambda x, axis=None, keepdims=False: onp.sum(x, axis=axis, keepdims=keepdims),
    relu=lambda x: onp.maximum(x, 0),
    log_softmax=_np_log_softmax,
    sigmoid=lambda x: 0.5 * (onp.tanh(0.5 * x) + 1.0),
    split=lambda x, n: onp.split(x, n, axis=-1),
)

_BACKEND_CLASSES = {
    cls.name: cls
    for cls in (NumpyBackend, FastgradBackend, FastgradMaximumBackend, FastgradExecutorBackend,
                FastgradSGDBackend,
                GluonBackend, GluonHybridBackend, HipsAutogradBackend, TorchBackend,
                TorchNNBackend, JaxBackend, JaxJitBackend, MxnetBackend)
}
_BACKENDS: dict[str, Backend] = {}


def get_backend(name: str) -> Backend:
    """Return the (shared) backend object called ``name``.

    Parameters
    ----------
    name : str
        One of :data:`BACKEND_NAMES`.

    Returns
    -------
    Backend
        Not yet imported; call :meth:`Backend.load` to find out whether it is
        available.
    """
    if name not in _BACKENDS:
        try:
            _BACKENDS[name] = _BACKEND_CLASSES[name]()
        except KeyError:
            raise ValueError(f"unknown backend {name!r}; choose from {BACKEND_NAMES}") from None
    return _BACKENDS[name]


# ---------------------------------------------------------------------------
# Gradient checking
# ---------------------------------------------------------------------------


class GradCheck:
    """Outcome of comparing a backend's gradients with the reference.

    Attributes
    ----------
    ok : bool
        Values (and shapes) agree within tolerance.
    max_error : float
        Largest ``|got - expected| / max|expected|`` over all gradients.
    note : str
        Empty, or a description of the problem (a shape or dtype difference).
    """

    def __init__(self, ok: bool, max_error: float, note: str = "") -> None:
        self.ok, self.max_error, self.note = ok, max_error, note

    def __bool__(self) -> bool:
        return self.ok

    def __repr__(self) -> str:
        return f"GradCheck(ok={self.ok}, max_error={self.max_error:.3g}, note={self.note!r})"


def check_gradients(
    got: Sequence[onp.ndarray], expected: Sequence[onp.ndarray], rtol: float
) -> GradCheck:
    """Compare gradients elementwise, relative to each gradient's scale.

    An element passes when ``|got - expected| <= rtol * (|expected| +
    max|expected|)``, i.e. ``numpy.allclose`` with ``atol = rtol *
    max|expected|``, so that entries that are nearly zero compared with the
    rest of the array do not demand impossible relative accuracy.

    Parameters
    ----------
    got, expected : sequence of numpy.ndarray
        Gradients of the backend under test and of the reference.
    rtol : float
        Relative tolerance.

    Returns
    -------
    GradCheck
        ``ok`` is False on a value or shape mismatch; a dtype difference
        alone keeps ``ok`` True but is described in ``note``.
    """
    if len(got) != len(expected):
        return GradCheck(False, onp.inf, f"{len(got)} gradients, expected {len(expected)}")
    ok, worst, notes = True, 0.0, []
    for i, (g, e) in enumerate(zip(got, expected)):
        g, e = onp.asarray(g), onp.asarray(e)
        if g.shape != e.shape:
            ok, worst = False, onp.inf
            notes.append(f"grad {i}: shape {g.shape}, expected {e.shape}")
            continue
        if g.dtype != e.dtype:
            notes.append(f"grad {i}: dtype {g.dtype}, expected {e.dtype}")
        scale = float(onp.max(onp.abs(e))) if e.size else 0.0
        diff = onp.abs(g.astype(onp.float64) - e.astype(onp.float64))
        err = float(onp.max(diff)) / scale if scale > 0 else float(onp.max(diff, initial=0.0))
        if not onp.isfinite(err):
            err = onp.inf
        worst = max(worst, err)
        if not onp.allclose(g, e, rtol=rtol, atol=rtol * scale):
            ok = False
    return GradCheck(ok, worst, "; ".join(notes))


# ---------------------------------------------------------------------------
# Workloads
# ---------------------------------------------------------------------------


class Workload:
    """A gradient computation implemented for every backend.

    Subclasses define the inputs, a generic ``loss`` (or per-backend
    ``<backend>_step`` methods) and a hand-written :meth:`numpy_step`.

    Attributes
    ----------
    key : str
        Number used on the command line (``--workloads 1,2``).
    slug : str
        Identifier used in test names.
    title : str
        Short description for tables.
    params : tuple of str
        Names of the inputs differentiated with respect to, in the order in
        which gradients are returned.
    consts : tuple of str
        Names of the other inputs passed to ``loss``.
    n_ops : int or None
        Number of recorded operations, for a time-per-operation column.
    rtol : float
        Tolerance of the gradient check (see :func:`check_gradients`).
    seed : int
        Seed of the input generator.
    """

    key = ""
    slug = ""
    params: tuple[str, ...] = ()
    consts: tuple[str, ...] = ()
    n_ops: int | None = None
    rtol = 1e-8
    seed = 0
    #: Attribute values of the reduced ``--quick`` variant.
    quick_overrides: dict[str, Any] = {}
    #: Backends that run only some workloads (``Backend.generic`` False) and run this one.
    optional_backends: tuple[str, ...] = ()

    def supports(self, backend: Backend) -> bool:
        """Whether this workload runs on ``backend`` (see :attr:`Backend.generic`)."""
        return backend.generic or backend.name in self.optional_backends

    @property
    def title(self) -> str:
        """str: short description for tables (reflects the problem size)."""
        raise NotImplementedError

    def scaled(self, quick: bool) -> Workload:
        """Return this workload, or its smaller variant if ``quick``.

        Parameters
        ----------
        quick : bool
            Whether to apply :attr:`quick_overrides`.

        Returns
        -------
        Workload
            ``self`` or a modified shallow copy.
        """
        if not quick or not self.quick_overrides:
            return self
        new = copy.copy(self)
        new.__dict__.update(self.quick_overrides)
        return new

    def resized(self, **sizes: Any) -> Workload:
        """A shallow copy with other sizes, e.g. ``get_workload("8").resized(batch=4)``.

        Raises
        ------
        AttributeError
            If the workload has no attribute of one of the given names.
        """
        for name in sizes:
            if not hasattr(self, name):
                raise AttributeError(f"workload {self.key} has no size {name!r}")
        new = copy.copy(self)
        new.__dict__.update(sizes)
        return new

    def make_inputs(self) -> dict[str, onp.ndarray]:
        """Return the (deterministic) NumPy inputs of the workload."""
        raise NotImplementedError

    def loss(self, ops: Any, *arrays: Any) -> Any:
        """The scalar function differentiated, over the namespace ``ops``."""
        raise NotImplementedError

    def numpy_step(self, inputs: dict[str, onp.ndarray]) -> Step:
        """Hand-written NumPy forward and backward pass."""
        raise NotImplementedError

    def build(self, backend: Backend, inputs: dict[str, onp.ndarray]) -> Step:
        """Prepare one backend's step function.

        Parameters
        ----------
        backend : Backend
            A loaded backend.
        inputs : dict of numpy.ndarray
            As returned by :meth:`make_inputs`.

        Returns
        -------
        callable
            Zero-argument function that runs the forward and backward pass
            and returns the gradients (backend arrays, in the order of
            :attr:`params`).  Call ``backend.block`` on the result before
            stopping a timer.
        """
        if backend.name == "numpy":
            return self.numpy_step(inputs)
        if not self.supports(backend):
            raise ValueError(f"workload {self.key} does not run on {backend.name}")
        custom = getattr(self, f"{backend.name.replace('-', '_')}_step", None)
        if custom is not None:
            return custom(backend, inputs)
        return backend.gradient_step(
            self.loss,
            [inputs[n] for n in self.params],
            [inputs[n] for n in self.consts],
        )

    def gradients(self, backend: Backend, out: Sequence[Any]) -> list[onp.ndarray]:
        """The gradients a step of ``backend`` returned, as NumPy arrays in the layout and
        scale of the hand-written ones (Note [Training-step backends])."""
        grads = [backend.to_numpy(g) for g in out]
        if getattr(backend, "sums_over_batch", False):
            grads = [(g / self.batch).astype(g.dtype) for g in grads]
        return grads

    def value(self, inputs: dict[str, onp.ndarray]) -> float:
        """Evaluate the loss in float64 NumPy (no gradient)."""
        arrays = [onp.asarray(inputs[n], dtype=onp.float64) for n in self.params + self.consts]
        return float(self.loss(NUMPY_OPS, *arrays))

    def finite_difference_error(
        self, inputs: dict[str, onp.ndarray], grads: Sequence[onp.ndarray], eps: float = 1e-7
    ) -> float:
        """Check gradients against a central difference along a random direction.

        Parameters
        ----------
        inputs : dict of numpy.ndarray
            The workload's inputs.
        grads : sequence of numpy.ndarray
            Gradients to check, in the order of :attr:`params`.
        eps : float
            Step relative to the size of each input.

        Returns
        -------
        float
            ``|fd - <grads, v>| / max(|fd|, |<grads, v>|)``.
        """
        rng = onp.random.default_rng(12345)
        plus, minus, predicted = dict(inputs), dict(inputs), 0.0
        for name, g in zip(self.params, grads):
            x = onp.asarray(inputs[name], dtype=onp.float64)
            h = eps * max(1.0, float(onp.max(onp.abs(x)))) * rng.standard_normal(x.shape)
            plus[name], minus[name] = x + h, x - h
            predicted += float(onp.sum(onp.asarray(g, dtype=onp.float64) * h))
        fd = (self.value(plus) - self.value(minus)) / 2.0
        return abs(fd - predicted) / max(abs(fd), abs(predicted), 1e-300)

    def __repr__(self) -> str:
        return f"<Workload {self.key}: {self.slug}>"


class OpChain(Workload):
    """A chain of 300 small elementwise operations on a (16,) float64 array.

    Sixty repetitions of ``y = sin(y); y = exp(y); y = tanh(y); y = y * 0.9;
    y = y + x`` starting from ``y = x``, then ``sum(y)``; gradient with
    respect to ``x``.  Measures the per-operation overhead of recording and
    replaying a tape when the arithmetic itself is negligible.
    """

    key, slug = "1", "op_chain_300"
    params = ("x",)
    n_ops = 300
    rtol = 1e-8

    @property
    def title(self):
        return f"{self.n_ops}-op elementwise chain, (16,) f64"

    def make_inputs(self):
        rng = onp.random.default_rng(self.seed + 1)
        return {"x": rng.uniform(-0.5, 0.5, size=16)}

    def loss(self, ops, x):
        y = x
        for _ in range(self.n_ops // 5):
            y = ops.sin(y)
            y = ops.exp(y)
            y = ops.tanh(y)
            y = y * 0.9
            y = y + x
        return ops.sum(y)

    def numpy_step(self, inputs):
        x = inputs["x"]
        cycles = self.n_ops // 5

        def step():
            sin_in, exp_out, tanh_out = [], [], []
            y = x
            for _ in range(cycles):
                sin_in.append(y)
                e = onp.exp(onp.sin(y))
                exp_out.append(e)
                t = onp.tanh(e)
                tanh_out.append(t)
                y = t * 0.9
                y += x
            _ = y.sum()  # the loss value
            g = onp.ones_like(x)
            gx = onp.zeros_like(x)
            tmp = onp.empty_like(x)
            for c in range(cycles - 1, -1, -1):
                gx += g  # y = y + x
                g *= 0.9  # y = y * 0.9
                t = tanh_out[c]  # y = tanh(y): dy = 1 - t**2
                onp.multiply(t, t, out=tmp)
                onp.subtract(1.0, tmp, out=tmp)
                g *= tmp
                g *= exp_out[c]  # y = exp(y)
                g *= onp.cos(sin_in[c], out=tmp)  # y = sin(y)
            gx += g  # the chain starts at y = x
            return (gx,)

        return step


class MLPStep(Workload):
    """One MLP training step: 784-256-256-10, batch 128, float32.

    ``relu(X @ W1 + b1)``, ``relu(. @ W2 + b2)``, ``. @ W3 + b3``, then the
    mean softmax cross-entropy against one-hot labels, written as
    ``-sum(log_softmax(logits) * onehot) / 128``; gradients of all six
    weights and biases.  Measures a typical small deep-learning step, where
    the time goes into BLAS and a few large elementwise operations.
    """

    key, slug = "2", "mlp_step"
    params = ("W1", "b1", "W2", "b2", "W3", "b3")
    consts = ("X", "onehot")
    rtol = 1e-4
    sizes = (784, 256, 256, 10)
    batch = 128
    optional_backends = ("fastgrad-exec", "jax-jit") + TRAINING_BACKENDS

    @property
    def title(self):
        return f"MLP step {'-'.join(map(str, self.sizes))}, batch {self.batch}, f32"

    def make_inputs(self):
        rng = onp.random.default_rng(self.seed + 2)
        f32 = onp.float32
        out: dict[str, onp.ndarray] = {}
        for i, (n_in, n_out) in enumerate(zip(self.sizes[:-1], self.sizes[1:]), start=1):
            out[f"W{i}"] = (rng.standard_normal((n_in, n_out)) * onp.sqrt(2.0 / n_in)).astype(f32)
            out[f"b{i}"] = (0.1 * rng.standard_normal(n_out)).astype(f32)
        out["X"] = rng.standard_normal((self.batch, self.sizes[0])).astype(f32)
        labels = rng.integers(0, self.sizes[-1], size=self.batch)
        out["onehot"] = onp.eye(self.sizes[-1], dtype=f32)[labels]
        return out

    def loss(self, ops, W1, b1, W2, b2, W3, b3, X, onehot):
        h = ops.relu(X @ W1 + b1)
        h = ops.relu(h @ W2 + b2)
        logp = ops.log_softmax(h @ W3 + b3)
        return -ops.sum(logp * onehot) / X.shape[0]

    def gradients(self, backend, out):
        grads = super().gradients(backend, out)
        if getattr(backend, "dense_out_in", False):       # (out, in) back to X @ W's (in, out)
            grads = [g.T.copy() if n.startswith("W") else g for n, g in zip(self.params, grads)]
        return grads

    def _out_in_weights(self, inputs):
        """The parameters in the layout of ``nn.Dense``/``nn.Linear``: weights (out, in)."""
        return {n: onp.ascontiguousarray(inputs[n].T) if n.startswith("W") else inputs[n]
                for n in self.params}

    def fastgrad_sgd_step(self, backend, inputs):
        return backend.sgd(backend.gradient_step(
            self.loss, [inputs[n] for n in self.params], [inputs[n] for n in self.consts]))

    def gluon_fastgrad_step(self, backend, inputs):
        nn, fg = backend.nn, backend.fg
        net = nn.HybridSequential()
        sizes = self.sizes
        for k, (n_in, n_out) in enumerate(zip(sizes[:-1], sizes[1:]), start=1):
            net.add(nn.Dense(n_out, activation="relu" if k < len(sizes) - 1 else None,
                             in_units=n_in))
        X = fg.nd.array(inputs["X"], dtype=onp.float32)
        y = fg.nd.array(inputs["onehot"].argmax(axis=1), dtype=onp.float32)
        loss_fn = backend.gluon.loss.SoftmaxCrossEntropyLoss()
        return backend.train_step(net, loss_fn, X, y, self.batch, self._out_in_weights(inputs))

    gluon_fastgrad_hybrid_step = gluon_fastgrad_step

    def torch_nn_step(self, backend, inputs):
        nn = backend.torch.nn
        layers = []
        for n_in, n_out in zip(self.sizes[:-1], self.sizes[1:]):
            layers += [nn.Linear(n_in, n_out), nn.ReLU()]
        model = nn.Sequential(*layers[:-1])
        X = backend.tensor(inputs["X"])
        y = backend.tensor(inputs["onehot"].argmax(axis=1))
        return backend.train_step(model, X, y, self._out_in_weights(inputs))

    def fastgrad_exec_step(self, backend, inputs):
        sym = backend.sym
        v = {n: sym.var(n) for n in self.params + self.consts}
        h = sym.relu(sym.matmul(v["X"], v["W1"]) + v["b1"])
        h = sym.relu(sym.matmul(h, v["W2"]) + v["b2"])
        logp = sym.log_softmax(sym.matmul(h, v["W3"]) + v["b3"], axis=-1)
        loss = -sym.sum(logp * v["onehot"]) / float(self.batch)
        return backend.bind_step(loss, inputs, self.params)

    def numpy_step(self, inputs):
        W1, b1, W2, b2, W3, b3 = (inputs[n] for n in self.params)
        X, onehot = inputs["X"], inputs["onehot"]
        inv_n = onp.float32(1.0 / X.shape[0])

        def step():
            h1 = X @ W1
            h1 += b1
            onp.maximum(h1, 0, out=h1)
            h2 = h1 @ W2
            h2 += b2
            onp.maximum(h2, 0, out=h2)
            z = h2 @ W3
            z += b3
            # softmax and loss; z becomes the probabilities p
            z -= z.max(axis=1, keepdims=True)
            onp.exp(z, out=z)
            s = z.sum(axis=1, keepdims=True)
            _ = (onp.log(s).sum() - onp.log(z[onehot > 0]).sum()) * inv_n  # the loss value
            z /= s
            # backward: d loss / d logits = (p - onehot) / n
            z -= onehot
            z *= inv_n
            dW3 = h2.T @ z
            db3 = z.sum(axis=0)
            d2 = z @ W3.T
            d2 *= h2 > 0
            dW2 = h1.T @ d2
            db2 = d2.sum(axis=0)
            d1 = d2 @ W2.T
            d1 *= h1 > 0
            dW1 = X.T @ d1
            db1 = d1.sum(axis=0)
            return (dW1, db1, dW2, db2, dW3, db3)

        return step


class LargeElementwise(Workload):
    """A large elementwise expression on 4,000,000 float64 values.

    ``sum(sin(x) * exp(-x * x) + x * x)``, gradient with respect to ``x``.
    Measures memory traffic and the cost of intermediates on big arrays, where
    per-operation overhead is irrelevant.
    """

    key, slug = "3", "large_elementwise"
    params = ("x",)
    rtol = 1e-8
    size = 4_000_000
    quick_overrides = {"size": 400_000}

    @property
    def title(self):
        return f"sum(sin(x)*exp(-x*x) + x*x), {self.size:,} f64"

    def make_inputs(self):
        rng = onp.random.default_rng(self.seed + 3)
        return {"x": rng.uniform(-3.0, 3.0, size=self.size)}

    optional_backends = ("fastgrad-exec",)

    def loss(self, ops, x):
        return ops.sum(ops.sin(x) * ops.exp(-x * x) + x * x)

    def fastgrad_exec_step(self, backend, inputs):
        sym = backend.sym
        x = sym.var("x")
        loss = sym.sum(sym.sin(x) * sym.exp(-x * x) + x * x)
        return backend.bind_step(loss, inputs, self.params)

    def numpy_step(self, inputs):
        x = inputs["x"]

        def step():
            x2 = x * x
            e = onp.negative(x2)
            onp.exp(e, out=e)  # exp(-x^2)
            s = onp.sin(x)
            _ = float(onp.dot(s, e)) + float(x2.sum())  # the loss value
            # d/dx = exp(-x^2) * (cos x - 2 x sin x) + 2 x
            g = onp.cos(x)
            s *= x
            s *= 2.0
            g -= s
            g *= e
            onp.multiply(x, 2.0, out=x2)
            g += x2
            return (g,)

        return step


class LongChain(Workload):
    """A chain of 100,000 operations on a (1,) float64 array.

    50,000 repetitions of ``y = y * 1.0000001; y = y + 0.0`` from ``y = x``,
    then ``sum(y)``; gradient with respect to ``x``.  Measures the
    per-operation cost on a very deep tape, and that backward does not
    recurse (no ``RecursionError``) or go quadratic.
    """

    key, slug = "4", "long_chain_100k"
    params = ("x",)
    n_ops = 100_000
    rtol = 1e-8
    factor = 1.0000001
    quick_overrides = {"n_ops": 5_000}

    @property
    def title(self):
        return f"{self.n_ops:,}-op chain y*c, y+0, (1,) f64"

    def make_inputs(self):
        return {"x": onp.array([0.75])}

    def loss(self, ops, x):
        c = self.factor
        y = x
        for _ in range(self.n_ops // 2):
            y = y * c
            y = y + 0.0
        return ops.sum(y)

    def numpy_step(self, inputs):
        x = inputs["x"]
        c = self.factor
        reps = self.n_ops // 2

        def step():
            y = x.copy()  # linear ops: nothing needs saving, work in place
            for _ in range(reps):
                onp.multiply(y, c, out=y)
                onp.add(y, 0.0, out=y)
            _ = y.sum()  # the loss value
            g = onp.ones_like(x)
            for _ in range(reps):  # "+ 0.0" has identity derivative
                onp.multiply(g, c, out=g)
            return (g,)

        return step


class FourthDerivative(Workload):
    """Fourth derivative of ``sum(sin(x) * x)`` by nested gradients.

    ``x`` has shape (1000,), float64.  The autodiff backends differentiate
    three times with ``create_graph=True`` (each time summing the previous
    gradient) and once more without; the NumPy reference is the closed form
    ``d^4/dx^4 (x sin x) = x sin x - 4 cos x``.  Measures higher-order
    differentiation: recording the backward pass and differentiating it.
    """

    key, slug = "5", "fourth_derivative"
    params = ("x",)
    rtol = 1e-8
    order = 4

    @property
    def title(self):
        return "4th derivative of sum(sin(x)*x), (1000,) f64"

    def make_inputs(self):
        rng = onp.random.default_rng(self.seed + 5)
        return {"x": rng.uniform(-4.0, 4.0, size=1000)}

    def loss(self, ops, x):
        return ops.sum(ops.sin(x) * x)

    def numpy_step(self, inputs):
        x = inputs["x"]

        def step():
            g = onp.sin(x)
            g *= x
            c = onp.cos(x)
            c *= 4.0
            g -= c
            return (g,)

        return step

    def fastgrad_step(self, backend, inputs):
        fnp, fg_autograd = backend.fnp, backend.autograd
        x = fnp.array(inputs["x"])
        x.attach_grad()
        order = self.order

        def step():
            with fg_autograd.record():
                y = fnp.sum(fnp.sin(x) * x)
                for _ in range(order - 1):
                    (d,) = fg_autograd.grad(y, [x], create_graph=True)
                    y = fnp.sum(d)
            (d,) = fg_autograd.grad(y, [x])
            return (d,)

        return step

    def torch_step(self, backend, inputs):
        torch = backend.torch
        x = backend.tensor(inputs["x"], requires_grad=True)
        order = self.order

        def step():
            y = torch.sum(torch.sin(x) * x)
            for _ in range(order - 1):
                (d,) = torch.autograd.grad(y, x, create_graph=True)
                y = torch.sum(d)
            return torch.autograd.grad(y, x)

        return step

    def mxnet_step(self, backend, inputs):
        mx, mnp = backend.mx, backend.mnp
        x = backend.array(inputs["x"])
        x.attach_grad()
        order = self.order

        def step():
            with mx.autograd.record():
                y = mnp.sum(mnp.sin(x) * x)
                for _ in range(order - 1):
                    d = mx.autograd.grad(y, [x], create_graph=True, retain_graph=True)[0]
                    y = mnp.sum(d.as_np_ndarray())  # autograd.grad returns a legacy NDArray
            y.backward()
            return (x.grad,)

        return step

    def _nested(self, grad, xp):
        fn = lambda x: xp.sum(xp.sin(x) * x)  # noqa: E731
        for _ in range(self.order - 1):
            fn = (lambda f: lambda x: xp.sum(grad(f)(x)))(fn)
        return grad(fn)

    def autograd_step(self, backend, inputs):
        d4 = self._nested(backend.autograd.grad, backend.anp)
        x = onp.array(inputs["x"], copy=True)
        return lambda: (d4(x),)

    def jax_step(self, backend, inputs):
        d4 = self._nested(backend.jax.grad, backend.jnp)
        x = backend.array(inputs["x"])
        return lambda: (d4(x),)

    def finite_difference_error(self, inputs, grads, eps=1e-2):
        """Compare with the fourth central difference of ``x sin x``.

        The difference quotient is accurate to O(eps**2), so the returned
        relative error is about 1e-5 for a correct gradient.
        """
        x = inputs["x"]
        f = lambda t: t * onp.sin(t)  # noqa: E731
        fd = (f(x + 2 * eps) - 4 * f(x + eps) + 6 * f(x) - 4 * f(x - eps)
              + f(x - 2 * eps)) / eps**4
        g = onp.asarray(grads[0])
        return float(onp.max(onp.abs(fd - g)) / onp.max(onp.abs(fd)))


class Broadcasting(Workload):
    """Broadcast add followed by relu and a full reduction.

    ``sum(relu(x + b))`` with ``x`` of shape (512, 512) and ``b`` of shape
    (512,), float64; gradients for ``x`` and ``b``.  Measures the reduction
    of a gradient over broadcast axes (``b``'s gradient sums 512 rows).
    """

    key, slug = "6", "broadcast_relu"
    params = ("x", "b")
    optional_backends = ("fastgrad-maximum",)
    rtol = 1e-8

    @property
    def title(self):
        return "sum(relu(x + b)), x (512,512), b (512,) f64"

    def make_inputs(self):
        rng = onp.random.default_rng(self.seed + 6)
        return {"x": rng.standard_normal((512, 512)), "b": rng.standard_normal(512)}

    def loss(self, ops, x, b):
        return ops.sum(ops.relu(x + b))

    def numpy_step(self, inputs):
        x, b = inputs["x"], inputs["b"]

        def step():
            z = x + b
            onp.maximum(z, 0.0, out=z)
            _ = z.sum()  # the loss value
            dx = onp.greater(z, 0.0, out=onp.empty_like(z))  # 1.0 where active
            db = dx.sum(axis=0)
            return (dx, db)

        return step


class RecurrentTanh(Workload):
    """2,000 steps of ``h = tanh(h @ W)`` with (8, 8) matrices.

    ``loss = sum(h_2000)``, gradient with respect to ``W`` (shared by all
    steps), float64.  Measures a long sequential graph of small matrix
    operations, like backpropagation through time in a small RNN.
    """

    key, slug = "7", "recurrent_tanh"
    params = ("W",)
    consts = ("h0",)
    steps = 2000
    rtol = 1e-8
    quick_overrides = {"steps": 200}

    @property
    def n_ops(self):
        """int: two recorded operations (matmul, tanh) per step."""
        return 2 * self.steps

    @property
    def title(self):
        return f"{self.steps:,} x h = tanh(h @ W), (8,8) f64"

    def make_inputs(self):
        rng = onp.random.default_rng(self.seed + 7)
        q, _ = onp.linalg.qr(rng.standard_normal((8, 8)))
        return {"W": 1.5 * q, "h0": rng.standard_normal((8, 8))}

    def loss(self, ops, W, h0):
        h = h0
        for _ in range(self.steps):
            h = ops.tanh(h @ W)
        return ops.sum(h)

    def numpy_step(self, inputs):
        W, h0 = inputs["W"], inputs["h0"]
        T = self.steps
        WT = W.T.copy()

        def step():
            hs = onp.empty((T + 1,) + h0.shape)
            hs[0] = h0
            for t in range(T):
                onp.matmul(hs[t], W, out=hs[t + 1])
                onp.tanh(hs[t + 1], out=hs[t + 1])
            _ = hs[T].sum()  # the loss value
            # local derivatives of tanh for all steps at once: 1 - h^2
            deriv = onp.square(hs[1:])
            onp.subtract(1.0, deriv, out=deriv)
            # walk back: da_t = g_{t+1} * (1 - h_{t+1}^2); g_t = da_t @ W^T
            g = onp.ones_like(h0)
            for t in range(T - 1, -1, -1):
                da = deriv[t]
                da *= g  # deriv[t] now holds da_t
                onp.matmul(da, WT, out=g)
            # dW = sum_t h_t^T @ da_t, as one matrix product
            n = h0.shape[1]
            dW = hs[:-1].reshape(-1, n).T @ deriv.reshape(-1, n)
            return (dW,)

        return step


def _windows(x: onp.ndarray, k: int) -> onp.ndarray:
    """im2col of an NHWC array: the (N*OH*OW, C*k*k) matrix of its k x k windows (a copy).

    The columns are ordered (channel, row, column), like a (F, C, k, k) weight flattened.
    """
    view = onp.lib.stride_tricks.sliding_window_view(x, (k, k), axis=(1, 2))  # N,OH,OW,C,k,k
    n, oh, ow = view.shape[:3]
    return view.reshape(n * oh * ow, -1)


def _max_pool_2x2(r: onp.ndarray) -> onp.ndarray:
    """2x2 max-pooling of ``r``, a (C, N, H/2, 2, W/2, 2) reshape of a (C, N, H, W) array.

    The elementwise maximum of the four strided views: ``r.max(axis=(3, 5))``, a reduction
    over two axes of length 2, was 25 times slower here.
    """
    m = onp.maximum(r[:, :, :, 0, :, 0], r[:, :, :, 0, :, 1])
    onp.maximum(m, r[:, :, :, 1, :, 0], out=m)
    onp.maximum(m, r[:, :, :, 1, :, 1], out=m)
    return m


def _lenet_loss_numpy(p: dict[str, onp.ndarray], X: onp.ndarray, labels: onp.ndarray) -> float:
    """The LeNet loss by plain NumPy in the inputs' dtype (for finite differences)."""
    h = onp.pad(X.transpose(0, 2, 3, 1), ((0, 0), (2, 2), (2, 2), (0, 0)))
    for i in (1, 2):
        W, b = p[f"W{i}"], p[f"b{i}"]
        n, oh, ow = h.shape[0], h.shape[1] - 4, h.shape[2] - 4
        a = onp.maximum(_windows(h, 5) @ W.reshape(W.shape[0], -1).T + b, 0)
        h = a.reshape(n, oh // 2, 2, ow // 2, 2, -1).max(axis=(2, 4))
    h = h.transpose(0, 3, 1, 2).reshape(h.shape[0], -1)
    h = onp.maximum(h @ p["W3"].T + p["b3"], 0)
    h = onp.maximum(h @ p["W4"].T + p["b4"], 0)
    logp = _np_log_softmax(h @ p["W5"].T + p["b5"])
    return float(-logp[onp.arange(len(labels)), labels].mean())


def _lenet_loss(npx, X, labels, params):
    """LeNet's loss as an MXNet user writes it: the same code runs on fastgrad and on MXNet."""
    W1, b1, W2, b2, W3, b3, W4, b4, W5, b5 = params
    h = npx.convolution(X, W1, b1, kernel=(5, 5), num_filter=6, pad=(2, 2))
    h = npx.pooling(npx.relu(h), kernel=(2, 2), stride=(2, 2), pool_type="max")
    h = npx.convolution(h, W2, b2, kernel=(5, 5), num_filter=16)
    h = npx.pooling(npx.relu(h), kernel=(2, 2), stride=(2, 2), pool_type="max")
    h = npx.relu(npx.fully_connected(h, W3, b3, num_hidden=120))
    h = npx.relu(npx.fully_connected(h, W4, b4, num_hidden=84))
    z = npx.fully_connected(h, W5, b5, num_hidden=10)
    return -npx.pick(npx.log_softmax(z, axis=-1), labels).mean()


class LeNetStep(Workload):
    """One LeNet-5 training step, batch 64 of 1x28x28, float32.

    ``conv 5x5x6 pad 2 + bias -> relu -> max-pool 2x2 -> conv 5x5x16 + bias -> relu ->
    max-pool 2x2 -> flatten -> dense 120 -> relu -> dense 84 -> relu -> dense 10``, then the
    mean softmax cross-entropy against integer labels; gradients of all ten weights and
    biases.  Convolution weights are (F, C, 5, 5) and dense weights (out, in), as in MXNet
    and PyTorch.  Each backend is written the way its users write a LeNet: fastgrad and MXNet
    with ``npx.convolution``, ``npx.pooling``, ``npx.fully_connected`` and
    ``-npx.pick(npx.log_softmax(z), labels).mean()``; PyTorch with ``torch.nn.functional``;
    JAX with ``lax.conv_general_dilated`` and ``lax.reduce_window``; the hand-written NumPy
    version with im2col and one matrix product per convolution (channels-first inside), and
    pooling as the maximum of four strided views of a reshape.  Measures a small
    convolutional training step.
    """

    key, slug = "8", "lenet_step"
    params = ("W1", "b1", "W2", "b2", "W3", "b3", "W4", "b4", "W5", "b5")
    consts = ("X", "labels")
    rtol = 1e-4
    batch = 64
    optional_backends = ("fastgrad-exec", "jax-jit") + TRAINING_BACKENDS
    quick_overrides = {"batch": 16}

    @property
    def title(self):
        return f"LeNet step, batch {self.batch} of 1x28x28, f32"

    def make_inputs(self):
        rng = onp.random.default_rng(self.seed + 8)
        f32 = onp.float32
        shapes = {"W1": (6, 1, 5, 5), "W2": (16, 6, 5, 5), "W3": (120, 400), "W4": (84, 120),
                  "W5": (10, 84)}
        out: dict[str, onp.ndarray] = {}
        for name, shape in shapes.items():
            fan_in = int(onp.prod(shape[1:]))
            out[name] = (rng.standard_normal(shape) * onp.sqrt(2.0 / fan_in)).astype(f32)
            out["b" + name[1:]] = (0.1 * rng.standard_normal(shape[0])).astype(f32)
        out["X"] = rng.standard_normal((self.batch, 1, 28, 28)).astype(f32)
        out["labels"] = rng.integers(0, 10, size=self.batch)
        return {n: out[n] for n in self.params + self.consts}

    def value(self, inputs):
        p = {n: onp.asarray(inputs[n], dtype=onp.float64) for n in self.params}
        return _lenet_loss_numpy(p, onp.asarray(inputs["X"], dtype=onp.float64), inputs["labels"])

    def numpy_step(self, inputs):
        W1, b1, W2, b2, W3, b3, W4, b4, W5, b5 = (inputs[n] for n in self.params)
        X, labels = inputs["X"], inputs["labels"]
        n = X.shape[0]
        rows = onp.arange(n)
        W1m, W2m = W1.reshape(6, -1), W2.reshape(16, -1)
        inv_n = onp.float32(1.0 / n)
        # Note [Hand-written LeNet layout]: inside the step, images are channels-first
        # (C, N, H, W), and im2col is the (C*5*5, N*OH*OW) matrix built by 25 slice copies
        # (one per kernel offset, all channels at once): the rows of contiguous memory make
        # the copies fast, and a convolution is one product W (F, C*25) @ cols.  Gathering
        # 5-wide windows of a channels-last array was 2-5x slower here.  The buffers are
        # allocated once, like a careful person would.
        padded = onp.zeros((1, n, 32, 32), onp.float32)
        cols1 = onp.empty((1, 25, n, 28, 28), onp.float32)
        cols2 = onp.empty((6, 25, n, 10, 10), onp.float32)
        offsets = [(k, k // 5, k % 5) for k in range(25)]
        # Note [Max-pool ties]: the backward pass routes a pooled gradient to every input
        # equal to the window's maximum.  Exact ties of positive values do not occur with
        # these random inputs; ties of zeros (relu's output) do, and their gradient is
        # removed by multiplying with (pooled > 0) first, which is relu's derivative there.

        def step():
            # forward
            padded[:, :, 2:30, 2:30] = X.transpose(1, 0, 2, 3)
            for k, i, j in offsets:
                cols1[:, k] = padded[:, :, i:i + 28, j:j + 28]
            c1 = cols1.reshape(25, -1)
            a1 = W1m @ c1                                     # (6, n*784)
            a1 += b1[:, None]
            onp.maximum(a1, 0, out=a1)
            r1 = a1.reshape(6, n, 14, 2, 14, 2)
            p1 = _max_pool_2x2(r1)                            # (6, n, 14, 14)
            for k, i, j in offsets:
                cols2[:, k] = p1[:, :, i:i + 10, j:j + 10]
            c2 = cols2.reshape(150, -1)
            a2 = W2m @ c2                                     # (16, n*100)
            a2 += b2[:, None]
            onp.maximum(a2, 0, out=a2)
            r2 = a2.reshape(16, n, 5, 2, 5, 2)
            p2 = _max_pool_2x2(r2)                            # (16, n, 5, 5)
            f = p2.transpose(1, 0, 2, 3).reshape(n, 400)      # flatten in (C, H, W) order
            h3 = f @ W3.T
            h3 += b3
            onp.maximum(h3, 0, out=h3)
            h4 = h3 @ W4.T
            h4 += b4
            onp.maximum(h4, 0, out=h4)
            z = h4 @ W5.T
            z += b5
            z -= z.max(axis=1, keepdims=True)
            onp.exp(z, out=z)
            s = z.sum(axis=1, keepdims=True)
            z /= s
            _ = -onp.log(z[rows, labels]).mean()  # the loss value
            # backward: d loss / d logits = (softmax - onehot) / n
            z[rows, labels] -= 1
            z *= inv_n
            dW5 = z.T @ h4
            db5 = z.sum(axis=0)
            d4 = z @ W5
            d4 *= h4 > 0
            dW4 = d4.T @ h3
            db4 = d4.sum(axis=0)
            d3 = d4 @ W4
            d3 *= h3 > 0
            dW3 = d3.T @ f
            db3 = d3.sum(axis=0)
            dp2 = (d3 @ W3).reshape(n, 16, 5, 5).transpose(1, 0, 2, 3)
            dp2 = dp2 * (p2 > 0)                              # Note [Max-pool ties]
            da2 = (r2 == p2[:, :, :, None, :, None]) * dp2[:, :, :, None, :, None]
            da2 = da2.reshape(16, -1)
            dW2 = (da2 @ c2.T).reshape(W2.shape)
            db2 = da2.sum(axis=1)
            dcols2 = (W2m.T @ da2).reshape(6, 25, n, 10, 10)
            dp1 = onp.zeros_like(p1)                          # col2im: 25 shifted adds
            for k, i, j in offsets:
                dp1[:, :, i:i + 10, j:j + 10] += dcols2[:, k]
            dp1 *= p1 > 0                                     # Note [Max-pool ties]
            da1 = (r1 == p1[:, :, :, None, :, None]) * dp1[:, :, :, None, :, None]
            da1 = da1.reshape(6, -1)
            dW1 = (da1 @ c1.T).reshape(W1.shape)
            db1 = da1.sum(axis=1)
            return (dW1, db1, dW2, db2, dW3, db3, dW4, db4, dW5, db5)

        return step

    def fastgrad_step(self, backend, inputs):
        fnp, npx, fg_autograd = backend.fnp, backend.npx, backend.autograd
        ps = [fnp.array(inputs[n]) for n in self.params]
        for p in ps:
            p.attach_grad()
        X, labels = fnp.array(inputs["X"]), fnp.array(inputs["labels"])

        def step():
            with fg_autograd.record():
                loss = _lenet_loss(npx, X, labels, ps)
            loss.backward()
            return tuple(p.grad for p in ps)

        step.arrays = ps
        return step

    def fastgrad_sgd_step(self, backend, inputs):
        return backend.sgd(self.fastgrad_step(backend, inputs))

    def gluon_fastgrad_step(self, backend, inputs):
        nn, fg = backend.nn, backend.fg
        net = nn.HybridSequential()
        net.add(nn.Conv2D(6, kernel_size=5, padding=2, in_channels=1, activation="relu"),
                nn.MaxPool2D(pool_size=2),
                nn.Conv2D(16, kernel_size=5, in_channels=6, activation="relu"),
                nn.MaxPool2D(pool_size=2),
                nn.Dense(120, activation="relu", in_units=400),
                nn.Dense(84, activation="relu", in_units=120),
                nn.Dense(10, in_units=84))
        X = fg.nd.array(inputs["X"], dtype=onp.float32)
        y = fg.nd.array(inputs["labels"], dtype=onp.float32)
        loss_fn = backend.gluon.loss.SoftmaxCrossEntropyLoss()
        weights = {n: inputs[n] for n in self.params}
        return backend.train_step(net, loss_fn, X, y, self.batch, weights)

    gluon_fastgrad_hybrid_step = gluon_fastgrad_step

    def torch_nn_step(self, backend, inputs):
        nn = backend.torch.nn
        model = nn.Sequential(
            nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
            nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))
        X, y = backend.tensor(inputs["X"]), backend.tensor(inputs["labels"])
        return backend.train_step(model, X, y, {n: inputs[n] for n in self.params})

    def fastgrad_exec_step(self, backend, inputs):
        sym = backend.sym
        v = {n: sym.var(n) for n in self.params + self.consts}
        h = sym.Convolution(v["X"], v["W1"], v["b1"], kernel=(5, 5), num_filter=6, pad=(2, 2))
        h = sym.Pooling(sym.relu(h), kernel=(2, 2), stride=(2, 2), pool_type="max")
        h = sym.Convolution(h, v["W2"], v["b2"], kernel=(5, 5), num_filter=16)
        h = sym.Pooling(sym.relu(h), kernel=(2, 2), stride=(2, 2), pool_type="max")
        h = sym.relu(sym.FullyConnected(h, v["W3"], v["b3"], num_hidden=120))
        h = sym.relu(sym.FullyConnected(h, v["W4"], v["b4"], num_hidden=84))
        z = sym.FullyConnected(h, v["W5"], v["b5"], num_hidden=10)
        loss = -sym.mean(sym.pick(sym.log_softmax(z, axis=-1), v["labels"]))
        return backend.bind_step(loss, inputs, self.params)

    def mxnet_step(self, backend, inputs):
        mx, npx = backend.mx, backend.npx
        ps = [backend.array(inputs[n]) for n in self.params]
        for p in ps:
            p.attach_grad()
        X, labels = backend.array(inputs["X"]), backend.array(inputs["labels"])

        def step():
            with mx.autograd.record():
                loss = _lenet_loss(npx, X, labels, ps)
            loss.backward()
            return tuple(p.grad for p in ps)

        return step

    def torch_step(self, backend, inputs):
        torch = backend.torch
        F = torch.nn.functional
        ps = [backend.tensor(inputs[n], requires_grad=True) for n in self.params]
        W1, b1, W2, b2, W3, b3, W4, b4, W5, b5 = ps
        X, labels = backend.tensor(inputs["X"]), backend.tensor(inputs["labels"])

        def step():
            h = F.max_pool2d(F.relu(F.conv2d(X, W1, b1, padding=2)), 2)
            h = F.max_pool2d(F.relu(F.conv2d(h, W2, b2)), 2)
            h = F.relu(F.linear(h.flatten(1), W3, b3))
            h = F.relu(F.linear(h, W4, b4))
            loss = F.cross_entropy(F.linear(h, W5, b5), labels)
            return torch.autograd.grad(loss, ps)

        return step

    def _jax_loss(self, backend):
        jax, jnp = backend.jax, backend.jnp
        lax = jax.lax

        def conv(x, w, b, pad):
            y = lax.conv_general_dilated(x, w, (1, 1), ((pad, pad), (pad, pad)),
                                         dimension_numbers=("NCHW", "OIHW", "NCHW"))
            return y + b[None, :, None, None]

        def pool(x):
            return lax.reduce_window(x, -jnp.inf, lax.max, (1, 1, 2, 2), (1, 1, 2, 2), "VALID")

        def loss(ps, X, labels):
            W1, b1, W2, b2, W3, b3, W4, b4, W5, b5 = ps
            h = pool(jax.nn.relu(conv(X, W1, b1, 2)))
            h = pool(jax.nn.relu(conv(h, W2, b2, 0)))
            h = jax.nn.relu(h.reshape(h.shape[0], -1) @ W3.T + b3)
            h = jax.nn.relu(h @ W4.T + b4)
            logp = jax.nn.log_softmax(h @ W5.T + b5, axis=-1)
            return -jnp.take_along_axis(logp, labels[:, None], axis=1).mean()

        return loss

    def jax_step(self, backend, inputs, jit=False):
        grad_fn = backend.jax.grad(self._jax_loss(backend))
        if jit:
            grad_fn = backend.jax.jit(grad_fn)
        ps = tuple(backend.array(inputs[n]) for n in self.params)
        X, labels = backend.array(inputs["X"]), backend.array(inputs["labels"])
        return lambda: tuple(grad_fn(ps, X, labels))

    def jax_jit_step(self, backend, inputs):
        return self.jax_step(backend, inputs, jit=True)

    def autograd_step(self, backend, inputs):
        # HIPS autograd has no convolution or pooling op: written as users of its
        # examples/convnet.py do, with autograd.scipy.signal.convolve (which flips the kernel)
        # and pooling by reshaping.
        anp = backend.anp
        from autograd.scipy.signal import convolve

        def conv(x, w, b, pad):
            if pad:
                x = anp.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
            y = convolve(x, w[:, :, ::-1, ::-1], axes=([2, 3], [2, 3]), dot_axes=([1], [1]),
                         mode="valid")                     # (N, F, OH, OW)
            return y + b[None, :, None, None]

        def pool(x):
            n, c, hh, ww = x.shape
            return anp.max(anp.reshape(x, (n, c, hh // 2, 2, ww // 2, 2)), axis=(3, 5))

        def loss(ps, X, labels):
            W1, b1, W2, b2, W3, b3, W4, b4, W5, b5 = ps
            relu = backend.ops.relu
            h = pool(relu(conv(X, W1, b1, 2)))
            h = pool(relu(conv(h, W2, b2, 0)))
            h = relu(anp.dot(anp.reshape(h, (h.shape[0], -1)), W3.T) + b3)
            h = relu(anp.dot(h, W4.T) + b4)
            logp = backend.ops.log_softmax(anp.dot(h, W5.T) + b5)
            return -anp.mean(logp[onp.arange(len(labels)), labels])

        grad_fn = backend.autograd.grad(loss)
        ps = [onp.array(inputs[n], copy=True) for n in self.params]
        X, labels = onp.array(inputs["X"], copy=True), inputs["labels"]
        return lambda: tuple(grad_fn(ps, X, labels))


class LSTMStep(Workload):
    """An LSTM written by hand: 35 steps, batch 32, input 64, hidden 128, float32.

    ``gates = x_t @ Wx + h @ Wh + b``, split into ``i, f, g, o``; ``c = sigmoid(f) * c +
    sigmoid(i) * tanh(g)``; ``h = sigmoid(o) * tanh(c)``, from ``h = c = 0``; loss ``sum(h**2)``
    of the last ``h``; gradients of ``Wx``, ``Wh``, ``b``.  Measures a recurrent training
    step: a long graph of mid-sized matrix products and elementwise ops.
    """

    key, slug = "9", "lstm_step"
    params = ("Wx", "Wh", "b")
    consts = ("xs", "h0", "c0")
    rtol = 1e-4
    steps = 35
    batch, n_in, hidden = 32, 64, 128
    optional_backends = ("fastgrad-exec", "jax-jit")
    quick_overrides = {"steps": 8}

    @property
    def title(self):
        return (f"LSTM {self.steps} steps, batch {self.batch}, {self.n_in}->{self.hidden}, f32")

    def make_inputs(self):
        rng = onp.random.default_rng(self.seed + 9)
        f32, H = onp.float32, self.hidden
        return {
            "Wx": (rng.standard_normal((self.n_in, 4 * H)) / onp.sqrt(self.n_in)).astype(f32),
            "Wh": (rng.standard_normal((H, 4 * H)) / onp.sqrt(H)).astype(f32),
            "b": (0.1 * rng.standard_normal(4 * H)).astype(f32),
            "xs": rng.standard_normal((self.steps, self.batch, self.n_in)).astype(f32),
            "h0": onp.zeros((self.batch, H), f32),
            "c0": onp.zeros((self.batch, H), f32),
        }

    def loss(self, ops, Wx, Wh, b, xs, h0, c0):
        h, c = h0, c0
        for t in range(xs.shape[0]):
            gates = xs[t] @ Wx + h @ Wh + b
            i, f, g, o = ops.split(gates, 4)
            c = ops.sigmoid(f) * c + ops.sigmoid(i) * ops.tanh(g)
            h = ops.sigmoid(o) * ops.tanh(c)
        return ops.sum(h * h)

    def numpy_step(self, inputs):
        Wx, Wh, b, xs, h0, c0 = (inputs[n] for n in self.params + self.consts)
        T, N, H = xs.shape[0], xs.shape[1], self.hidden
        WhT = Wh.T.copy()
        xs2 = xs.reshape(T * N, -1)

        def step():
            # all input projections in one product; acts[t] holds sigmoid(i, f), tanh(g),
            # sigmoid(o) after step t
            acts = (xs2 @ Wx).reshape(T, N, 4 * H)
            acts += b
            hs = onp.empty((T + 1, N, H), onp.float32)
            cs = onp.empty((T + 1, N, H), onp.float32)
            tcs = onp.empty((T, N, H), onp.float32)
            hs[0], cs[0] = h0, c0
            for t in range(T):
                a = acts[t]
                a += hs[t] @ Wh
                a[:, 2 * H:3 * H] = onp.tanh(a[:, 2 * H:3 * H])
                for sl in (slice(0, 2 * H), slice(3 * H, 4 * H)):  # sigmoid = (tanh(x/2)+1)/2
                    s = a[:, sl]
                    s *= 0.5
                    onp.tanh(s, out=s)
                    s += 1
                    s *= 0.5
                i, f, g, o = a[:, :H], a[:, H:2 * H], a[:, 2 * H:3 * H], a[:, 3 * H:]
                onp.multiply(f, cs[t], out=cs[t + 1])
                cs[t + 1] += i * g
                onp.tanh(cs[t + 1], out=tcs[t])
                onp.multiply(o, tcs[t], out=hs[t + 1])
            _ = float(onp.sum(hs[T] * hs[T]))  # the loss value
            # backward; dgates[t] = d loss / d (pre-activation gates of step t)
            dgates = onp.empty_like(acts)
            dh = 2 * hs[T]
            dc = onp.zeros((N, H), onp.float32)
            for t in range(T - 1, -1, -1):
                a, tc, d = acts[t], tcs[t], dgates[t]
                i, f, g, o = a[:, :H], a[:, H:2 * H], a[:, 2 * H:3 * H], a[:, 3 * H:]
                dc += dh * o * (1 - tc * tc)
                onp.multiply(dh, tc, out=d[:, 3 * H:])          # d o
                onp.multiply(dc, g, out=d[:, :H])               # d i
                onp.multiply(dc, cs[t], out=d[:, H:2 * H])      # d f
                onp.multiply(dc, i, out=d[:, 2 * H:3 * H])      # d g
                d[:, 2 * H:3 * H] *= 1 - g * g
                for sl in (slice(0, 2 * H), slice(3 * H, 4 * H)):
                    s = a[:, sl]
                    d[:, sl] *= s * (1 - s)
                dc *= f
                dh = d @ WhT
            dg2 = dgates.reshape(T * N, 4 * H)
            dWx = xs2.T @ dg2
            dWh = hs[:-1].reshape(T * N, H).T @ dg2
            db = dg2.sum(axis=0)
            return (dWx, dWh, db)

        return step

    def fastgrad_exec_step(self, backend, inputs):
        sym = backend.sym
        Wx, Wh, b = sym.var("Wx"), sym.var("Wh"), sym.var("b")
        h, c = sym.var("h0"), sym.var("c0")
        values = {n: inputs[n] for n in ("Wx", "Wh", "b", "h0", "c0")}
        for t in range(inputs["xs"].shape[0]):
            values[f"x{t}"] = inputs["xs"][t]
            gates = sym.matmul(sym.var(f"x{t}"), Wx) + sym.matmul(h, Wh) + b
            parts = sym.split(gates, num_outputs=4, axis=-1)
            i, f, g, o = (parts[k] for k in range(4))
            c = sym.sigmoid(f) * c + sym.sigmoid(i) * sym.tanh(g)
            h = sym.sigmoid(o) * sym.tanh(c)
        return backend.bind_step(sym.sum(h * h), values, self.params)


#: All workloads, in command-line order.
WORKLOADS: list[Workload] = [
    OpChain(),
    MLPStep(),
    LargeElementwise(),
    LongChain(),
    FourthDerivative(),
    Broadcasting(),
    RecurrentTanh(),
    LeNetStep(),
    LSTMStep(),
]


def get_workload(key: str) -> Workload:
    """Return the workload whose :attr:`Workload.key` or slug is ``key``."""
    for w in WORKLOADS:
        if key in (w.key, w.slug):
            return w
    raise ValueError(f"unknown workload {key!r}; choose from {[w.key for w in WORKLOADS]}")
