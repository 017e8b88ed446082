"""MXNet 1.9.1's ``gluon.data`` (``fastgrad.gluon.data``): datasets, samplers, the
DataLoader, and ``vision`` (MNIST/CIFAR readers, image folders, image transforms)."""

from fastgrad.gluon.data.dataset import *  # noqa: F401,F403
from fastgrad.gluon.data.sampler import *  # noqa: F401,F403
from fastgrad.gluon.data.dataloader import *  # noqa: F401,F403
from fastgrad.gluon.data import dataset, sampler, dataloader  # noqa: F401
from fastgrad.gluon.data import vision  # noqa: F401
