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
    arrays, model = _snippets("getting-started.md")
    exec(compile(arrays, "getting-started.md", "exec"), {})
    assert capsys.readouterr().out.split("\n")[:2] == ["[ 5. 50.]", "(2, 3)"]
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
