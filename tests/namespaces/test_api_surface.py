"""The public namespaces list what they define, so type checkers and ``import *`` see it."""

import numpy as onp

import fastgrad as mx
from fastgrad._api import _functions


def test_functions_all_lists_every_public_function():
    public = {name for name, value in vars(_functions).items()
              if not name.startswith("_") and callable(value)
              and not isinstance(value, type(onp))}
    imported = {"ndarray", "unwrap", "normalize_axis"}
    missing = sorted(public - set(_functions.__all__) - imported)
    assert not missing, "add these to _functions.__all__: %s" % missing
    assert len(_functions.__all__) == len(set(_functions.__all__))


def test_np_namespace_exports_the_functions():
    for name in _functions.__all__:
        assert getattr(mx.np, name) is getattr(_functions, name), name


def test_nd_reduction_methods_have_shape_one():
    x = mx.nd.ones((2, 3))
    for value in (x.sum(), x.mean(), x.max(), x.min(), x.prod(), x.norm()):
        assert value.shape == (1,)
    assert x.sum(axis=0).shape == (3,)
    assert float(x.sum().asscalar()) == 6.0
