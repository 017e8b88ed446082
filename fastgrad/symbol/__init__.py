"""Symbolic graphs: ``fastgrad.sym`` (MXNet's ``mx.sym``).

A :class:`Symbol` describes a computation on named arguments without running it. Build one
from variables and ops, or from recorded history with :func:`fastgrad.autograd.get_symbol`;
save it as JSON; bind it to values to get an :class:`fastgrad.executor.Executor` that runs it
forward and backward again and again.

Every op of the derivative table is available as ``fastgrad.sym.<op>`` (``sym.exp``,
``sym.matmul``, ...), and every public composition of ``fastgrad.np``/``fastgrad.npx`` as
``fastgrad.sym.np.<f>``/``fastgrad.sym.npx.<f>`` (also ``fastgrad.sym.<f>`` when the name is
not an op of the table). MXNet 1.x's layer operators (``sym.FullyConnected``,
``sym.BatchNorm``, ``sym.SoftmaxOutput``, ...) are there under their MXNet names, with MXNet's
parameters, automatic weight variables and auxiliary states (Note [MXNet 1.x operators] in
``_legacy.py``); ``tojson``/``load`` read and write MXNet's JSON (Note [MXNet JSON] in
``_mxnet_json.py``).

Examples
--------
>>> import fastgrad as mx
>>> x = mx.sym.var('x')
>>> y = mx.sym.exp(x, name='e') * 2
>>> y.list_arguments()
['x']
>>> mx.sym.exp(x, name='e').list_outputs()
['e_output']
"""

from fastgrad.symbol._graph import Symbol
from fastgrad.symbol._api import var, Variable, Group, const, symbol_op, op_names, resolve
from fastgrad.symbol._api import np_ns as np, npx_ns as npx
from fastgrad.symbol._json import load_json, fromjson, load
from fastgrad.symbol._history import from_history as _from_history
from fastgrad.symbol._optimize import optimize
from fastgrad.symbol._attribute import AttrScope
from fastgrad.symbol import name

__all__ = ["Symbol", "var", "Variable", "Group", "const", "load_json", "fromjson", "load",
           "optimize", "np", "npx", "AttrScope"]


def __getattr__(attr):
    # ``fastgrad.sym.<op>``: resolved on use, so ops added to the table appear here.
    if attr.startswith("__"):
        raise AttributeError(attr)
    return resolve(attr)


def __dir__():
    return sorted(set(globals()) | set(op_names()))
