"""VGG 11/13/16/19, with or without batch normalization (Simonyan and Zisserman, 2014), as
MXNet 1.9.1's model zoo builds them."""

from fastgrad.context import cpu
from fastgrad.initializer import Xavier
from fastgrad.gluon.block import HybridBlock
from fastgrad.gluon import nn
from fastgrad.gluon.model_zoo.vision._common import DEFAULT_ROOT, load_pretrained

__all__ = ["VGG", "vgg11", "vgg13", "vgg16", "vgg19", "vgg11_bn", "vgg13_bn", "vgg16_bn",
           "vgg19_bn", "get_vgg"]


class VGG(HybridBlock):
    """``layers[i]`` 3x3 convolutions of ``filters[i]`` channels per stage, each stage ending
    in 2x2 max pooling, then two hidden dense layers of 4096 with dropout (all ``features``)
    and the classifier ``output``."""

    def __init__(self, layers, filters, classes=1000, batch_norm=False, **kwargs):
        super().__init__(**kwargs)
        assert len(layers) == len(filters)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            for count, channels in zip(layers, filters):
                for _ in range(count):
                    self.features.add(nn.Conv2D(
                        channels, kernel_size=3, padding=1,
                        weight_initializer=Xavier(rnd_type="gaussian", factor_type="out",
                                                  magnitude=2),
                        bias_initializer="zeros"))
                    if batch_norm:
                        self.features.add(nn.BatchNorm())
                    self.features.add(nn.Activation("relu"))
                self.features.add(nn.MaxPool2D(strides=2))
            for _ in range(2):
                self.features.add(nn.Dense(4096, activation="relu",
                                           weight_initializer="normal",
                                           bias_initializer="zeros"),
                                  nn.Dropout(rate=0.5))
            self.output = nn.Dense(classes, weight_initializer="normal",
                                   bias_initializer="zeros")

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


VGG_SPEC = {11: ([1, 1, 2, 2, 2], [64, 128, 256, 512, 512]),
            13: ([2, 2, 2, 2, 2], [64, 128, 256, 512, 512]),
            16: ([2, 2, 3, 3, 3], [64, 128, 256, 512, 512]),
            19: ([2, 2, 4, 4, 4], [64, 128, 256, 512, 512])}


def get_vgg(num_layers, pretrained=False, ctx=cpu(), root=DEFAULT_ROOT, **kwargs):
    """VGG with ``num_layers`` (11, 13, 16, 19) layers (``batch_norm=True`` for the ``_bn``
    models); ``pretrained=True`` loads ``<root>/vgg<n>[_bn]-*.params``."""
    layers, filters = VGG_SPEC[num_layers]
    net = VGG(layers, filters, **kwargs)
    name = "vgg%d%s" % (num_layers, "_bn" if kwargs.get("batch_norm") else "")
    return load_pretrained(net, name, pretrained, ctx, root)


def _constructor(num_layers, batch_norm):
    def make(**kwargs):
        if batch_norm:
            kwargs["batch_norm"] = True
        return get_vgg(num_layers, **kwargs)
    make.__name__ = make.__qualname__ = "vgg%d%s" % (num_layers, "_bn" if batch_norm else "")
    make.__doc__ = "VGG-%d%s (MXNet's ``vision.%s``)." % (
        num_layers, " with batch normalization" if batch_norm else "", make.__name__)
    return make


vgg11, vgg13, vgg16, vgg19 = (_constructor(n, False) for n in (11, 13, 16, 19))
vgg11_bn, vgg13_bn, vgg16_bn, vgg19_bn = (_constructor(n, True) for n in (11, 13, 16, 19))
