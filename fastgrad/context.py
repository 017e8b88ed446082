"""Devices. fastgrad computes on the CPU; ``cpu()`` exists so MXNet code runs unchanged."""

from fastgrad.base import MXNetValueError


class _DefaultContext:
    """``Context.default_ctx``: MXNet's deprecated class attribute for the default device,
    the CPU here (read-only on a device instance)."""

    def __get__(self, instance, owner):
        return cpu() if owner._default is None else owner._default

    def __set__(self, instance, value):
        raise AttributeError("set Context.default_ctx on the class, not on an instance")


class Context:
    """A device. fastgrad computes on ``cpu(0)``; ``with cpu():`` is accepted and does
    nothing. ``gpu(i)`` can be named, as in MXNet without CUDA, but placing an array there
    raises (:func:`check_device`)."""

    _default = None
    default_ctx = _DefaultContext()

    def __init__(self, device_type="cpu", device_id=0):
        if isinstance(device_type, Context):
            device_type, device_id = device_type.device_type, device_type.device_id
        if device_type not in ("cpu", "gpu", "cpu_pinned", "cpu_shared"):
            raise ValueError("unknown device type %r (fastgrad runs on the CPU)" % (device_type,))
        self.device_type = device_type
        self.device_id = int(device_id)

    def __repr__(self):
        return "%s(%d)" % (self.device_type, self.device_id)

    __str__ = __repr__

    def __eq__(self, other):
        return isinstance(other, Context) and other.device_type == self.device_type \
            and other.device_id == self.device_id

    def __hash__(self):
        return hash((self.device_type, self.device_id))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


Device = Context


def cpu(device_id=0):
    """The CPU device."""
    return Context("cpu", device_id)


def cpu_pinned(device_id=0):
    """MXNet's page-locked CPU memory for transfers to a GPU: the CPU here
    (``mx.cpu_pinned``); arrays placed there are ordinary CPU arrays."""
    return Context("cpu_pinned", device_id)


def gpu(device_id=0):
    """The GPU ``device_id``: a name only, since fastgrad runs on the CPU; placing an array
    there raises, as MXNet built without CUDA does."""
    return Context("gpu", device_id)


def check_device(ctx, what="an array"):
    """Raise unless ``ctx`` (a Context, a device string or None) is a CPU device."""
    if ctx is None:
        return
    kind = ctx.device_type if isinstance(ctx, Context) else str(ctx).split("(")[0]
    if kind not in ("cpu", "cpu_pinned", "cpu_shared"):
        raise MXNetValueError("fastgrad runs on the CPU only: cannot place %s on %s "
                              "(use mx.cpu(), or leave ctx out)" % (what, ctx))


def num_gpus():
    """The number of GPUs fastgrad can use: always 0."""
    return 0


def current_context():
    """The current device: always ``cpu(0)`` (MXNet's ``current_context``)."""
    return cpu()


current_device = current_context
