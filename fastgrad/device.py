"""``mx.device`` (MXNet 2.x's name for ``mx.context``): ``Device``, ``cpu``, ``gpu``."""

from fastgrad.context import (Context, Device, cpu, gpu, num_gpus, current_context,  # noqa: F401
                              current_device, check_device)

__all__ = ["Context", "Device", "cpu", "gpu", "num_gpus", "current_context", "current_device"]
