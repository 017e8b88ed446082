"""Where Gluon's pretrained model files are found (MXNet 1.9.1's ``model_zoo.model_store``).

Note [Model zoo files]
~~~~~~~~~~~~~~~~~~~~~~
fastgrad never downloads: ``get_model_file(name, root)`` returns the path of
``<root>/<name>-<short hash>.params`` (the name MXNet gives the file it downloads from its
model store), and raises ``FileNotFoundError`` naming the file, its SHA-1 and where MXNet
publishes it (``$MXNET_GLUON_REPO``, as MXNet) when it is not there. The SHA-1 of each
published file is MXNet's; a file whose content differs raises ``ValueError`` (MXNet would
download it again).
"""

import glob
import os

from fastgrad.gluon.utils import check_sha1, _get_repo_file_url

__all__ = ["get_model_file", "purge", "short_hash", "data_dir"]

# (SHA-1 of the published file, model name), as MXNet 1.9.1's model store lists them.
_MODEL_SHA1 = {name: checksum for checksum, name in [
    ("44335d1f0046b328243b32a26a4fbd62d9057b45", "alexnet"),
    ("f27dbf2dbd5ce9a80b102d89c7483342cd33cb31", "densenet121"),
    ("b6c8a95717e3e761bd88d145f4d0a214aaa515dc", "densenet161"),
    ("2603f878403c6aa5a71a124c4a3307143d6820e9", "densenet169"),
    ("1cdbc116bc3a1b65832b18cf53e1cb8e7da017eb", "densenet201"),
    ("ed47ec45a937b656fcc94dabde85495bbef5ba1f", "inceptionv3"),
    ("9f83e440996887baf91a6aff1cccc1c903a64274", "mobilenet0.25"),
    ("8e9d539cc66aa5efa71c4b6af983b936ab8701c3", "mobilenet0.5"),
    ("529b2c7f4934e6cb851155b22c96c9ab0a7c4dc2", "mobilenet0.75"),
    ("6b8c5106c730e8750bcd82ceb75220a3351157cd", "mobilenet1.0"),
    ("36da4ff1867abccd32b29592d79fc753bca5a215", "mobilenetv2_1.0"),
    ("e2be7b72a79fe4a750d1dd415afedf01c3ea818d", "mobilenetv2_0.75"),
    ("aabd26cd335379fcb72ae6c8fac45a70eab11785", "mobilenetv2_0.5"),
    ("ae8f9392789b04822cbb1d98c27283fc5f8aa0a7", "mobilenetv2_0.25"),
    ("a0666292f0a30ff61f857b0b66efc0228eb6a54b", "resnet18_v1"),
    ("48216ba99a8b1005d75c0f3a0c422301a0473233", "resnet34_v1"),
    ("0aee57f96768c0a2d5b23a6ec91eb08dfb0a45ce", "resnet50_v1"),
    ("d988c13d6159779e907140a638c56f229634cb02", "resnet101_v1"),
    ("671c637a14387ab9e2654eafd0d493d86b1c8579", "resnet152_v1"),
    ("a81db45fd7b7a2d12ab97cd88ef0a5ac48b8f657", "resnet18_v2"),
    ("9d6b80bbc35169de6b6edecffdd6047c56fdd322", "resnet34_v2"),
    ("ecdde35339c1aadbec4f547857078e734a76fb49", "resnet50_v2"),
    ("18e93e4f48947e002547f50eabbcc9c83e516aa6", "resnet101_v2"),
    ("f2695542de38cf7e71ed58f02893d82bb409415e", "resnet152_v2"),
    ("264ba4970a0cc87a4f15c96e25246a1307caf523", "squeezenet1.0"),
    ("33ba0f93753c83d86e1eb397f38a667eaf2e9376", "squeezenet1.1"),
    ("dd221b160977f36a53f464cb54648d227c707a05", "vgg11"),
    ("ee79a8098a91fbe05b7a973fed2017a6117723a8", "vgg11_bn"),
    ("6bc5de58a05a5e2e7f493e2d75a580d83efde38c", "vgg13"),
    ("7d97a06c3c7a1aecc88b6e7385c2b373a249e95e", "vgg13_bn"),
    ("e660d4569ccb679ec68f1fd3cce07a387252a90a", "vgg16"),
    ("7f01cf050d357127a73826045c245041b0df7363", "vgg16_bn"),
    ("ad2f660d101905472b83590b59708b71ea22b2e5", "vgg19"),
    ("f360b758e856f1074a85abd5fd873ed1d98297c3", "vgg19_bn")]}


def data_dir():
    """MXNet's data directory: ``$MXNET_HOME``, else ``~/.mxnet``."""
    return os.getenv("MXNET_HOME", os.path.join(os.path.expanduser("~"), ".mxnet"))


def short_hash(name):
    """The first 8 hex digits of the published file's SHA-1 (part of its file name)."""
    if name not in _MODEL_SHA1:
        raise ValueError("Pretrained model for {name} is not available.".format(name=name))
    return _MODEL_SHA1[name][:8]


def get_model_file(name, root=os.path.join(data_dir(), "models")):
    """The path of the pretrained parameters of model ``name`` under ``root``.

    ``<root>/<name>-<short hash>.params`` is MXNet's own file (its SHA-1 is checked); another
    ``<root>/<name>-*.params`` (parameters saved by ``save_parameters``) is taken as it is.
    """
    file_name = "%s-%s" % (name, short_hash(name))
    root = os.path.expanduser(root)
    path = os.path.join(root, file_name + ".params")
    if os.path.exists(path):
        if not check_sha1(path, _MODEL_SHA1[name]):
            raise ValueError("get_model_file: %s does not hold MXNet's published parameters of "
                             "%s (its SHA-1 differs from %s)" % (path, name, _MODEL_SHA1[name]))
        return path
    others = sorted(glob.glob(os.path.join(glob.escape(root), glob.escape(name) + "-*.params")))
    if others:
        return others[0]
    raise FileNotFoundError(
        "get_model_file: the pretrained parameters of %s are not in %s: fastgrad does not "
        "download (it assumes no network access); put %s.params there (SHA-1 %s; MXNet "
        "publishes it zipped at %s) or pass root="
        % (name, root, file_name, _MODEL_SHA1[name],
           _get_repo_file_url("gluon/models", file_name + ".zip")))


def purge(root=os.path.join(data_dir(), "models")):
    """Remove every ``.params`` file in ``root`` (MXNet's ``model_store.purge``)."""
    root = os.path.expanduser(root)
    for f in os.listdir(root):
        if f.endswith(".params"):
            os.remove(os.path.join(root, f))
