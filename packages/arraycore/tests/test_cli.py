"""``python -m arraycore info`` and the ``arraycore`` console script."""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys

import pytest


def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("ARRAYCORE_")}
    full_env.update(env or {})
    return subprocess.run(args, capture_output=True, text=True, env=full_env, timeout=120)


def test_info_lists_backends_devices_versions_and_active() -> None:
    result = run(sys.executable, "-m", "arraycore", "info")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "active: <arraycore namespace 'numpy'" in out
    assert "numpy: usable" in out
    assert "device numpy:cpu (host CPU)" in out
    assert "versions: numpy 2." in out
    assert "tiny: usable [arraycore-tiny 0.1.0]" in out
    # first-party backends that are absent say why and how to install them
    # (released: the extra; from this checkout: pip install -e of the package's folder)
    for name, hints in (
        ("cuda", ("arraycore[cuda12]", "packages/arraycore-cuda[cuda12]")),
        ("opencl", ("arraycore[opencl]", "packages/arraycore-opencl")),
    ):
        line = next(line for line in out.splitlines() if line.startswith(f"  {name}:"))
        if "NOT USABLE" in line:
            details = out.split(line, 1)[1].splitlines()[1:]
            block = list(itertools.takewhile(lambda d: d.startswith("    "), details))
            why = next(d for d in block if d.strip().startswith("why:"))
            assert any(hint in why for hint in hints) or "cannot run here" in why, why


def test_info_shows_the_environment_choice() -> None:
    result = run(sys.executable, "-m", "arraycore", "info", env={"ARRAYCORE_BACKEND": "tiny"})
    assert result.returncode == 0, result.stderr
    assert "active: <arraycore namespace 'tiny'" in result.stdout


def test_info_survives_an_unusable_selection() -> None:
    result = run(
        sys.executable, "-m", "arraycore", "info", env={"ARRAYCORE_BACKEND": "nosuchbackend"}
    )
    assert result.returncode == 1, result.stderr  # the selection cannot run: say so in the status
    assert "NOT USABLE: unknown backend 'nosuchbackend'" in result.stdout
    assert "the selected backend 'nosuchbackend' cannot run here" in result.stdout
    assert "$ARRAYCORE_BACKEND='nosuchbackend'" in result.stdout


def test_info_suggests_the_name_for_a_wrong_case() -> None:
    result = run(sys.executable, "-m", "arraycore", "info", env={"ARRAYCORE_BACKEND": "OpenCL"})
    assert result.returncode == 1, result.stderr
    assert "NOT USABLE: unknown backend 'OpenCL' (from $ARRAYCORE_BACKEND or use()). " in (
        result.stdout
    )
    assert "Did you mean 'opencl'?" in result.stdout


def test_info_says_when_the_environment_selects_nothing() -> None:
    result = run(sys.executable, "-m", "arraycore", "info")
    assert "$ARRAYCORE_BACKEND not set: numpy" in result.stdout
    assert "$ARRAYCORE_BACKEND='numpy'" not in result.stdout


def test_info_piped_into_head_ends_quietly() -> None:
    done = subprocess.run(
        f"{sys.executable} -m arraycore info | head -n 1",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.stdout.startswith("arraycore ")
    assert "Traceback" not in done.stderr and "BrokenPipeError" not in done.stderr


def test_info_shows_the_probe_reason_when_version_fails_too(monkeypatch) -> None:
    from importlib import metadata

    from arraycore import _registry
    from arraycore.__main__ import backend_report

    real = _registry.entry_points

    def with_extra() -> dict[str, metadata.EntryPoint]:
        found = real()
        found["noversion"] = metadata.EntryPoint(
            "noversion", "_broken_backends:NoVersionBackend", _registry.ENTRY_POINT_GROUP
        )
        return found

    monkeypatch.setattr(_registry, "entry_points", with_extra)
    row = next(r for r in backend_report() if r["name"] == "noversion")
    assert not row["usable"]
    assert "its library 'arraycore_library_that_does_not_exist' is missing" in row["reason"]
    assert row["version"].startswith("unknown (ModuleNotFoundError")


def test_conformance_command_runs_from_inside_the_checkout() -> None:
    """pytest gets a fresh interpreter, so the repo's filterwarnings=error meets no
    PytestAssertRewriteWarning about an arraycore imported before it."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "arraycore",
            "conformance",
            "tiny",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "test_info",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=root,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "PytestAssertRewriteWarning" not in done.stdout + done.stderr
    assert " passed" in done.stdout


def test_console_script_is_installed() -> None:
    script = shutil.which("arraycore", path=os.path.dirname(sys.executable))
    if script is None:
        pytest.skip("arraycore is not installed as a distribution in this environment")
    result = run(script, "info")
    assert result.returncode == 0, result.stderr
    assert "backends:" in result.stdout


def test_unknown_command_is_an_error() -> None:
    result = run(sys.executable, "-m", "arraycore", "frobnicate")
    assert result.returncode == 2
    assert "invalid choice" in result.stderr


def test_the_conformance_kit_fails_for_a_backend_name_that_does_not_exist(tmp_path) -> None:
    # A typo must not pass as a green run of 350 skipped tests.
    done = run(
        sys.executable,
        "-m",
        "pytest",
        "--pyargs",
        "arraycore.testing.conformance.test_info",
        "--arraycore-backend=nosuchbackend",
        "-p",
        "no:cacheprovider",
        "-q",
    )
    assert done.returncode != 0, done.stdout
    assert "cannot test backend 'nosuchbackend'" in done.stdout
