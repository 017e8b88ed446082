"""detect_anomaly names the op and the forward line; without it NaN gradients pass through."""

import os
import sys

import numpy as onp
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from fastgrad import autograd, np  # noqa: E402

from _helpers import variable as var  # noqa: E402


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_detect_anomaly_names_the_op_and_the_forward_line():
    x = var([0.0, 1.0])
    with autograd.detect_anomaly():
        with autograd.record():
            y = np.sqrt(x).sum()  # d sqrt(0) = inf
        with pytest.raises(FloatingPointError, match="sqrt") as info:
            y.backward()
    assert os.path.basename(__file__) in str(info.value)


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
def test_without_anomaly_detection_nan_gradients_pass_through():
    x = var([0.0, 1.0])
    with autograd.record():
        y = np.sqrt(x).sum()
    y.backward()
    assert onp.isinf(x.grad.asnumpy()[0])
    assert not autograd.is_anomaly_enabled()
