"""MXNet 1.9.1's ``gluon.contrib.nn``: ``Concurrent``/``HybridConcurrent`` (MXNet 2's
``nn.Concatenate``/``HybridConcatenate``), ``Identity``, ``SparseEmbedding``,
``SyncBatchNorm`` and ``PixelShuffle1D/2D/3D``."""

import warnings

from fastgrad import context
from fastgrad import ndarray as _nd
from fastgrad.gluon.block import Block, HybridBlock
from fastgrad.gluon import nn
from fastgrad.gluon.nn.basic_layers import _BatchNorm

__all__ = ["Concurrent", "HybridConcurrent", "Identity", "SparseEmbedding", "SyncBatchNorm",
           "PixelShuffle1D", "PixelShuffle2D", "PixelShuffle3D"]


class Concurrent(nn.Concatenate):
    """Runs every child on the same input and concatenates the outputs along ``axis``
    (default -1)."""


class HybridConcurrent(nn.HybridConcatenate):
    """``Concurrent`` for HybridBlocks."""


class Identity(nn.Identity):
    """Returns its input (useful as a branch of ``HybridConcurrent``)."""


class SparseEmbedding(Block):
    """``Embedding`` whose weight gradient MXNet keeps row-sparse; fastgrad's is dense with
    the same values (fastgrad has no sparse storage)."""

    def __init__(self, input_dim, output_dim, dtype="float32", weight_initializer=None,
                 **kwargs):
        super().__init__(**kwargs)
        self._kwargs = {"input_dim": input_dim, "output_dim": output_dim, "dtype": dtype,
                        "sparse_grad": True}
        self.weight = self.params.get("weight", shape=(input_dim, output_dim),
                                      init=weight_initializer, dtype=dtype,
                                      grad_stype="row_sparse")

    def forward(self, x):
        return _nd.Embedding(x, self.weight.data(), name="fwd", **self._kwargs)

    def __repr__(self):
        return "{block_name}({input_dim} -> {output_dim}, {dtype})".format(
            block_name=self.__class__.__name__, **self._kwargs)


class SyncBatchNorm(_BatchNorm):
    """Batch normalization whose statistics MXNet synchronises over ``num_devices`` GPUs;
    with fastgrad's one device it is ``BatchNorm(axis=1)`` (the multi-process analogue is a
    ``Trainer`` over ``dist_sync``, whose workers each normalize their own batch)."""

    def __init__(self, in_channels=0, num_devices=None, momentum=0.9, epsilon=1e-5,
                 center=True, scale=True, use_global_stats=False, beta_initializer="zeros",
                 gamma_initializer="ones", running_mean_initializer="zeros",
                 running_variance_initializer="ones", **kwargs):
        super().__init__(axis=1, momentum=momentum, epsilon=epsilon, center=center,
                         scale=scale, use_global_stats=use_global_stats,
                         beta_initializer=beta_initializer, gamma_initializer=gamma_initializer,
                         running_mean_initializer=running_mean_initializer,
                         running_variance_initializer=running_variance_initializer,
                         in_channels=in_channels, **kwargs)
        if num_devices is None:
            warnings.warn("Caution using SyncBatchNorm: if not using all the GPUs, please "
                          "mannually set num_devices", UserWarning)
            num_devices = max(context.num_gpus(), 1)
        self._kwargs = {"eps": epsilon, "momentum": momentum, "fix_gamma": not scale,
                        "use_global_stats": use_global_stats, "ndev": num_devices,
                        "key": self.prefix}

    def hybrid_forward(self, F, x, gamma, beta, running_mean, running_var):
        kwargs = {k: v for k, v in self._kwargs.items() if k not in ("ndev", "key")}
        return F.BatchNorm(x, gamma, beta, running_mean, running_var, axis=1, name="fwd",
                           **kwargs)


def _factors(factor, n):
    try:
        return (int(factor),) * n
    except TypeError:
        factors = tuple(int(f) for f in factor)
        assert len(factors) == n, "wrong length {}".format(len(factors))
        return factors


class _PixelShuffle(HybridBlock):
    """Moves ``prod(factors)`` groups of channels into the spatial axes:
    ``(N, C * f1 * ... * fn, X1, ..., Xn)`` to ``(N, C, X1 * f1, ..., Xn * fn)``."""

    _dims = None

    def __init__(self, factor):
        super().__init__()
        self._factors = _factors(factor, self._dims)

    def hybrid_forward(self, F, x):
        n, f = self._dims, self._factors
        # (N, C, f1, ..., fn, X1, ..., Xn) with MXNet's reshape codes: 0 keeps an axis, -4
        # splits one into two (-1 inferred).
        size = 1
        for factor in f:
            size *= factor
        x = F.reshape(x, shape=(0, -4, -1, size) + (0,) * n)
        for i in range(1, n):
            x = F.reshape(x, shape=(0, 0) + (0,) * (i - 1) + (-4, f[i - 1], -1) + (0,) * n)
        # interleave: (N, C, X1, f1, X2, f2, ...), then merge each pair
        order = (0, 1) + sum(((2 + n + i, 2 + i) for i in range(n)), ())
        x = F.transpose(x, axes=order)
        return F.reshape(x, shape=(0, 0) + (-3,) * n)

    def __repr__(self):
        return "{}({})".format(self.__class__.__name__,
                               self._factors[0] if self._dims == 1 else self._factors)


class PixelShuffle1D(_PixelShuffle):
    """``(N, C * f, W)`` to ``(N, C, W * f)``."""
    _dims = 1


class PixelShuffle2D(_PixelShuffle):
    """``(N, C * f1 * f2, H, W)`` to ``(N, C, H * f1, W * f2)``."""
    _dims = 2


class PixelShuffle3D(_PixelShuffle):
    """``(N, C * f1 * f2 * f3, D, H, W)`` to ``(N, C, D * f1, H * f2, W * f3)``."""
    _dims = 3
