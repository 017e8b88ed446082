"""Inception V3 (Szegedy et al., 2015), as MXNet 1.9.1's model zoo builds it (blocks created
in MXNet's order, so that the parameter names, and MXNet's files, match); 299x299 inputs."""

from fastgrad.context import cpu
from fastgrad.gluon.block import HybridBlock
from fastgrad.gluon import nn
from fastgrad.gluon.contrib.nn import HybridConcurrent
from fastgrad.gluon.model_zoo.vision._common import DEFAULT_ROOT, load_pretrained

__all__ = ["Inception3", "inception_v3"]

_SETTING_NAMES = ("channels", "kernel_size", "strides", "padding")


def _basic_conv(**kwargs):
    """Convolution (no bias), batch normalization (epsilon 0.001), ReLU."""
    out = nn.HybridSequential(prefix="")
    out.add(nn.Conv2D(use_bias=False, **kwargs), nn.BatchNorm(epsilon=0.001),
            nn.Activation("relu"))
    return out


def _branch(use_pool, *conv_settings):
    """An optional pooling (``'avg'`` 3x3 stride 1, ``'max'`` 3x3 stride 2), then one basic
    convolution per ``(channels, kernel_size, strides, padding)`` (``None``: the default)."""
    out = nn.HybridSequential(prefix="")
    if use_pool == "avg":
        out.add(nn.AvgPool2D(pool_size=3, strides=1, padding=1))
    elif use_pool == "max":
        out.add(nn.MaxPool2D(pool_size=3, strides=2))
    for setting in conv_settings:
        out.add(_basic_conv(**{k: v for k, v in zip(_SETTING_NAMES, setting)
                               if v is not None}))
    return out


def _concurrent(prefix, *branches):
    """The branches (built inside the block's name scope, in order) joined along the
    channels."""
    out = HybridConcurrent(axis=1, prefix=prefix)
    with out.name_scope():
        for make in branches:
            out.add(make())
    return out


def _block_a(pool_features, prefix):
    return _concurrent(
        prefix,
        lambda: _branch(None, (64, 1, None, None)),
        lambda: _branch(None, (48, 1, None, None), (64, 5, None, 2)),
        lambda: _branch(None, (64, 1, None, None), (96, 3, None, 1), (96, 3, None, 1)),
        lambda: _branch("avg", (pool_features, 1, None, None)))


def _block_b(prefix):
    return _concurrent(
        prefix,
        lambda: _branch(None, (384, 3, 2, None)),
        lambda: _branch(None, (64, 1, None, None), (96, 3, None, 1), (96, 3, 2, None)),
        lambda: _branch("max"))


def _block_c(channels_7x7, prefix):
    c = channels_7x7
    return _concurrent(
        prefix,
        lambda: _branch(None, (192, 1, None, None)),
        lambda: _branch(None, (c, 1, None, None), (c, (1, 7), None, (0, 3)),
                        (192, (7, 1), None, (3, 0))),
        lambda: _branch(None, (c, 1, None, None), (c, (7, 1), None, (3, 0)),
                        (c, (1, 7), None, (0, 3)), (c, (7, 1), None, (3, 0)),
                        (192, (1, 7), None, (0, 3))),
        lambda: _branch("avg", (192, 1, None, None)))


def _block_d(prefix):
    return _concurrent(
        prefix,
        lambda: _branch(None, (192, 1, None, None), (320, 3, 2, None)),
        lambda: _branch(None, (192, 1, None, None), (192, (1, 7), None, (0, 3)),
                        (192, (7, 1), None, (3, 0)), (192, 3, 2, None)),
        lambda: _branch("max"))


def _block_e(prefix):
    out = HybridConcurrent(axis=1, prefix=prefix)
    with out.name_scope():
        out.add(_branch(None, (320, 1, None, None)))
        branch_3x3 = nn.HybridSequential(prefix="")
        out.add(branch_3x3)
        branch_3x3.add(_branch(None, (384, 1, None, None)))
        split = HybridConcurrent(axis=1, prefix="")
        split.add(_branch(None, (384, (1, 3), None, (0, 1))),
                  _branch(None, (384, (3, 1), None, (1, 0))))
        branch_3x3.add(split)
        branch_3x3dbl = nn.HybridSequential(prefix="")
        out.add(branch_3x3dbl)
        branch_3x3dbl.add(_branch(None, (448, 1, None, None), (384, 3, None, 1)))
        split = HybridConcurrent(axis=1, prefix="")
        branch_3x3dbl.add(split)
        split.add(_branch(None, (384, (1, 3), None, (0, 1))),
                  _branch(None, (384, (3, 1), None, (1, 0))))
        out.add(_branch("avg", (192, 1, None, None)))
    return out


class Inception3(HybridBlock):
    """Inception V3: the stem, blocks A1-A3, B, C1-C4, D, E1-E2 (``features``), then the
    classifier ``output``."""

    def __init__(self, classes=1000, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(_basic_conv(channels=32, kernel_size=3, strides=2),
                              _basic_conv(channels=32, kernel_size=3),
                              _basic_conv(channels=64, kernel_size=3, padding=1),
                              nn.MaxPool2D(pool_size=3, strides=2),
                              _basic_conv(channels=80, kernel_size=1),
                              _basic_conv(channels=192, kernel_size=3),
                              nn.MaxPool2D(pool_size=3, strides=2))
            self.features.add(_block_a(32, "A1_"), _block_a(64, "A2_"), _block_a(64, "A3_"),
                              _block_b("B_"), _block_c(128, "C1_"), _block_c(160, "C2_"),
                              _block_c(160, "C3_"), _block_c(192, "C4_"), _block_d("D_"),
                              _block_e("E1_"), _block_e("E2_"))
            self.features.add(nn.AvgPool2D(pool_size=8), nn.Dropout(0.5))
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def inception_v3(pretrained=False, ctx=cpu(), root=DEFAULT_ROOT, **kwargs):
    """Inception V3; ``pretrained=True`` loads ``<root>/inceptionv3-*.params``."""
    return load_pretrained(Inception3(**kwargs), "inceptionv3", pretrained, ctx, root)
