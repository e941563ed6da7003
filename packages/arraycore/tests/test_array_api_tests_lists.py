"""The expected-failure lists of the array-api-tests session (nox -s array_api_tests): every
entry has its reason, and arraycore on NumPy expects no failure NumPy itself does not have."""

from __future__ import annotations

from pathlib import Path

LISTS = Path(__file__).resolve().parent / "array-api-tests"


def _entries(name: str) -> list[str]:
    path = LISTS / name
    if not path.exists():
        return []
    return [line.strip() for line in path.read_text().splitlines() if line.startswith("array_api")]


def test_every_entry_follows_a_reason() -> None:
    for path in sorted(LISTS.glob("*.txt")):
        lines = path.read_text().splitlines()
        reason = False
        for number, line in enumerate(lines, 1):
            if line.startswith("#"):
                reason = True
            elif not line.strip():
                reason = False
            else:
                assert line.startswith("array_api_tests/"), f"{path.name}:{number}: {line!r}"
                assert reason, f"{path.name}:{number}: {line} has no reason above it"


def test_arraycore_on_numpy_expects_only_numpys_own_failures() -> None:
    numpy = set(_entries("xfails-numpy-reference.txt"))
    ours = _entries("xfails-arraycore.txt") + _entries("xfails-numpy.txt")
    assert ours and set(ours) <= numpy, sorted(set(ours) - numpy)
    assert len(ours) <= len(numpy)


def test_backend_lists_add_only_their_own_entries() -> None:
    shared = set(_entries("xfails-arraycore.txt"))
    for path in LISTS.glob("xfails-*.txt"):
        if path.name not in ("xfails-arraycore.txt", "xfails-numpy-reference.txt"):
            assert not shared & set(_entries(path.name)), path.name
