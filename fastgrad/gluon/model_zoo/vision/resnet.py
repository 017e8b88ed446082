"""ResNet V1 (He et al., 2015) and V2 (He et al., 2016), as MXNet 1.9.1's model zoo builds
them: the same blocks, attribute names and name scopes, so MXNet's parameter files load."""

from fastgrad.context import cpu
from fastgrad.gluon.block import HybridBlock
from fastgrad.gluon import nn
from fastgrad.gluon.model_zoo.vision._common import DEFAULT_ROOT, load_pretrained

__all__ = ["ResNetV1", "ResNetV2", "BasicBlockV1", "BasicBlockV2", "BottleneckV1",
           "BottleneckV2", "resnet18_v1", "resnet34_v1", "resnet50_v1", "resnet101_v1",
           "resnet152_v1", "resnet18_v2", "resnet34_v2", "resnet50_v2", "resnet101_v2",
           "resnet152_v2", "get_resnet"]


def _conv3x3(channels, stride, in_channels):
    return nn.Conv2D(channels, kernel_size=3, strides=stride, padding=1, use_bias=False,
                     in_channels=in_channels)


def _shortcut_v1(channels, stride, in_channels):
    path = nn.HybridSequential(prefix="")
    path.add(nn.Conv2D(channels, kernel_size=1, strides=stride, use_bias=False,
                       in_channels=in_channels), nn.BatchNorm())
    return path


def _shortcut_v2(channels, stride, in_channels):
    return nn.Conv2D(channels, 1, stride, use_bias=False, in_channels=in_channels)


def _preactivate_v2(F, block, x):
    """A V2 block's start: ``x`` through ``block.bn1`` and a ReLU, and the shortcut (``x``
    itself, or ``block.downsample`` of the activated ``x``)."""
    activated = F.Activation(block.bn1(x), act_type="relu")
    return activated, (block.downsample(activated) if block.downsample else x)


class BasicBlockV1(HybridBlock):
    """Two 3x3 convolutions with batch normalization, added to the (projected) input, then a
    ReLU."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self.body = nn.HybridSequential(prefix="")
        self.body.add(_conv3x3(channels, stride, in_channels), nn.BatchNorm(),
                      nn.Activation("relu"), _conv3x3(channels, 1, channels), nn.BatchNorm())
        self.downsample = _shortcut_v1(channels, stride, in_channels) if downsample else None

    def hybrid_forward(self, F, x):
        residual = self.downsample(x) if self.downsample else x
        return F.Activation(residual + self.body(x), act_type="relu")


class BottleneckV1(HybridBlock):
    """1x1, 3x3 and 1x1 convolutions (a quarter of the channels in the middle) with batch
    normalization, added to the (projected) input, then a ReLU."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self.body = nn.HybridSequential(prefix="")
        self.body.add(nn.Conv2D(channels // 4, kernel_size=1, strides=stride), nn.BatchNorm(),
                      nn.Activation("relu"), _conv3x3(channels // 4, 1, channels // 4),
                      nn.BatchNorm(), nn.Activation("relu"),
                      nn.Conv2D(channels, kernel_size=1, strides=1), nn.BatchNorm())
        self.downsample = _shortcut_v1(channels, stride, in_channels) if downsample else None

    def hybrid_forward(self, F, x):
        residual = self.downsample(x) if self.downsample else x
        return F.Activation(self.body(x) + residual, act_type="relu")


class BasicBlockV2(HybridBlock):
    """Pre-activation basic block: batch normalization and ReLU before each 3x3
    convolution; the shortcut projects the activated input."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self.bn1 = nn.BatchNorm()
        self.conv1 = _conv3x3(channels, stride, in_channels)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(channels, 1, channels)
        self.downsample = _shortcut_v2(channels, stride, in_channels) if downsample else None

    def hybrid_forward(self, F, x):
        x, residual = _preactivate_v2(F, self, x)
        x = self.conv1(x)
        x = F.Activation(self.bn2(x), act_type="relu")
        return self.conv2(x) + residual


class BottleneckV2(HybridBlock):
    """Pre-activation bottleneck block (1x1, 3x3, 1x1 convolutions)."""

    def __init__(self, channels, stride, downsample=False, in_channels=0, **kwargs):
        super().__init__(**kwargs)
        self.bn1 = nn.BatchNorm()
        self.conv1 = nn.Conv2D(channels // 4, kernel_size=1, strides=1, use_bias=False)
        self.bn2 = nn.BatchNorm()
        self.conv2 = _conv3x3(channels // 4, stride, channels // 4)
        self.bn3 = nn.BatchNorm()
        self.conv3 = nn.Conv2D(channels, kernel_size=1, strides=1, use_bias=False)
        self.downsample = _shortcut_v2(channels, stride, in_channels) if downsample else None

    def hybrid_forward(self, F, x):
        x, residual = _preactivate_v2(F, self, x)
        x = F.Activation(self.bn2(self.conv1(x)), act_type="relu")
        x = F.Activation(self.bn3(self.conv2(x)), act_type="relu")
        return self.conv3(x) + residual


class _ResNet(HybridBlock):
    """``features`` (a HybridSequential: the stem, one stage per entry of ``layers``, the
    head) then the classifier ``output``."""

    def _make_layer(self, block, layers, channels, stride, stage_index, in_channels=0):
        layer = nn.HybridSequential(prefix="stage%d_" % stage_index)
        with layer.name_scope():
            layer.add(block(channels, stride, channels != in_channels, in_channels=in_channels,
                            prefix=""))
            for _ in range(layers - 1):
                layer.add(block(channels, 1, False, in_channels=channels, prefix=""))
        return layer

    def _add_stem(self, channels, thumbnail):
        if thumbnail:           # for 32x32 images (CIFAR)
            self.features.add(_conv3x3(channels, 1, 0))
        else:
            self.features.add(nn.Conv2D(channels, 7, 2, 3, use_bias=False), nn.BatchNorm(),
                              nn.Activation("relu"), nn.MaxPool2D(3, 2, 1))

    def hybrid_forward(self, F, x):
        return self.output(self.features(x))


class ResNetV1(_ResNet):
    """ResNet V1 from ``block`` (``BasicBlockV1`` or ``BottleneckV1``), ``layers`` blocks per
    stage and ``channels`` (the stem's, then each stage's)."""

    def __init__(self, block, layers, channels, classes=1000, thumbnail=False, **kwargs):
        super().__init__(**kwargs)
        assert len(layers) == len(channels) - 1
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self._add_stem(channels[0], thumbnail)
            for i, num_layer in enumerate(layers):
                self.features.add(self._make_layer(block, num_layer, channels[i + 1],
                                                   1 if i == 0 else 2, i + 1,
                                                   in_channels=channels[i]))
            self.features.add(nn.GlobalAvgPool2D())
            self.output = nn.Dense(classes, in_units=channels[-1])


class ResNetV2(_ResNet):
    """ResNet V2 (pre-activation) from ``block`` (``BasicBlockV2`` or ``BottleneckV2``)."""

    def __init__(self, block, layers, channels, classes=1000, thumbnail=False, **kwargs):
        super().__init__(**kwargs)
        assert len(layers) == len(channels) - 1
        with self.name_scope():
            self.features = nn.HybridSequential(prefix="")
            self.features.add(nn.BatchNorm(scale=False, center=False))
            self._add_stem(channels[0], thumbnail)
            in_channels = channels[0]
            for i, num_layer in enumerate(layers):
                self.features.add(self._make_layer(block, num_layer, channels[i + 1],
                                                   1 if i == 0 else 2, i + 1,
                                                   in_channels=in_channels))
                in_channels = channels[i + 1]
            self.features.add(nn.BatchNorm(), nn.Activation("relu"), nn.GlobalAvgPool2D(),
                              nn.Flatten())
            self.output = nn.Dense(classes, in_units=in_channels)


RESNET_SPEC = {18: ("basic_block", [2, 2, 2, 2], [64, 64, 128, 256, 512]),
               34: ("basic_block", [3, 4, 6, 3], [64, 64, 128, 256, 512]),
               50: ("bottle_neck", [3, 4, 6, 3], [64, 256, 512, 1024, 2048]),
               101: ("bottle_neck", [3, 4, 23, 3], [64, 256, 512, 1024, 2048]),
               152: ("bottle_neck", [3, 8, 36, 3], [64, 256, 512, 1024, 2048])}
_NETS = {1: ResNetV1, 2: ResNetV2}
_BLOCKS = {1: {"basic_block": BasicBlockV1, "bottle_neck": BottleneckV1},
           2: {"basic_block": BasicBlockV2, "bottle_neck": BottleneckV2}}


def get_resnet(version, num_layers, pretrained=False, ctx=cpu(), root=DEFAULT_ROOT, **kwargs):
    """ResNet ``version`` (1 or 2) with ``num_layers`` (18, 34, 50, 101, 152) layers;
    ``pretrained=True`` loads ``<root>/resnet<n>_v<version>-*.params``."""
    assert num_layers in RESNET_SPEC, "Invalid number of layers: %d. Options are %s" % (
        num_layers, str(RESNET_SPEC.keys()))
    assert 1 <= version <= 2, "Invalid resnet version: %d. Options are 1 and 2." % version
    block_type, layers, channels = RESNET_SPEC[num_layers]
    net = _NETS[version](_BLOCKS[version][block_type], layers, channels, **kwargs)
    return load_pretrained(net, "resnet%d_v%d" % (num_layers, version), pretrained, ctx, root)


def _constructor(version, num_layers):
    def make(**kwargs):
        return get_resnet(version, num_layers, **kwargs)
    make.__name__ = make.__qualname__ = "resnet%d_v%d" % (num_layers, version)
    make.__doc__ = ("ResNet-%d V%d (MXNet's ``vision.%s``); keyword arguments as "
                    "``get_resnet``." % (num_layers, version, make.__name__))
    return make


resnet18_v1, resnet34_v1, resnet50_v1, resnet101_v1, resnet152_v1 = (
    _constructor(1, n) for n in (18, 34, 50, 101, 152))
resnet18_v2, resnet34_v2, resnet50_v2, resnet101_v2, resnet152_v2 = (
    _constructor(2, n) for n in (18, 34, 50, 101, 152))
