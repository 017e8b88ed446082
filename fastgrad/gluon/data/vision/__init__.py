"""MXNet's ``gluon.data.vision``: image datasets and ``transforms``."""

from fastgrad.gluon.data.vision.datasets import *  # noqa: F401,F403
from fastgrad.gluon.data.vision import datasets, transforms  # noqa: F401
