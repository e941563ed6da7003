"""The documentation site's pages: their Python snippets run as written, and every layer is in
the layer catalogue."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

import nnlayers.layers

DOCS = Path(__file__).parents[3] / "docs"


def _snippets(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(encoding="utf-8"), re.S)


def test_getting_started_runs_and_prints_what_it_says(tmp_path, monkeypatch, capsys) -> None:
    pytest.importorskip("sklearn", reason="the first model trains on scikit-learn's digits")
    monkeypatch.chdir(tmp_path)
    arrays, random, model = _snippets("getting-started.md")
    exec(compile(arrays, "getting-started.md", "exec"), {})
    assert capsys.readouterr().out.split("\n")[:2] == ["[ 5. 50.]", "(2, 3)"]
    exec(compile(random, "getting-started.md", "exec"), {})
    assert capsys.readouterr().out.split("\n")[:2] == ["(3, 4) (2,)", "int64"]
    exec(compile(model, "getting-started.md", "exec"), {})
    assert capsys.readouterr().out.split() == ["1370", "True"]


def test_devices_snippet_runs(capsys) -> None:
    (snippet,) = _snippets("devices.md")
    exec(compile(snippet, "devices.md", "exec"), {})
    assert capsys.readouterr().out.strip() == "numpy"


def test_every_layer_is_in_the_catalogue() -> None:
    page = (DOCS / "layers.md").read_text(encoding="utf-8")
    for name in nnlayers.layers.__all__:
        obj = getattr(nnlayers.layers, name)
        if inspect.isclass(obj) and name not in ("Layer", "Recurrent", "Linear"):
            assert f"nnlayers.layers.{name}`" in page, f"{name} is missing from docs/layers.md"


TRAINING = Path(__file__).parents[1] / "docs" / "training.md"


def _section(title: str) -> str:
    text = TRAINING.read_text(encoding="utf-8")
    return text.split(title, 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]


def _run_section(title: str, capsys: pytest.CaptureFixture[str]) -> str:
    namespace: dict = {}
    blocks = re.findall(r"^ *```python\n(.*?)^ *```", _section(title), re.S | re.M)
    assert blocks, title
    for block in blocks:
        lines = block.splitlines()
        indent = min(len(ln) - len(ln.lstrip()) for ln in lines if ln.strip())
        code = "\n".join(ln[indent:] for ln in lines)
        exec(compile(code, str(TRAINING), "exec"), namespace)
    return capsys.readouterr().out


def test_the_callback_snippets_run_in_order(tmp_path, monkeypatch, capsys) -> None:
    pytest.importorskip("tensorboardX", reason="one snippet writes TensorBoard logs")
    monkeypatch.chdir(tmp_path)
    _run_section("### Callbacks", capsys)
    assert list(tmp_path.iterdir())  # the checkpoint, CSV and log files were written


def test_the_fine_tuning_snippet(tmp_path, monkeypatch, capsys) -> None:
    pytest.importorskip("sklearn", reason="the snippet trains on scikit-learn's digits")
    monkeypatch.chdir(tmp_path)
    out = _run_section("### Fine-tuning: pretrained weights, frozen layers", capsys)
    assert out.splitlines() == [
        "['new_head/bias', 'new_head/weight'] ['head/bias', 'head/weight']",
        "True",
    ]


def test_the_augmentation_snippet(capsys) -> None:
    assert _run_section("## Data augmentation", capsys).strip() == "(128, 3, 32, 32)"


def test_the_custom_loop_snippet(capsys) -> None:
    out = _run_section("### Custom loops, PyTorch's way", capsys)
    assert out.splitlines() == ["True", "(3,)"]


def test_the_any_length_and_generation_snippet(capsys) -> None:
    out = _run_section("### Sequences of any length, and generating text", capsys)
    assert out.splitlines() == ["(2, 5)", "the cat sat on the mat."]


def test_the_writing_a_layer_snippet_prints_what_the_page_says(capsys) -> None:
    out = _run_section("### Writing a layer", capsys)
    printed = _section("### Writing a layer").split("prints\n\n```\n", 1)[1].split("```", 1)[0]
    assert out == printed
