"""The default install is not a silent trap: where the ``cpu`` extra's wheels exist and the
NumPy backend runs without them, ``check_cpu_extra`` (which nnlayers' ``fit`` calls) warns
once per process with the measured factor and the install command, and ``arraycore info``
prints the same advice; a part switched off on purpose, another backend or
``ARRAYCORE_CPU_EXTRA_ADVICE=0`` keep it quiet."""

from __future__ import annotations

import io
import warnings

import pytest

import arraycore
from arraycore import _cpu_extra
from arraycore.errors import PerformanceWarning


@pytest.fixture
def without_extra(monkeypatch):
    monkeypatch.setattr(_cpu_extra, "missing", lambda: ["oneDNN", "numba"])
    monkeypatch.setattr(_cpu_extra, "wheels_exist", lambda: True)
    monkeypatch.setattr(_cpu_extra, "_warned", False)
    monkeypatch.delenv(_cpu_extra.ENV_ADVICE, raising=False)


def test_the_first_check_warns_once_with_the_factor_and_the_command(without_extra) -> None:
    with pytest.warns(PerformanceWarning) as caught:
        assert arraycore.check_cpu_extra(arraycore.namespace("numpy"))
    text = str(caught[0].message)
    assert 'pip install "arraycore[cpu]"' in text and "oneDNN and numba" in text
    assert "1.63x -> 0.86x" in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not arraycore.check_cpu_extra()  # once per process


def test_quiet_when_silenced_or_on_another_backend(without_extra, monkeypatch) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert not arraycore.check_cpu_extra(arraycore.namespace("tiny"))
        monkeypatch.setenv(_cpu_extra.ENV_ADVICE, "0")
        assert not arraycore.check_cpu_extra()


def test_parts_switched_off_on_purpose_are_not_missing(monkeypatch) -> None:
    monkeypatch.setenv("ARRAYCORE_ONEDNN", "0")
    monkeypatch.setenv("ARRAYCORE_NUMBA", "0")
    assert _cpu_extra.missing() == []


def test_arraycore_info_gives_the_advice(without_extra) -> None:
    from arraycore.__main__ import info

    out = io.StringIO()
    info(out)
    assert "numpy: the NumPy backend runs without oneDNN and numba" in out.getvalue()
