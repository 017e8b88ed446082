"""MXNet's fused optimizer update ops (``nd.sgd_update``, ``npx.adam_update``, ...).

Note [Fused updates]
~~~~~~~~~~~~~~~~~~~~
An update op reads a weight, its gradient and the optimizer's state arrays and writes the new
weight and state in place, as MXNet's ``*_update`` operators do: the state arrays (``mom``,
``mean``, ``var``, ``n``, ``z``, ...) are always updated in place, and the new weight goes to
``out`` (``out=weight`` is the usual call; without ``out`` a new array is returned and the
weight is left alone). The ops are never recorded: they run with recording switched off, read
and write the arrays' NumPy buffers, and return no history.

They allocate nothing per step. NumPy cannot fuse an expression into one loop, so the
intermediate terms go to scratch buffers owned by the calling thread (``_scratch``), grown to
the largest weight seen and reused for every later call; every arithmetic step is a ufunc with
``out=`` whose inputs and output have one dtype. A ufunc that must cast (``greater`` into a
float array, a float times a bool mask) runs through NumPy's buffered iterator, which allocates
a cast buffer per call: 8192 elements on NumPy 2.0 (74 KB for ``ftrl_update``'s mask), less on
later versions; ``tests/optimizer/test_optimizer.py`` counts the bytes on both.

After writing, each array that changed is marked written (``_touch``), which bumps
its version (Note [Versions] in ``_array_versions.pxi``) so that a graph recorded before the
update and differentiated after it raises instead of using the new values. ``a[...] = a`` does the
marking for free: NumPy skips a copy of a buffer onto itself.

Hyper-parameters (``lr``, ``wd``, ``beta1``, ...) are rounded to float32 before use, because
MXNet's operators declare them float32 (``beta2=0.999`` is 0.999000013 there): with it the
updates agree with MXNet's to rounding in float64 too.

Gradient preprocessing is MXNet's: ``rescale_grad * grad``, then clipping to
``[-clip_gradient, clip_gradient]`` when ``clip_gradient > 0``. Where MXNet's kernels add the
weight decay before clipping (``adam_update``, ``rmsprop_update``, ...) or after, so do these;
``tests/optimizer/test_optimizer_mxnet.py`` checks every op against numbers from MXNet 1.9.1.
"""

import threading

import numpy as _onp

from fastgrad._core._array import ndarray, unwrap, _wrap
from fastgrad._core._state import set_recording

__all__ = ["sgd_update", "sgd_mom_update", "nag_mom_update", "adam_update", "adamw_update",
           "rmsprop_update", "rmspropalex_update", "signsgd_update", "signum_update",
           "lamb_update_phase1", "lamb_update_phase2", "ftrl_update"]

_local = threading.local()


def _scratch(slot, like):
    """A scratch array shaped and typed like ``like``, owned by this thread (Note [Fused updates]).

    ``slot`` tells apart the buffers one op needs at the same time.
    """
    buffers = getattr(_local, "buffers", None)
    if buffers is None:
        buffers = _local.buffers = {}
    key = (slot, like.dtype)
    buf = buffers.get(key)
    if buf is None or buf.size < like.size:
        buf = buffers[key] = _onp.empty(max(like.size, 1), like.dtype)
    return buf[:like.size].reshape(like.shape)


def _touch(a):
    """Mark ``a``'s memory written (its version goes up) without copying anything."""
    a[...] = unwrap(a)


def _array_arg(op, name, a):
    if not isinstance(a, ndarray):
        raise TypeError("%s: %s must be a fastgrad array, got %s" % (op, name, type(a).__name__))
    data = unwrap(a)
    if data.dtype.kind != "f":          # issubdtype(dtype, floating), without its ~1 us
        raise TypeError("%s: %s must have a floating-point dtype, got %s" % (op, name, data.dtype))
    return data


def _check_like(op, weight, name, a):
    data = _array_arg(op, name, a)
    if data.shape != weight.shape or data.dtype != weight.dtype:
        raise ValueError("%s: %s has shape %s and dtype %s; the weight has shape %s and dtype %s"
                         % (op, name, data.shape, data.dtype, weight.shape, weight.dtype))
    return data


def _scalar(op, name, value, exact=False):
    """A hyper-parameter as MXNet's kernels see it: rounded to float32 (Note [Fused updates]),
    unless ``exact`` (values MXNet takes as arrays of the weight's dtype)."""
    if isinstance(value, ndarray):
        if value.size != 1:
            raise ValueError("%s: %s must be a scalar or a 1-element array, got shape %s"
                             % (op, name, value.shape))
        value = unwrap(value).reshape(())
    try:
        return float(value) if exact else float(_onp.float32(value))
    except (TypeError, ValueError):
        raise TypeError("%s: %s must be a number, got %r" % (op, name, value)) from None


def _output(op, weight, out):
    """The array the new weight goes to and its buffer: ``out``, or a new array."""
    w = unwrap(weight)
    if out is None:
        new = _wrap(_onp.array(w), type(weight))
        return new, unwrap(new)
    o = _check_like(op, w, "out", out)
    if o is not w and _onp.shares_memory(o, w):
        raise ValueError("%s: out overlaps the weight without being it" % op)
    return out, o


def _grad(op, weight, grad, rescale_grad, clip_gradient, slot=0, wd=0.0):
    """``clip(rescale_grad * grad + wd * weight)`` in a scratch buffer (wd before clipping)."""
    g = _scratch(slot, unwrap(weight))
    _onp.multiply(unwrap(grad), _scalar(op, "rescale_grad", rescale_grad), out=g)
    if wd:
        _axpy(g, wd, unwrap(weight), slot)
    clip = _scalar(op, "clip_gradient", clip_gradient)
    if clip > 0:
        _onp.clip(g, -clip, clip, out=g)
    return g


def _axpy(y, a, x, slot):
    """``y += a * x`` through the scratch buffer after ``slot``."""
    t = _scratch(slot + 1, x)
    _onp.multiply(x, a, out=t)
    _onp.add(y, t, out=y)


def _run(op, body, weight, grad, states, out):
    w = _array_arg(op, "weight", weight)
    if grad is not None:
        _check_like(op, w, "grad", grad)
    for name, s in states:
        _check_like(op, w, name, s)
    target, o = _output(op, weight, out)
    prev = set_recording(False)
    try:
        body(w, o)
        for _, s in states:
            _touch(s)
        _touch(target)
    finally:
        set_recording(prev)
    return target


def sgd_update(weight, grad, lr, wd=0.0, rescale_grad=1.0, clip_gradient=-1.0,
               lazy_update=True, out=None, name=None):
    """SGD: ``weight = (1 - lr * wd) * weight - lr * clip(rescale_grad * grad)``.

    Examples
    --------
    >>> import fastgrad as mx
    >>> w = mx.nd.array([1.0, 2.0]); g = mx.nd.array([0.5, -0.5])
    >>> _ = mx.nd.sgd_update(w, g, lr=0.1, out=w)
    >>> w
    <BLANKLINE>
    [0.95 2.05]
    <NDArray 2 @cpu(0)>
    """
    lr, wd = _scalar("sgd_update", "lr", lr), _scalar("sgd_update", "wd", wd)

    decay = 1.0 - lr * wd

    def body(w, o):
        g = _grad("sgd_update", weight, grad, rescale_grad, clip_gradient)
        g *= lr
        if decay != 1.0 or o is not w:     # w * 1.0 is w: no pass over the weight without wd
            _onp.multiply(w, decay, out=o)
        _onp.subtract(o, g, out=o)
    return _run("sgd_update", body, weight, grad, (), out)


def sgd_mom_update(weight, grad, mom, lr, momentum=0.0, wd=0.0, rescale_grad=1.0,
                   clip_gradient=-1.0, lazy_update=True, out=None, name=None):
    """SGD with momentum: ``mom = momentum * mom - lr * wd * weight - lr * clip(rescale_grad *
    grad)``; ``weight = weight + mom`` (``mom`` is updated in place)."""
    op = "sgd_mom_update"
    lr, wd, momentum = _scalar(op, "lr", lr), _scalar(op, "wd", wd), _scalar(op, "momentum",
                                                                             momentum)
    m = unwrap(mom)

    def body(w, o):
        nonlocal m
        g = _grad(op, weight, grad, rescale_grad, clip_gradient)
        g *= lr
        m *= momentum
        m -= g
        if wd:
            _axpy(m, -lr * wd, w, 0)
        _onp.add(w, m, out=o)
    return _run(op, body, weight, grad, (("mom", mom),), out)


def nag_mom_update(weight, grad, mom, lr, momentum=0.0, wd=0.0, rescale_grad=1.0,
                   clip_gradient=-1.0, out=None, name=None):
    """Nesterov momentum (MXNet's kernel): with ``d = clip(rescale_grad * grad) + wd * weight``,
    ``weight = weight + momentum * (momentum * mom - lr * d) - lr * d`` and
    ``mom = momentum * mom - lr * (clip(rescale_grad * grad) + wd * w)``.

    Note [NAG's momentum]: MXNet's kernel writes the new weight before it updates ``mom``, so
    with ``out=weight`` (how the NAG optimizer calls it) the ``w`` in ``mom``'s weight-decay
    term is the *updated* weight, and with another ``out`` the old one. This op does the same,
    so the optimizer's trajectory is MXNet's step for step.
    """
    op = "nag_mom_update"
    lr, wd, momentum = _scalar(op, "lr", lr), _scalar(op, "wd", wd), _scalar(op, "momentum",
                                                                             momentum)
    m = unwrap(mom)

    def body(w, o):
        g = _grad(op, weight, grad, rescale_grad, clip_gradient)
        d = _scratch(1, w)
        _onp.multiply(w, wd, out=d)
        d += g                                 # d = g + wd * w (old weight)
        t = _scratch(2, w)
        _onp.multiply(m, momentum, out=t)
        _axpy(t, -lr, d, 2)                    # t = momentum * mom - lr * d
        t *= momentum
        _axpy(t, -lr, d, 2)                    # t = momentum * t - lr * d
        same = o is w
        _onp.add(w, t, out=o)
        if wd:
            _onp.multiply(o if same else w, wd, out=d)
            d += g
        else:
            d[...] = g
        _onp.multiply(m, momentum, out=m)
        _axpy(m, -lr, d, 2)
    return _run(op, body, weight, grad, (("mom", mom),), out)


def _moments(mean, var, g, beta1, beta2, slot):
    """``mean = beta1 * mean + (1 - beta1) * g``; ``var = beta2 * var + (1 - beta2) * g**2``."""
    mean *= beta1
    _axpy(mean, 1.0 - beta1, g, slot)
    t = _scratch(slot + 1, g)
    _onp.multiply(g, g, out=t)
    t *= 1.0 - beta2
    var *= beta2
    var += t


def adam_update(weight, grad, mean, var, lr, beta1=0.9, beta2=0.999, epsilon=1e-8, wd=0.0,
                rescale_grad=1.0, clip_gradient=-1.0, lazy_update=True, out=None, name=None):
    """Adam: ``g = clip(rescale_grad * grad + wd * weight)``; ``mean = beta1 * mean + (1 - beta1)
    * g``; ``var = beta2 * var + (1 - beta2) * g**2``;
    ``weight = weight - lr * mean / (sqrt(var) + epsilon)``.

    ``lr`` is used as given: the ``Adam`` optimizer folds the bias correction into it.
    """
    op = "adam_update"
    lr, wd = _scalar(op, "lr", lr), _scalar(op, "wd", wd)
    beta1, beta2, epsilon = (_scalar(op, "beta1", beta1), _scalar(op, "beta2", beta2),
                             _scalar(op, "epsilon", epsilon))
    m, v = unwrap(mean), unwrap(var)

    def body(w, o):
        g = _grad(op, weight, grad, rescale_grad, clip_gradient, wd=wd)
        _moments(m, v, g, beta1, beta2, 0)
        _onp.sqrt(v, out=g)
        g += epsilon
        _onp.divide(m, g, out=g)
        g *= lr
        _onp.subtract(w, g, out=o)
    return _run(op, body, weight, grad, (("mean", mean), ("var", var)), out)


def adamw_update(weight, grad, mean, var, rescale_grad, lr, eta, beta1=0.9, beta2=0.999,
                 epsilon=1e-8, wd=0.0, clip_gradient=-1.0, out=None, name=None):
    """AdamW (decoupled weight decay): ``g = clip(rescale_grad * grad)``; moments as Adam;
    ``weight = weight - eta * (lr * mean / (sqrt(var) + epsilon) + wd * weight)``.

    As in MXNet, ``rescale_grad`` may be a 1-element array, and a ``rescale_grad`` that is 0,
    infinite or NaN skips the update (the loss-scaling convention); ``eta`` is the schedule
    multiplier.
    """
    op = "adamw_update"
    scale = _scalar(op, "rescale_grad", rescale_grad)
    lr, eta, wd = _scalar(op, "lr", lr), _scalar(op, "eta", eta), _scalar(op, "wd", wd)
    beta1, beta2, epsilon = (_scalar(op, "beta1", beta1), _scalar(op, "beta2", beta2),
                             _scalar(op, "epsilon", epsilon))
    m, v = unwrap(mean), unwrap(var)

    def body(w, o):
        if scale == 0 or not _onp.isfinite(scale):
            if o is not w:
                o[...] = w
            return
        g = _grad(op, weight, grad, scale, clip_gradient)
        _moments(m, v, g, beta1, beta2, 0)
        _onp.sqrt(v, out=g)
        g += epsilon
        _onp.divide(m, g, out=g)
        g *= lr
        if wd:
            _axpy(g, wd, w, 0)
        g *= eta
        _onp.subtract(w, g, out=o)
    return _run(op, body, weight, grad, (("mean", mean), ("var", var)), out)


def _clip_weights(op, o, clip_weights):
    c = _scalar(op, "clip_weights", clip_weights)
    if c > 0:
        _onp.clip(o, -c, c, out=o)


def rmsprop_update(weight, grad, n, lr, gamma1=0.95, epsilon=1e-8, wd=0.0, rescale_grad=1.0,
                   clip_gradient=-1.0, clip_weights=-1.0, out=None, name=None):
    """RMSProp (Tieleman & Hinton): ``g = clip(rescale_grad * grad + wd * weight)``;
    ``n = (1 - gamma1) * g**2 + gamma1 * n``; ``weight = weight - lr * g / sqrt(n + epsilon)``,
    then clipped to ``[-clip_weights, clip_weights]`` when ``clip_weights > 0``."""
    op = "rmsprop_update"
    lr, wd = _scalar(op, "lr", lr), _scalar(op, "wd", wd)
    gamma1, epsilon = _scalar(op, "gamma1", gamma1), _scalar(op, "epsilon", epsilon)
    nn = unwrap(n)

    def body(w, o):
        nonlocal nn
        g = _grad(op, weight, grad, rescale_grad, clip_gradient, wd=wd)
        t = _scratch(1, w)
        _onp.multiply(g, g, out=t)
        t *= 1.0 - gamma1
        nn *= gamma1
        nn += t
        _onp.add(nn, epsilon, out=t)
        _onp.sqrt(t, out=t)
        _onp.divide(g, t, out=g)
        g *= lr
        _onp.subtract(w, g, out=o)
        _clip_weights(op, o, clip_weights)
    return _run(op, body, weight, grad, (("n", n),), out)


def rmspropalex_update(weight, grad, n, g, delta, lr, gamma1=0.95, gamma2=0.9, epsilon=1e-8,
                       wd=0.0, rescale_grad=1.0, clip_gradient=-1.0, clip_weights=-1.0,
                       out=None, name=None):
    """Centered RMSProp (Graves): with ``r = clip(rescale_grad * grad + wd * weight)``,
    ``n = (1 - gamma1) * r**2 + gamma1 * n``; ``g = (1 - gamma1) * r + gamma1 * g``;
    ``delta = gamma2 * delta - lr * r / sqrt(n - g**2 + epsilon)``; ``weight += delta``."""
    op = "rmspropalex_update"
    lr, wd = _scalar(op, "lr", lr), _scalar(op, "wd", wd)
    gamma1, gamma2 = _scalar(op, "gamma1", gamma1), _scalar(op, "gamma2", gamma2)
    epsilon = _scalar(op, "epsilon", epsilon)
    nn, gg, dd = unwrap(n), unwrap(g), unwrap(delta)

    def body(w, o):
        nonlocal dd, gg, nn
        r = _grad(op, weight, grad, rescale_grad, clip_gradient, wd=wd)
        t = _scratch(1, w)
        _onp.multiply(r, r, out=t)
        t *= 1.0 - gamma1
        nn *= gamma1
        nn += t
        gg *= gamma1
        _axpy(gg, 1.0 - gamma1, r, 1)
        _onp.multiply(gg, gg, out=t)
        _onp.subtract(nn, t, out=t)
        t += epsilon
        _onp.sqrt(t, out=t)
        _onp.divide(r, t, out=r)
        r *= lr
        dd *= gamma2
        dd -= r
        _onp.add(w, dd, out=o)
        _clip_weights(op, o, clip_weights)
    return _run(op, body, weight, grad, (("n", n), ("g", g), ("delta", delta)), out)


def signsgd_update(weight, grad, lr, wd=0.0, rescale_grad=1.0, clip_gradient=-1.0, out=None,
                   name=None):
    """signSGD: ``weight = (1 - lr * wd) * weight - lr * sign(clip(rescale_grad * grad))``."""
    op = "signsgd_update"
    lr, wd = _scalar(op, "lr", lr), _scalar(op, "wd", wd)

    def body(w, o):
        g = _grad(op, weight, grad, rescale_grad, clip_gradient)
        _onp.sign(g, out=g)
        g *= lr
        _onp.multiply(w, 1.0 - lr * wd, out=o)
        _onp.subtract(o, g, out=o)
    return _run(op, body, weight, grad, (), out)


def signum_update(weight, grad, mom, lr, momentum=0.0, wd=0.0, rescale_grad=1.0,
                  clip_gradient=-1.0, wd_lh=0.0, out=None, name=None):
    """Signum: ``mom = momentum * mom - (1 - momentum) * (clip(rescale_grad * grad) + wd *
    weight)``; ``weight = (1 - lr * wd_lh) * weight + lr * sign(mom)``."""
    op = "signum_update"
    lr, wd, wd_lh = _scalar(op, "lr", lr), _scalar(op, "wd", wd), _scalar(op, "wd_lh", wd_lh)
    momentum = _scalar(op, "momentum", momentum)
    m = unwrap(mom)

    def body(w, o):
        nonlocal m
        g = _grad(op, weight, grad, rescale_grad, clip_gradient)
        if wd:
            _axpy(g, wd, w, 0)
        m *= momentum
        _axpy(m, -(1.0 - momentum), g, 0)
        _onp.sign(m, out=g)
        g *= lr
        _onp.multiply(w, 1.0 - lr * wd_lh, out=o)
        _onp.add(o, g, out=o)
    return _run(op, body, weight, grad, (("mom", mom),), out)


def lamb_update_phase1(weight, grad, mean, var, t, wd, beta1=0.9, beta2=0.999, epsilon=1e-6,
                       bias_correction=True, rescale_grad=1.0, clip_gradient=-1.0, out=None,
                       name=None):
    """LAMB's first phase: moments of ``clip(rescale_grad * grad)`` (as Adam), then
    ``g = mean_hat / (sqrt(var_hat) + epsilon) + wd * weight`` with the bias-corrected
    ``mean_hat = mean / (1 - beta1**t)``, ``var_hat = var / (1 - beta2**t)`` (or the raw moments
    when ``bias_correction`` is False). Returns ``g`` (in ``out`` when given); ``weight`` is not
    changed."""
    op = "lamb_update_phase1"
    w = _array_arg(op, "weight", weight)
    _check_like(op, w, "grad", grad)
    m, v = _check_like(op, w, "mean", mean), _check_like(op, w, "var", var)
    t = int(t)
    if t < 1:
        raise ValueError("%s: t (the update count) must be at least 1, got %d" % (op, t))
    wd = _scalar(op, "wd", wd)
    beta1, beta2, epsilon = (_scalar(op, "beta1", beta1), _scalar(op, "beta2", beta2),
                             _scalar(op, "epsilon", epsilon))
    if out is None:
        out = _wrap(_onp.empty_like(w), type(weight))
    o = _check_like(op, w, "out", out)
    prev = set_recording(False)
    try:
        g = _grad(op, weight, grad, rescale_grad, clip_gradient)
        _moments(m, v, g, beta1, beta2, 0)
        c1, c2 = (1.0 - beta1 ** t, 1.0 - beta2 ** t) if bias_correction else (1.0, 1.0)
        _onp.divide(v, c2, out=g)
        _onp.sqrt(g, out=g)
        g += epsilon
        _onp.divide(m, c1, out=o)
        _onp.divide(o, g, out=o)
        if wd:
            _axpy(o, wd, w, 0)
        _touch(mean)
        _touch(var)
        _touch(out)
    finally:
        set_recording(prev)
    return out


def lamb_update_phase2(weight, g, r1, r2, lr, lower_bound=-1.0, upper_bound=-1.0, out=None,
                       name=None):
    """LAMB's second phase: ``r1`` (the weight's norm) is clamped to ``[lower_bound,
    upper_bound]`` where those are positive; ``weight = weight - lr * (r1 / r2) * g``, or
    ``weight - lr * g`` when ``r1`` or ``r2`` is 0."""
    op = "lamb_update_phase2"
    r1, r2 = _scalar(op, "r1", r1, exact=True), _scalar(op, "r2", r2, exact=True)
    lr = _scalar(op, "lr", lr)
    lower, upper = _scalar(op, "lower_bound", lower_bound), _scalar(op, "upper_bound", upper_bound)
    if lower > 0:
        r1 = max(r1, lower)
    if upper > 0:
        r1 = min(r1, upper)
    if r1 != 0 and r2 != 0:
        lr *= r1 / r2

    def body(w, o):
        s = _scratch(0, w)
        _onp.multiply(unwrap(g), lr, out=s)
        _onp.subtract(w, s, out=o)
    _check_like(op, unwrap(weight), "g", g)
    return _run(op, body, weight, None, (), out)


def ftrl_update(weight, grad, z, n, lr, lamda1=0.01, beta=1.0, wd=0.0, rescale_grad=1.0,
                clip_gradient=-1.0, out=None, name=None):
    """FTRL-proximal: with ``r = clip(rescale_grad * grad)``,
    ``z += r - (sqrt(n + r**2) - sqrt(n)) * weight / lr``; ``n += r**2``;
    ``weight = (sign(z) * lamda1 - z) / ((beta + sqrt(n)) / lr + wd) * (abs(z) > lamda1)``."""
    op = "ftrl_update"
    lr, wd = _scalar(op, "lr", lr), _scalar(op, "wd", wd)
    lamda1, beta = _scalar(op, "lamda1", lamda1), _scalar(op, "beta", beta)
    zz, nn = unwrap(z), unwrap(n)

    def body(w, o):
        nonlocal nn, zz
        r = _grad(op, weight, grad, rescale_grad, clip_gradient)
        t = _scratch(1, w)
        s = _scratch(2, w)
        zz += r
        _onp.sqrt(nn, out=s)                   # sqrt(n)
        _onp.multiply(r, r, out=r)             # r**2
        nn += r                                # n += r**2
        _onp.sqrt(nn, out=t)                   # sqrt(n_new)
        _onp.subtract(t, s, out=s)             # sqrt(n_new) - sqrt(n_old)
        s *= w
        s /= lr
        zz -= s
        # weight = (sign(z) * lamda1 - z) / ((beta + sqrt(n)) / lr + wd) where |z| > lamda1
        t += beta
        t /= lr
        t += wd
        _onp.sign(zz, out=s)
        s *= lamda1
        s -= zz
        _onp.divide(s, t, out=o)
        _onp.abs(zz, out=t)
        t -= lamda1                            # > 0 exactly where |z| > lamda1
        _onp.heaviside(t, 0.0, out=t)          # 1.0 there, else 0.0 (no bool to cast)
        o *= t
    return _run(op, body, weight, grad, (("z", z), ("n", n)), out)
