"""Gluon's vision models (MXNet 1.9.1's ``gluon.model_zoo.vision``): ResNet V1/V2, VGG,
AlexNet, DenseNet, SqueezeNet, Inception V3, MobileNet and MobileNetV2, built as MXNet builds
them, so that MXNet's published parameter files load (``pretrained=True`` reads them from
``root``; see ``model_store.get_model_file``).

Examples
--------
>>> from fastgrad.gluon.model_zoo import vision
>>> net = vision.get_model('resnet18_v1', classes=10)
>>> net.output
Dense(512 -> 10, linear)
"""

from fastgrad.gluon.model_zoo.vision.resnet import *  # noqa: F401,F403
from fastgrad.gluon.model_zoo.vision.alexnet import *  # noqa: F401,F403
from fastgrad.gluon.model_zoo.vision.densenet import *  # noqa: F401,F403
from fastgrad.gluon.model_zoo.vision.squeezenet import *  # noqa: F401,F403
from fastgrad.gluon.model_zoo.vision.vgg import *  # noqa: F401,F403
from fastgrad.gluon.model_zoo.vision.mobilenet import *  # noqa: F401,F403
from fastgrad.gluon.model_zoo.vision.inception import *  # noqa: F401,F403
from fastgrad.gluon.model_zoo.vision.resnet import __all__ as _RESNET
from fastgrad.gluon.model_zoo.vision.alexnet import __all__ as _ALEXNET
from fastgrad.gluon.model_zoo.vision.densenet import __all__ as _DENSENET
from fastgrad.gluon.model_zoo.vision.squeezenet import __all__ as _SQUEEZENET
from fastgrad.gluon.model_zoo.vision.vgg import __all__ as _VGG
from fastgrad.gluon.model_zoo.vision.mobilenet import __all__ as _MOBILENET
from fastgrad.gluon.model_zoo.vision.inception import __all__ as _INCEPTION

_MODELS = {
    "resnet18_v1": resnet18_v1, "resnet34_v1": resnet34_v1,  # noqa: F405
    "resnet50_v1": resnet50_v1, "resnet101_v1": resnet101_v1,  # noqa: F405
    "resnet152_v1": resnet152_v1, "resnet18_v2": resnet18_v2,  # noqa: F405
    "resnet34_v2": resnet34_v2, "resnet50_v2": resnet50_v2,  # noqa: F405
    "resnet101_v2": resnet101_v2, "resnet152_v2": resnet152_v2,  # noqa: F405
    "vgg11": vgg11, "vgg13": vgg13, "vgg16": vgg16, "vgg19": vgg19,  # noqa: F405
    "vgg11_bn": vgg11_bn, "vgg13_bn": vgg13_bn, "vgg16_bn": vgg16_bn,  # noqa: F405
    "vgg19_bn": vgg19_bn, "alexnet": alexnet,  # noqa: F405
    "densenet121": densenet121, "densenet161": densenet161,  # noqa: F405
    "densenet169": densenet169, "densenet201": densenet201,  # noqa: F405
    "squeezenet1.0": squeezenet1_0, "squeezenet1.1": squeezenet1_1,  # noqa: F405
    "inceptionv3": inception_v3,  # noqa: F405
    "mobilenet1.0": mobilenet1_0, "mobilenet0.75": mobilenet0_75,  # noqa: F405
    "mobilenet0.5": mobilenet0_5, "mobilenet0.25": mobilenet0_25,  # noqa: F405
    "mobilenetv2_1.0": mobilenet_v2_1_0, "mobilenetv2_0.75": mobilenet_v2_0_75,  # noqa: F405
    "mobilenetv2_0.5": mobilenet_v2_0_5, "mobilenetv2_0.25": mobilenet_v2_0_25,  # noqa: F405
}


def get_model(name, **kwargs):
    """The model called ``name`` (``'resnet18_v1'``, ``'vgg16_bn'``, ``'mobilenet0.5'``...),
    built with ``kwargs`` (``classes``, ``pretrained``, ``ctx``, ``root``, ...)."""
    name = name.lower()
    if name not in _MODELS:
        raise ValueError("Model %s is not supported. Available options are\n\t%s"
                         % (name, "\n\t".join(sorted(_MODELS))))
    return _MODELS[name](**kwargs)


__all__ = (["get_model"] + _RESNET + _ALEXNET + _DENSENET + _SQUEEZENET + _VGG + _MOBILENET
           + _INCEPTION)
