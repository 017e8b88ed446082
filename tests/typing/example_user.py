"""A small typed program written against fastgrad, as a user would; ``mypy`` must accept it.

``tests/package/test_typing.py`` runs mypy over this file with the installed fastgrad.
"""

from __future__ import annotations

import numpy

import fastgrad as mx
from fastgrad import autograd, np


def loss(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    pred = x @ w
    return ((pred - y) ** 2).mean()


def train_step(w: np.ndarray, x: np.ndarray, y: np.ndarray, lr: float) -> float:
    w.attach_grad(grad_req="write")
    with autograd.record():
        value = loss(w, x, y)
    value.backward()
    grad = w.grad
    assert grad is not None
    with autograd.pause():
        w -= lr * grad
    return float(value)


def second_derivative(x: np.ndarray) -> np.ndarray:
    x.attach_grad()
    with autograd.record():
        y = np.sin(x)
        dy = autograd.grad(y, x, create_graph=True)[0]
    return autograd.grad(dy, x)[0]


class Square(autograd.Function):
    def forward(self, x: np.ndarray) -> np.ndarray:
        self.save_for_backward(x)
        return x * x

    def backward(self, dy: np.ndarray) -> np.ndarray:
        (x,) = self.saved_tensors
        return 2 * x * dy


def main() -> None:
    w = np.zeros((3,))
    x = np.array(numpy.eye(3))
    y = np.array([1.0, 2.0, 3.0])
    first: float = train_step(w, x, y, 0.5)
    shape: tuple[int, ...] = w.shape
    data: numpy.ndarray = w.asnumpy()
    recording: bool = autograd.is_recording()
    print(first, shape, data, recording, mx.__version__)
    print(second_derivative(np.array([0.5])))
    print(autograd.jacobian(lambda t: t * t, np.array([1.0, 2.0])))


if __name__ == "__main__":
    main()
