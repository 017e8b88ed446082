"""``mx.random``: seeding and MXNet 1.x's samplers (NDArrays, float32)."""

from fastgrad.ndarray.random import uniform, normal, randint, seed  # noqa: F401

__all__ = ["seed", "uniform", "normal", "randint"]
