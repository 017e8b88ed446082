"""Gluon's activation layers (MXNet 1.9.1's ``gluon.nn.activations``).

Each layer computes with MXNet 1.x's operators through ``F`` (``mx.nd`` imperatively,
``mx.sym`` when traced): ``Activation`` with ``F.Activation``, the leaky family with
``F.LeakyReLU``, ``Swish``/``SiLU`` as ``x * sigmoid(beta * x)``.
"""

from fastgrad import initializer
from fastgrad.gluon.block import HybridBlock

__all__ = ["Activation", "LeakyReLU", "PReLU", "ELU", "SELU", "GELU", "Swish", "SiLU"]


class Activation(HybridBlock):
    """An activation function applied elementwise: ``'relu'``, ``'sigmoid'``, ``'tanh'``,
    ``'softrelu'``, ``'softsign'`` (and ``'log_sigmoid'``, ``'gelu'``, ``'silu'``).

    Examples
    --------
    >>> import fastgrad as mx
    >>> from fastgrad.gluon import nn
    >>> nn.Activation('relu')(mx.nd.array([-1.0, 2.0]))
    <BLANKLINE>
    [0. 2.]
    <NDArray 2 @cpu(0)>
    """

    def __init__(self, activation, **kwargs):
        self._act_type = activation
        super().__init__(**kwargs)

    def _alias(self):
        return self._act_type

    def hybrid_forward(self, F, x):
        return F.Activation(x, act_type=self._act_type, name="fwd")

    def __repr__(self):
        return "%s(%s)" % (self.__class__.__name__, self._act_type)


class LeakyReLU(HybridBlock):
    """``x`` where positive, ``alpha * x`` elsewhere (``alpha >= 0``)."""

    def __init__(self, alpha, **kwargs):
        assert alpha >= 0, "Slope coefficient for LeakyReLU must be no less than 0."
        super().__init__(**kwargs)
        self._alpha = alpha

    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="leaky", slope=self._alpha, name="fwd")

    def __repr__(self):
        return "%s(%s)" % (self.__class__.__name__, self._alpha)


class PReLU(HybridBlock):
    """Leaky ReLU with a learned slope ``alpha`` (parameter ``<prefix>alpha`` of shape
    ``(in_channels,)``, broadcast along axis 1; initialised to 0.25)."""

    def __init__(self, alpha_initializer=initializer.Constant(0.25), in_channels=1, **kwargs):
        super().__init__(**kwargs)
        with self.name_scope():
            self.alpha = self.params.get("alpha", shape=(in_channels,), init=alpha_initializer)

    def hybrid_forward(self, F, x, alpha):
        return F.LeakyReLU(x, gamma=alpha, act_type="prelu", name="fwd")


class ELU(HybridBlock):
    """``x`` where positive, ``alpha * (exp(x) - 1)`` elsewhere."""

    def __init__(self, alpha=1.0, **kwargs):
        super().__init__(**kwargs)
        self._alpha = alpha

    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="elu", slope=self._alpha)


class SELU(HybridBlock):
    """The scaled exponential linear unit (Klambauer et al., 2017)."""

    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="selu", name="fwd")


class GELU(HybridBlock):
    """The Gaussian error linear unit ``x * Phi(x)`` (exact, with ``erf``)."""

    def hybrid_forward(self, F, x):
        return F.LeakyReLU(x, act_type="gelu", name="fwd")


class Swish(HybridBlock):
    """``x * sigmoid(beta * x)`` (Ramachandran et al., 2017)."""

    def __init__(self, beta=1.0, **kwargs):
        super().__init__(**kwargs)
        self._beta = beta

    def hybrid_forward(self, F, x):
        return x * F.sigmoid(self._beta * x)


class SiLU(Swish):
    """``x * sigmoid(x)``: ``Swish`` with ``beta=1`` (MXNet 2's ``nn.SiLU``; MXNet 1.9.1 has
    only ``Swish``)."""

    def __init__(self, **kwargs):
        super().__init__(beta=1.0, **kwargs)
