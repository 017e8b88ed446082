"""MXNet's special values in reshape targets, turned into plain shapes.

Note [Reshape codes]
~~~~~~~~~~~~~~~~~~~~
MXNet's reshape reads a target shape left to right against the input's dimensions:

=====================  ==========================  ========================================
legacy ``nd.reshape``  ``npx.reshape`` (MXNet 2)   meaning
=====================  ==========================  ========================================
``0``                  ``-2``                      copy this input dimension
``-1``                 ``-1``                      infer this dimension (at most one)
``-2``                 ``-4``                      copy all remaining input dimensions
``-3``                 ``-5``                      merge two consecutive input dimensions
``-4, a, b``           ``-6, a, b``                split one input dimension into ``a, b``
                                                   (one of them may be ``-1``)
(none)                 ``-3``                      drop this input dimension, which must be 1
=====================  ==========================  ========================================

and a positive value is a new dimension that consumes one input dimension. ``reverse=True``
reads both shapes right to left. The result is an ordinary shape that the table's ``reshape``
op receives, so the special values cost nothing once resolved. MXNet infers ``-1`` at the
position of the code in the target; fastgrad infers it where it lands in the result, which is
the same whenever MXNet's answer is a valid shape.
"""

from math import prod as _prod

from fastgrad.base import MXNetValueError

__all__ = ["legacy_shape", "npx_shape"]

_LEGACY = {0: "copy", -1: "infer", -2: "rest", -3: "merge", -4: "split"}
_NPX = {-1: "infer", -2: "copy", -3: "skip", -4: "rest", -5: "merge", -6: "split"}


def legacy_shape(ishape, target, reverse=False, op="nd.reshape"):
    """The shape ``target`` (legacy codes ``0, -1, -2, -3, -4``) means for input ``ishape``."""
    return _resolve(ishape, target, reverse, op, _LEGACY)


def npx_shape(ishape, target, reverse=False, op="npx.reshape"):
    """The shape ``target`` (MXNet 2 codes ``-1`` to ``-6``) means for input ``ishape``."""
    return _resolve(ishape, target, reverse, op, _NPX)


def _resolve(ishape, target, reverse, op, codes):
    if isinstance(target, int):
        target = (target,)
    target = [int(t) for t in target]
    dims = list(ishape)
    if reverse:
        dims.reverse()
        target.reverse()

    def fail(why):
        return MXNetValueError("%s: cannot reshape an array of shape %s to %s%s: %s"
                               % (op, tuple(ishape), tuple(target[::-1] if reverse else target),
                                  " (reverse=True)" if reverse else "", why))

    def take():
        nonlocal src
        if src >= len(dims):
            raise fail("the target uses more dimensions than the input has")
        src += 1
        return dims[src - 1]

    out, src, infer, i = [], 0, None, 0
    while i < len(target):
        code = target[i]
        kind = codes.get(code) if code <= 0 else None
        if kind is None and code < 0:
            raise fail("%d is not a reshape code" % code)
        if kind is None:                      # a new dimension (npx: 0 too)
            out.append(code)
            src += 1
        elif kind == "copy":
            out.append(take())
        elif kind == "infer":
            if infer is not None:
                raise fail("only one dimension can be inferred (-1)")
            infer = len(out)
            out.append(1)
            src += 1
        elif kind == "rest":
            out.extend(dims[src:])
            src = len(dims)
        elif kind == "merge":
            out.append(take() * take())
        elif kind == "skip":
            if take() != 1:
                raise fail("%d drops an input dimension only if its size is 1" % code)
        else:                                 # split
            if i + 2 >= len(target):
                raise fail("%d must be followed by the two sizes to split into" % code)
            d0 = take()
            d1, d2 = target[i + 1], target[i + 2]
            i += 2
            if d1 == -1 and d2 == -1:
                raise fail("both split sizes cannot be -1")
            if d1 == -1:
                d1 = d0 // d2 if d2 else 0
            if d2 == -1:
                d2 = d0 // d1 if d1 else 0
            if d1 * d2 != d0:
                raise fail("cannot split a dimension of %d into %d x %d" % (d0, d1, d2))
            out.extend((d1, d2))
        i += 1
    size = _prod(ishape)
    if infer is not None:
        rest = _prod(out[:infer] + out[infer + 1:])
        if rest == 0 or size % rest:
            raise fail("the size %d is not a multiple of %d" % (size, rest))
        out[infer] = size // rest
    if _prod(out) != size:
        raise fail("the sizes differ (%d and %d)" % (size, _prod(out)))
    if reverse:
        out.reverse()
    return tuple(out)
