"""The README's demo: a small CNN on scikit-learn's digits reaches 97% held-out accuracy and
leaves a checkpoint and a PNG of its curves (this is also the digits training test)."""

from __future__ import annotations

import subprocess
import sys

from nnlayers import demo
from nnlayers.checkpoint import load_checkpoint


def test_the_demo_reaches_its_target_and_saves_its_files(tmp_path, capsys) -> None:
    assert demo.main(["--out", str(tmp_path), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "held-out accuracy" in out and "same predictions" in out
    accuracy = float(out.split("held-out accuracy ")[1].split("%")[0]) / 100
    assert accuracy >= demo.TARGET
    tensors, meta = load_checkpoint(tmp_path / "digits-cnn.safetensors")
    assert meta["epoch"] == 15 and "model/conv2d/weight" in tensors
    assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"


def test_the_demo_runs_as_a_module_with_help() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "nnlayers.demo", "--help"], capture_output=True, text=True
    )
    assert done.returncode == 0 and "--out" in done.stdout and "--epochs" in done.stdout
