"""A typed program with planted mistakes; ``mypy`` must report every line marked ``MISTAKE``.

``tests/package/test_typing.py`` runs mypy over this file with the installed fastgrad and checks
that each marked line, and no other, has an error: the stubs give the ops and functions real
signatures and result types instead of ``Any``. The program is never run.
"""

from __future__ import annotations

import fastgrad as mx
from fastgrad import autograd, np, npx


def mistakes(x: np.ndarray) -> None:
    np.sinn(x)  # MISTAKE: no such function
    np.sin(x, x)  # MISTAKE: sin takes one array
    np.maximum(x)  # MISTAKE: maximum takes two arrays
    npx.relu(x, alpha=0.1)  # MISTAKE: relu has no parameter alpha
    npx.softmax(x, axes=0)  # MISTAKE: the parameter is axis
    label: str = np.exp(x)  # MISTAKE: exp returns an array
    count: int = np.add(x, 1)  # MISTAKE: add returns an array
    np.save("weights.npy", x).shape  # MISTAKE: save returns None
    x.attach_grad(grad_req="sometimes")  # MISTAKE: not a grad_req
    mx.sym.expp(mx.sym.var("x"))  # MISTAKE: no such op
    first, second = np.modf(x)
    with autograd.record():
        total: np.ndarray = first + second
    print(label, count, total)
