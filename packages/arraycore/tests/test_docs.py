"""The backend guide (docs/backends.md) says what a backend author needs and gives commands that
work from a checkout; its table of checked overrides is the one arraycore uses."""

from __future__ import annotations

import re
from pathlib import Path

from arraycore import _checks

PACKAGE = Path(__file__).resolve().parents[1]
GUIDE = (PACKAGE / "docs" / "backends.md").read_text(encoding="utf-8")
NOXFILE = PACKAGE.parents[1] / "noxfile.py"


def test_the_install_commands_work_from_a_checkout() -> None:
    # arraycore is not on the package index: `pip install "arraycore[test]" ./mybackend` fails.
    assert 'pip install "arraycore[test]"' not in GUIDE
    assert 'pip install -e "packages/arraycore[test]" -e ../mybackend' in GUIDE
    command = "ARRAYCORE_BACKEND=mybackend ARRAYCORE_BACKEND_PACKAGE=../mybackend python3 -m nox"
    assert f"{command} -s conformance_selected" in GUIDE
    nox = NOXFILE.read_text(encoding="utf-8")
    assert "def conformance_selected(" in nox and "ARRAYCORE_BACKEND_PACKAGE" in nox


def test_the_guide_documents_what_a_backend_receives_and_provides() -> None:
    for topic in (
        "**The dtype wrapper.**",  # NumPy dtypes; a PyTorch-based backend needs a wrapper class
        "**Import lazily; `version()` may fail.**",
        "**The install hint.**",
        "### The dtypes each primitive receives",
        "**Unsigned 64-bit integers.**",
        "**slices arrive raw**",
        "negative steps included",
        "**Which overrides receive checked arguments.**",
        "Max pooling pads with **-inf**",
        "### Checks and their cost",
        "arraycore.checks(False)",
    ):
        assert topic in GUIDE, topic
    # the out= case of isnan and the bool inputs of the element-wise primitives are spelled out
    assert re.search(r"`isnan`, `isinf`: floating `x`, and, with `out=`", GUIDE)
    assert "`subtract`, `floor_divide`, `remainder`, `pow`: integer and floating, never bool" in (
        GUIDE
    )


def test_the_table_of_checked_overrides_is_arraycores() -> None:
    section = GUIDE.split("**Which overrides receive checked arguments.**")[1].split("\n\n`")[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    documented = {name for row in rows for name in re.findall(r"`([a-z_.]+)`", row.split("|")[1])}
    assert documented == set(_checks.GUARDS)


def test_the_host_path_page_lists_every_host_function() -> None:
    from arraycore import _host

    page = (PACKAGE / "docs" / "host-path.md").read_text(encoding="utf-8")
    for dotted in sorted(_host.HOST_FUNCTIONS):
        name = dotted.removeprefix("linalg.")
        assert f"`{dotted}`" in page or f"`{name}`" in page, dotted
