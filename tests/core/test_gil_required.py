"""Note [Threads] in fastgrad/_core/_engine.pyx: the engine relies on the GIL, so importing it on a
free-threaded CPython running without the GIL raises ImportError with a message that says
why and what to do."""

import sys
import sysconfig

import pytest

from fastgrad._core import _engine


def _free_threaded(monkeypatch, gil_enabled):
    real = sysconfig.get_config_var
    monkeypatch.setattr(sysconfig, "get_config_var",
                        lambda name: 1 if name == "Py_GIL_DISABLED" else real(name))
    monkeypatch.setattr(sys, "_is_gil_enabled", lambda: gil_enabled, raising=False)


def test_a_free_threaded_python_without_the_gil_is_refused(monkeypatch):
    _free_threaded(monkeypatch, gil_enabled=False)
    needs_gil = r"fastgrad needs the GIL.*Note \[Threads\].*PYTHON_GIL=1"
    with pytest.raises(ImportError, match=needs_gil):
        _engine._require_gil()


def test_a_free_threaded_python_that_reenabled_the_gil_is_fine(monkeypatch):
    _free_threaded(monkeypatch, gil_enabled=True)
    _engine._require_gil()


def test_a_python_without_is_gil_enabled_is_fine(monkeypatch):
    monkeypatch.setattr(sysconfig, "get_config_var", lambda name: None)
    monkeypatch.delattr(sys, "_is_gil_enabled", raising=False)
    _engine._require_gil()


def test_this_interpreter_passes_the_check():
    _engine._require_gil()          # it ran at import too, or this test would not be here
