"""Devices. fastgrad computes on the CPU; ``cpu()`` exists so MXNet code runs unchanged."""


class Context:
    """A device. The only one is ``cpu(0)``; ``with cpu():`` is accepted and does nothing."""

    _default = None

    def __init__(self, device_type="cpu", device_id=0):
        if device_type != "cpu":
            raise ValueError("fastgrad runs on the CPU only; %r is not available" % device_type)
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


def gpu(device_id=0):
    """There is no GPU in fastgrad: raises ``ValueError``."""
    return Context("gpu", device_id)


def num_gpus():
    """The number of GPUs fastgrad can use: always 0."""
    return 0


def current_context():
    return cpu()
