"""Docstrings and signatures of the ops, written from the derivative table.

``help(fastgrad.np.sin)`` and ``inspect.signature(fastgrad.np.sin)`` ask the ``sin`` primitive,
which asks :func:`describe` (Note [Docstrings of primitives] in _array_recording.pxi). The
text is made from what fastgrad knows about the op, so it cannot disagree with it: the inputs and
parameters of the table's signature, NumPy's own summary and descriptions of those parameters
(for ops NumPy has), the derivative formula of each input and how often it can be
differentiated. NumPy parameters fastgrad does not take (``out=``, ``where=``...) are listed as
such; passing one raises a ``TypeError`` naming it and the op.
"""

import functools
import importlib
import inspect
import re

import numpy as _np

from fastgrad._ops import _derivatives, _registry
from fastgrad._core._array import REQUIRED, _NUMPY_ONLY

_TABLE = {op.name: op for op in _derivatives.TABLE}
_SECTION = re.compile(r"^(\w[\w ]*)\n-{3,}\n", re.M)
_ROLE = re.compile(r":(?:math|ref|func|class|meth|attr|obj|data|mod|doc):"
                   r"`~?([^`<]*?)(?:\s*<[^>]*>)?`")


# What the ops NumPy does not have compute (NumPy's own summary serves for the others, NumPy's
# linalg's for the matrix ops, the kernel's docstring for the internal adjoints).
SUMMARIES = {
    "rsqrt": "``1 / sqrt(x)``, elementwise.",
    "rcbrt": "``1 / cbrt(x)``, elementwise.",
    "erf": "The error function, elementwise.",
    "erfinv": "The inverse of the error function, elementwise.",
    "relu": "``max(x, 0)``, elementwise.",
    "sigmoid": "The logistic function ``1 / (1 + exp(-x))``, elementwise.",
    "leaky_relu": "``x`` where positive, ``slope * x`` elsewhere.",
    "prelu": "``x`` where positive, ``gamma * x`` elsewhere, with a learned ``gamma``.",
    "elu": "``x`` where positive, ``slope * (exp(x) - 1)`` elsewhere.",
    "selu": "The scaled exponential linear unit, elementwise.",
    "gelu": "``x * Phi(x)``, with ``Phi`` the standard normal distribution function.",
    "gelu_tanh": "The tanh approximation of ``x * Phi(x)``.",
    "softplus": "``log(1 + exp(x))``, computed without overflow.",
    "log_sigmoid": "``log(sigmoid(x))``, computed without overflow.",
    "softsign": "``x / (1 + abs(x))``, elementwise.",
    "silu": "``x * sigmoid(x)`` (swish), elementwise.",
    "hard_sigmoid": "``clip(alpha * x + beta, 0, 1)``, elementwise.",
    "smooth_l1": "The smooth L1 (Huber-like) function with threshold ``1 / scalar**2``.",
    "softmax": "``exp(x) / sum(exp(x))`` along ``axis``, computed stably.",
    "log_softmax": "``x - logsumexp(x)`` along ``axis``, computed stably.",
    "logsumexp": "``log(sum(exp(x)))`` over ``axis``, computed stably.",
    "getitem": "``x[key]``: NumPy's basic and advanced indexing.",
    "einsum2": "``einsum`` of two operands (the op ``np.einsum`` splits into).",
    "conv2d": "2-D convolution (cross-correlation) of NCHW data with OIHW weights.",
    "max_pool2d": "2-D max pooling of NCHW data.",
    "avg_pool2d": "2-D average pooling of NCHW data.",
    "im2col": "The receptive fields of NCHW data as the columns of a (C*KH*KW, N*OH*OW) "
              "matrix.",
    "col2im": "The adjoint of ``im2col``: every column added back onto its receptive field.",
    "conv2d_product": "(F, C*KH*KW) weights times ``im2col``'s columns.",
    "conv2d_product_bias": "``conv2d_product`` plus a (F,) bias on every row.",
    "convolve_full": "The full discrete linear convolution of two 1-D arrays.",
    "convolve_valid": "The discrete linear convolution of two 1-D arrays where they overlap "
                      "completely.",
    "fftn_c2c": "The n-dimensional complex-to-complex FFT over ``axes`` (forward or inverse).",
}


def describe(prim, what):
    """``prim``'s docstring (``what == "doc"``) or ``inspect.Signature`` (``"signature"``)."""
    return (_doc if what == "doc" else _signature)(prim.name)


def _inputs(name):
    op = _TABLE.get(name)
    if op is None:
        return None, False
    names, variadic, _, _ = _registry._parse_signature(op)
    return names, variadic


@functools.lru_cache(maxsize=None)
def _signature(name):
    prim = _registry.REGISTRY[name]
    names, variadic = _inputs(name)
    positional = inspect.Parameter.POSITIONAL_ONLY
    if names is None:   # an op registered outside the table: its counts are all there is
        names = ["arrays"] if prim.n_in < 0 else ["x%d" % i for i in range(prim.n_in)]
        variadic = prim.n_in < 0
    params = [inspect.Parameter("arrays" if variadic else n, positional) for n in names]
    for pname, default in zip(prim.param_names, prim.param_defaults):
        params.append(inspect.Parameter(
            pname, inspect.Parameter.POSITIONAL_OR_KEYWORD,
            default=inspect.Parameter.empty if default is REQUIRED else default))
    return inspect.Signature(params)


# Where the function an op follows is documented, in order. SciPy's are read only when SciPy is
# installed, and imported only when a docstring is first asked for.
REFERENCE_MODULES = ("numpy", "numpy.linalg", "numpy.fft", "scipy.special", "scipy.linalg")


def _numpy_reference(name):
    """The NumPy (or SciPy) function the op follows, and its dotted name; ``(None, None)``."""
    op = _TABLE.get(name)
    if op is not None and op.ufunc is not None:
        return op.ufunc, "numpy." + op.ufunc.__name__
    for modname in REFERENCE_MODULES:
        try:
            module = importlib.import_module(modname)
        except ImportError:
            continue
        ref = getattr(module, name, None)
        if callable(ref) and not isinstance(ref, type):
            return ref, "%s.%s" % (modname, name)
    return None, None


def _sections(doc):
    """NumPy docstring -> (summary paragraph, {section title: body})."""
    doc = inspect.cleandoc(doc or "")
    matches = list(_SECTION.finditer(doc))
    head = doc[:matches[0].start()] if matches else doc
    paragraphs = [p for p in head.split("\n\n") if p.strip()]
    # A ufunc's docstring starts with its call signature; the summary is the next paragraph.
    if paragraphs and re.match(r"^\w+\(.*\)\s*$", paragraphs[0].strip(), re.S):
        paragraphs = paragraphs[1:]
    summary = " ".join(paragraphs[0].split()) if paragraphs else ""
    bodies = {}
    for m, nxt in zip(matches, matches[1:] + [None]):
        bodies[m.group(1)] = doc[m.end():nxt.start() if nxt else len(doc)]
    return _ROLE.sub(r"\1", summary), bodies


def _parameter_entries(body):
    """A NumPy ``Parameters`` section -> [(names, type, description lines)]."""
    entries = []
    for line in body.splitlines():
        if line and not line[0].isspace():
            head, _, kind = line.partition(" : ")
            names = [n.strip() for n in head.split(",") if n.strip()]
            entries.append((names, kind.strip(), []))
        elif entries and line.strip():
            entries[-1][2].append(_ROLE.sub(r"\1", line.strip()))
    return entries


def _renamed(text, numpy_inputs, sig):
    """NumPy's input names (``x1``, ``x2``) in a description, as fastgrad calls them."""
    ours = [p.name for p in sig.parameters.values()
            if p.kind is inspect.Parameter.POSITIONAL_ONLY]
    for theirs, mine in zip(numpy_inputs, ours):
        # Only numbered names (x1, x2): renaming NumPy's ``a`` would rewrite every article.
        if theirs != mine and re.search(r"\d", theirs):
            text = re.sub(r"\b%s\b" % re.escape(theirs), mine, text)
    return text


def _order_text(prim):
    if not prim.differentiable:
        return "Not differentiable: its result is never recorded."
    if prim.order < 0:
        return ("Differentiable to any order: the rule is itself built from fastgrad's ops, so "
                "it is recorded under ``create_graph=True``.")
    return "Differentiable to order %d." % prim.order


@functools.lru_cache(maxsize=None)
def _doc(name):
    prim = _registry.REGISTRY[name]
    op = _TABLE.get(name)
    sig = _signature(name)
    ref, ref_name = _numpy_reference(name)
    summary, bodies = _sections(getattr(ref, "__doc__", "") if ref is not None else "")
    kernel = inspect.getdoc(op.forward) if op is not None else None
    summary = (_renamed(summary, ["x1", "x2"], sig) or SUMMARIES.get(name)
               or (kernel.split("\n\n")[0] if kernel else "")
               or "The ``%s`` op of fastgrad's derivative table." % name)
    lines = [summary, ""]
    if ref is not None:
        lines += ["As ``%s``, on fastgrad arrays, NumPy arrays and Python numbers; "
                  "recorded inside ``autograd.record()`` when an input needs a gradient."
                  % ref_name, ""]

    numpys = _parameter_entries(bodies.get("Parameters", ""))
    by_name = {n: (kind, text) for names, kind, text in numpys for n in names}
    numpy_inputs = [n for names, _, _ in numpys for n in names
                    if n not in _NUMPY_ONLY and not n.startswith("*")]
    lines += ["Parameters", "----------"]
    for i, param in enumerate(sig.parameters.values()):
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            source = numpy_inputs[i] if i < len(numpy_inputs) else None
            kind, text = by_name.get(source, ("array_like", []))
            if param.name == "arrays":
                kind, text = "sequence of array_like", text
        else:
            kind, text = by_name.get(param.name, ("", []))
            default = param.default
            kind = ", ".join(k for k in (kind, "" if default is param.empty
                                         else "default %r" % (default,)) if k)
        lines.append("%s : %s" % (param.name, kind) if kind else param.name)
        lines += ["    " + _renamed(t, numpy_inputs, sig) for t in text]
    unsupported = sorted(n for n in _NUMPY_ONLY if n not in prim.param_names and (
        n in by_name or isinstance(ref, _np.ufunc)))
    lines += ["", "Returns", "-------",
              "ndarray" if prim.n_out == 1 else "tuple of %d ndarrays" % prim.n_out,
              "    fastgrad array%s, with the history of the inputs that need a gradient."
              % ("" if prim.n_out == 1 else "s"), ""]

    lines += ["Derivative", "----------"]
    if op is not None and prim.differentiable:
        names, variadic = _inputs(name)
        for n in names:
            rule = op.rules.get(n)
            if rule == _derivatives.NONDIFF:
                lines.append("    %s: not differentiable" % n)
            elif rule is None:
                lines.append("    %s: no rule (recording it with a variable raises)" % n)
            else:
                lines.append("    d/d%s: %s" % ("(each array, %s)" % n if variadic else n,
                                                " ".join(rule.split())))
        lines.append("    (``g`` is the gradient of the result, ``result`` the result.)")
    lines += ["    " + _order_text(prim), ""]
    if unsupported:
        lines += ["Notes", "-----",
                  "NumPy's %s are not supported: passing one raises ``TypeError`` naming it."
                  % ", ".join("``%s=``" % n for n in unsupported)]
    return "\n".join(lines).rstrip() + "\n"
