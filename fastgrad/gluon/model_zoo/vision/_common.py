"""What the model-zoo families share: loading pretrained parameters by model name."""

import os

from fastgrad.gluon.model_zoo.model_store import data_dir, get_model_file

DEFAULT_ROOT = os.path.join(data_dir(), "models")


def load_pretrained(net, name, pretrained, ctx, root):
    """Load ``<root>/<name>-*.params`` into ``net`` when ``pretrained`` (Note [Model zoo
    files] in ``model_store.py``), and return ``net``."""
    if pretrained:
        net.load_parameters(get_model_file(name, root=root), ctx=ctx)
    return net
