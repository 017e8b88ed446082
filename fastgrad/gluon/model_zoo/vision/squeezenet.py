"""SqueezeNet 1.0 and 1.1 (Iandola et al., 2016), as MXNet 1.9.1's model zoo builds them."""

from fastgrad.context import cpu
from fastgrad.gluon.block import HybridBlock
from fastgrad.gluon import nn
from fastgrad.gluon.contrib.nn import HybridConcurrent
from fastgrad.gluon.model_zoo.vision._common import DEFAULT_ROOT, load_pretrained

__all__ = ["SqueezeNet", "squeezenet1_0", "squeezenet1_1"]


def _fire_conv(channels, kernel_size, padding=0):
    out = nn.HybridSequential(prefix="")
    out.add(nn.Conv2D(channels, kernel_size, padding=padding), nn.Activation("relu"))
    return out


def _fire(squeeze_channels, expand1x1_channels, expand3x3_channels):
    """A fire module: a 1x1 squeeze, then 1x1 and 3x3 expansions joined along the channels
    (``contrib.nn.HybridConcurrent``)."""
    out = nn.HybridSequential(prefix="")
    out.add(_fire_conv(squeeze_channels, 1))
    paths = HybridConcurrent(axis=1, prefix="")
    paths.add(_fire_conv(expand1x1_channels, 1), _fire_conv(expand3x3_channels, 3, 1))
    out.add(paths)
    return out


def _pool():
    return nn.MaxPool2D(pool_size=3, strides=2, ceil_mode=True)


class SqueezeNet(HybridBlock):
    """SqueezeNet ``version`` ``'1.0'`` or ``'1.1'``: fire modules (``features``) and a 1x1
    convolution classifier averaged over 13x13 positions (``output``); 224x224 inputs."""

    def __init__(self, version, classes=1000, **kwargs):
        super().__init__(**kwargs)
        assert version in ["1.0", "1.1"], ("Unsupported SqueezeNet version {version}:"
                                           "1.0 or 1.1 expected".format(version=version))
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            if version == "1.0":
                self.features.add(nn.Conv2D(96, kernel_size=7, strides=2),
                                  nn.Activation("relu"), _pool(), _fire(16, 64, 64),
                                  _fire(16, 64, 64), _fire(32, 128, 128), _pool(),
                                  _fire(32, 128, 128), _fire(48, 192, 192),
                                  _fire(48, 192, 192), _fire(64, 256, 256), _pool(),
                                  _fire(64, 256, 256))
            else:
                self.features.add(nn.Conv2D(64, kernel_size=3, strides=2),
                                  nn.Activation("relu"), _pool(), _fire(16, 64, 64),
                                  _fire(16, 64, 64), _pool(), _fire(32, 128, 128),
                                  _fire(32, 128, 128), _pool(), _fire(48, 192, 192),
                                  _fire(48, 192, 192), _fire(64, 256, 256),
                                  _fire(64, 256, 256))
            self.features.add(nn.Dropout(0.5))
            self.output = nn.HybridSequential(prefix="")
            self.output.add(nn.Conv2D(classes, kernel_size=1), nn.Activation("relu"),
                            nn.AvgPool2D(13), nn.Flatten())

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def get_squeezenet(version, pretrained=False, ctx=cpu(), root=DEFAULT_ROOT, **kwargs):
    """SqueezeNet ``version``; ``pretrained=True`` loads ``<root>/squeezenet<v>-*.params``."""
    return load_pretrained(SqueezeNet(version, **kwargs), "squeezenet%s" % version, pretrained,
                           ctx, root)


def squeezenet1_0(**kwargs):
    """SqueezeNet 1.0 (MXNet's ``vision.squeezenet1_0``)."""
    return get_squeezenet("1.0", **kwargs)


def squeezenet1_1(**kwargs):
    """SqueezeNet 1.1 (MXNet's ``vision.squeezenet1_1``)."""
    return get_squeezenet("1.1", **kwargs)
