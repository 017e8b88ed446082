"""AlexNet (Krizhevsky et al., 2012), as MXNet 1.9.1's model zoo builds it."""

from fastgrad.context import cpu
from fastgrad.gluon.block import HybridBlock
from fastgrad.gluon import nn
from fastgrad.gluon.model_zoo.vision._common import DEFAULT_ROOT, load_pretrained

__all__ = ["AlexNet", "alexnet"]


class AlexNet(HybridBlock):
    """Five convolutions and two hidden dense layers with dropout (``features``), then the
    classifier ``output``; 224x224 inputs."""

    def __init__(self, classes=1000, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            with self.features.name_scope():
                for channels, kernel, stride, padding, pool in (
                        (64, 11, 4, 2, True), (192, 5, 1, 2, True), (384, 3, 1, 1, False),
                        (256, 3, 1, 1, False), (256, 3, 1, 1, True)):
                    self.features.add(nn.Conv2D(channels, kernel_size=kernel, strides=stride,
                                                padding=padding, activation="relu"))
                    if pool:
                        self.features.add(nn.MaxPool2D(pool_size=3, strides=2))
                self.features.add(nn.Flatten())
                for _ in range(2):
                    self.features.add(nn.Dense(4096, activation="relu"), nn.Dropout(0.5))
            self.output = nn.Dense(classes)

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


def alexnet(pretrained=False, ctx=cpu(), root=DEFAULT_ROOT, **kwargs):
    """AlexNet; ``pretrained=True`` loads ``<root>/alexnet-*.params``."""
    return load_pretrained(AlexNet(**kwargs), "alexnet", pretrained, ctx, root)
