"""Type stubs for ``fastgrad._core._engine``: the backward pass."""

from collections.abc import Callable, Mapping
from typing import Any

from fastgrad._core._array import Primitive, ndarray

def register_primitives(prims: Mapping[str, Primitive]) -> None: ...
def run_backward(heads: list[ndarray], head_grads: list[Any] | None,
                 variables: list[ndarray] | None, retain_graph: bool, create_graph: bool,
                 train_mode: bool, allow_unused: bool = ...) -> list[ndarray] | None: ...
def _require_gil() -> None: ...
