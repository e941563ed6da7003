"""The walkthrough of docs/backends.md is a complete backend of at most 150 lines (#45).

Its Python blocks, in order, are the file ``mybackend.py``; its TOML block is the
``pyproject.toml`` beside it. These tests write both as an installed distribution would be laid
out (the module and a ``.dist-info`` with the entry point, on ``PYTHONPATH``), so arraycore
discovers the backend through ``importlib.metadata`` as it discovers a third party's, and run
the whole conformance kit on it with the command the page gives. The page states the file's
length; the count is every line of the file (blank lines, comments and docstrings included).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]
ROOT = PACKAGE.parents[1]
GUIDE = (PACKAGE / "docs" / "backends.md").read_text(encoding="utf-8")
HEADING = "## The walkthrough: a complete backend\n"
#: The bound the page promises (tinygrad's device backends are about 130 lines).
MOST_LINES = 150
#: The command of the page's section 5, run as it is written there.
KIT = "python -m pytest --pyargs arraycore.testing.conformance --arraycore-backend=mybackend"


def walkthrough() -> str:
    """The walkthrough section of the page, up to the next section."""
    assert HEADING in GUIDE, f"docs/backends.md has no section {HEADING.strip()!r}"
    return GUIDE.split(HEADING, 1)[1].split("\n## ", 1)[0]


def fenced(section: str, language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", section, re.DOTALL | re.MULTILINE)


def module_source() -> str:
    """The Python blocks joined as the page says: two blank lines before a block that starts at
    the left margin (a new class or table), one before an indented block (the class goes on)."""
    source = ""
    for block in fenced(walkthrough(), "python"):
        if source:
            source += "\n" if block.startswith(" ") else "\n\n"
        source += block
    return source


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A site folder holding ``mybackend.py`` and the metadata pip would write for it."""
    (pyproject,) = fenced(walkthrough(), "toml")
    project = tomllib.loads(pyproject)["project"]
    site = tmp_path_factory.mktemp("site")
    (site / "mybackend.py").write_text(module_source(), encoding="utf-8")
    info = site / f"{project['name']}-{project['version']}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n",
        encoding="utf-8",
    )
    entry_points = "".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in points.items())
        for group, points in project["entry-points"].items()
    )
    (info / "entry_points.txt").write_text(entry_points, encoding="utf-8")
    return site


def run_with(site: Path, *args: str, timeout: float) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARRAYCORE_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=timeout
    )


def test_the_backend_is_at_most_150_lines_and_the_page_says_how_many() -> None:
    lines = len(module_source().splitlines())
    assert lines <= MOST_LINES, f"the walkthrough's backend is {lines} lines, over {MOST_LINES}"
    stated = re.search(r"the file\s+`mybackend\.py`,\s+(\d+)\s+lines", walkthrough())
    assert stated, "the walkthrough no longer says how long its file is"
    assert int(stated[1]) == lines, f"the page says {stated[1]} lines; the file is {lines}"


def test_the_backend_is_one_module_of_its_own() -> None:
    source = module_source()
    compile(source, "mybackend.py", "exec")
    # A stranger's backend: arraycore's public modules only, and a protocol version declared.
    imports = re.findall(r"^(?:from|import) ([\w.]+)", source, re.MULTILINE)
    assert set(imports) <= {"__future__", "typing", "numpy", "arraycore", "arraycore.backend"}
    assert "protocol_version = (1, 1)" in source


def test_arraycore_discovers_it_through_its_entry_point(installed: Path) -> None:
    code = (
        "import arraycore as ac\n"
        "from arraycore import _registry\n"
        "print(_registry.entry_points()['mybackend'].value)\n"
        "with ac.use('mybackend'):\n"
        "    x = ac.asarray([[1.0, 2.0], [3.0, 4.0]])\n"
        "    y = ac.sum(ac.nn.softmax(x @ x.mT, axis=-1), axis=-1)\n"
        "print(type(x).__name__, ac.to_numpy(y).round(6).tolist(), float(ac.log2(x)[1, 1]))\n"
    )
    result = run_with(installed, "-c", code, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[:2] == ["mybackend:MyBackend", "MyArray [1.0, 1.0] 2.0"]


def test_the_conformance_kit_passes_on_it(installed: Path) -> None:
    assert KIT in GUIDE  # the command of section 5, which the walkthrough's end quotes
    result = run_with(installed, *KIT.split()[1:], "-q", "-p", "no:cacheprovider", timeout=900)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-3000:]
    # A backend that cannot load or run is skipped by the kit, with a reason: make sure it ran.
    counts = {kind: int(n) for n, kind in re.findall(r"(\d+) (passed|skipped|failed)", summary)}
    assert counts.get("passed", 0) >= 1000 and counts.get("skipped", 0) <= 10, summary
