"""Differentiable SciPy: ``fastgrad.scipy`` (``special``, ``stats``, ``signal``, ``linalg``,
``integrate``).

For programs written for ``autograd.scipy`` (HIPS autograd) or ``jax.scipy``: the functions
take fastgrad arrays, NumPy arrays or numbers and are recorded like every op, to any order.
SciPy itself is an optional dependency (``pip install 'fastgrad[scipy]'``), imported the first
time one of these functions runs (Note [SciPy on first use] in ``_table_special.py``);
``import fastgrad`` does not import it.
"""

from fastgrad.scipy import special, stats, signal, linalg, integrate  # noqa: F401

__all__ = ["special", "stats", "signal", "linalg", "integrate"]
