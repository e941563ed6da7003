"""The nnlayers README's example runs as written and does what it says."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

README = Path(__file__).parents[1] / "README.md"


def test_the_first_model_example_runs(tmp_path, monkeypatch, capsys) -> None:
    pytest.importorskip("sklearn", reason="the example's digits come with scikit-learn")
    text = README.read_text(encoding="utf-8")
    first, more = re.findall(r"```python\n(.*?)```", text, re.S)
    monkeypatch.chdir(tmp_path)
    namespace: dict = {}
    exec(compile(first, str(README), "exec"), namespace)
    printed = capsys.readouterr().out
    assert "Total params: 2,794" in printed and "'accuracy': 0.9" in printed
    model, conv = namespace["model"], namespace["conv"]
    assert model.epoch == 8 and not conv.trainable
    assert (tmp_path / "digits.safetensors").is_file()
    test = namespace["test"]
    assert model.evaluate(test.inputs, test.targets)["accuracy"] > 0.9
    assert np.isfinite(conv.weight.numpy()).all()
    pytest.importorskip("onnxruntime", reason="the second example exports to ONNX")
    exec(compile(more, str(README), "exec"), namespace)
    assert model.epoch > 8 and conv.trainable
    rows = (tmp_path / "history.csv").read_text(encoding="utf-8").splitlines()
    assert rows[0].startswith("epoch,") and "lr" in rows[0] and len(rows) == model.epoch - 8 + 1
    assert (tmp_path / "digits.onnx").stat().st_size > 1000


def test_the_checkout_install_command_is_the_one_ci_runs() -> None:
    """``nox -s checkout_install`` runs the command this README gives; keep them one."""
    text = README.read_text(encoding="utf-8")
    assert "pip install -e packages/arraycore -e packages/nnlayers" in text
    noxfile = (Path(__file__).parents[3] / "noxfile.py").read_text(encoding="utf-8")
    assert "packages/nnlayers/README.md" in noxfile and "def checkout_install" in noxfile
