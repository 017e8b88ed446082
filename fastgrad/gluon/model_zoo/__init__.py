"""Gluon's model zoo (MXNet 1.9.1's ``gluon.model_zoo``): ``vision`` models and the
``model_store`` that finds their pretrained parameter files (fastgrad never downloads)."""

from fastgrad.gluon.model_zoo import model_store, vision  # noqa: F401
from fastgrad.gluon.model_zoo.vision import get_model  # noqa: F401
