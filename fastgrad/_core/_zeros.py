"""Gradients that are zero, and what the engine does with them (internal).

Note [Zero gradients]
~~~~~~~~~~~~~~~~~~~~~
A gradient that is absent or identically zero is never an array of zeros inside the engine:

* On an edge it is *nothing*: a rule returns ``None`` for an input, a node that receives no
  gradient does not run its rule, and a variable that is reached but receives nothing gets
  zeros only when it is read (``.grad``, the list ``grad`` returns).
* A missing gradient of one output of a multi-output op (``eigh``'s eigenvectors when only the
  eigenvalues are used) is a ``Filled`` zero (Note [Filled gradients]): no memory, and a
  multiply by it is again a ``Filled`` zero, so ``0 * inf`` in a rule gives zero, not NaN.

Differentiability is a property of outputs and their dtypes:

* An op whose output is bool (comparisons, ``isnan``), or integer while some input with
  history is not (``astype('int64')`` of a float, a sum with ``dtype='int64'``), never carries
  a gradient: the derivative of a cast to an integer type is zero. Integer ops on integer
  variables do carry gradients, as in MXNet (``k * k`` for an int32 variable ``k``). An op
  whose derivative is zero almost everywhere (``floor``, ``ceil``, ``trunc``, ``rint``,
  ``round``, ``sign``, ``floor_divide``, ``heaviside``) has a zero rule. Both are still
  recorded, as *zero nodes* (``Node.carries_gradient`` is False): every input with
  history is a parent, nothing is saved, the rule never runs, and no consumer computes a
  gradient for them (the engine leaves them out of the rule's ``needs`` mask). They exist so
  that the heads still *reach* the variables behind them.
* A cast of an integer *variable* to float passes gradients, cast to the variable's integer
  dtype (MXNet).

What "reached" means, and so where ``allow_unused`` starts: a variable is reached when a
recorded path leads from a head to it, through any ops, zero nodes included. A reached
variable whose every path carries a zero gets zeros; a variable with no path at all is an error
that names it unless ``grad(..., allow_unused=True)`` asks for zeros. A head with no history at
all (computed outside ``record()``, from arrays without ``attach_grad``, or after leaving the
graph through ``numpy.asarray``/``detach``) is an error too.

Under ``create_graph=True`` the gradients ``grad`` returns are functions of what the heads
depended on, so each is tied to the variables the pass reached. One that came out constant
(the derivative of ``x * x`` differentiated twice, ``relu`` twice) gets a zero node whose
parents are those variables; one with history (``grad(x * z, x)`` is ``z``) gets a node that
passes the gradient to that history and adds zero edges to the variables. Differentiating it
again then gives zeros for a variable it is constant in (``x`` here), to any order, rather
than a "not reached" error.
"""


class ConstantDerivative:
    """The op of the zero node that ties a constant gradient returned under ``create_graph``
    to the variables its heads depended on (see the Note). Its rule never runs; it keeps the
    value, which ``get_symbol`` stores as a constant."""

    __slots__ = ("value",)
    name = "constant_derivative"

    def __init__(self, value):
        self.value = value

    def node_backward(self, node, g, needs, create_graph):
        return (None,) * len(node.parents_list())

    def release(self):
        pass

    def __repr__(self):
        return "<fastgrad op constant_derivative>"



class GradientOf:
    """The op of the node that ties a gradient returned under ``create_graph`` to the
    variables its heads depended on (see the Note): the gradient flows to input 0, the
    variables get zero edges."""

    __slots__ = ()
    name = "gradient_of"

    def node_backward(self, node, g, needs, create_graph):
        return (g,) + (None,) * (len(node.parents_list()) - 1)

    def release(self):
        pass

    def __repr__(self):
        return "<fastgrad op gradient_of>"


GRADIENT_OF = GradientOf()


class NoGradientOutput:
    """The op of the zero node between a multi-output node and one of its outputs that
    carries no gradient (``slogdet``'s sign, an integer output): it keeps the reach, and the
    producing node sees a symbolic zero for that output. ``get_symbol`` reads it as the
    output itself."""

    __slots__ = ()
    name = "no_gradient_output"

    def node_backward(self, node, g, needs, create_graph):
        return (None,)

    def release(self):
        pass

    def __repr__(self):
        return "<fastgrad op no_gradient_output>"


NO_GRADIENT_OUTPUT = NoGradientOutput()


class ZeroResult:
    """The op of the zero node recorded for an integer or bool result that no table op makes
    (``argmax``, ``nonzero``, ``isclose``...): it keeps the reach to the inputs, and
    ``get_symbol`` stores the value as a constant."""

    __slots__ = ("name", "value")

    def __init__(self, name, value):
        self.name = name
        self.value = value

    def node_backward(self, node, g, needs, create_graph):
        return (None,) * len(node.parents_list())

    def release(self):
        pass

    def __repr__(self):
        return "<fastgrad op %s (no gradient)>" % self.name
