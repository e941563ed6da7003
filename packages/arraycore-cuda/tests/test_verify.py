"""The offline GPU verification (``arraycore_cuda.verify``): its stages that need no GPU.

The GPU stages themselves run only on a GPU node; here the machinery around them (the one-line
answer without a GPU, the report, the wheelhouse and install checks, pytest counting, timeouts)
runs for real on this machine.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import subprocess
import sys
import threading
import time
import zipfile
from pathlib import Path

import pytest

import arraycore
import arraycore_cuda
from arraycore_cuda import _verify_core as core
from arraycore_cuda import verify

SCRIPT = Path(verify.__file__)


def run_verify(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300
    )


def context(tmp_path: Path, wheelhouse: Path | None = None) -> core.Context:
    return core.Context(
        python=sys.executable,
        out=tmp_path / "report",
        repo=None,
        wheelhouse=wheelhouse,
        site=tmp_path / "report" / "site-packages",
        deadline=time.monotonic() + 600,
        gpu=core.probe_gpu(),
    )


def test_without_a_gpu_it_says_so_in_one_line_and_exits_non_zero(tmp_path: Path) -> None:
    gpu = core.probe_gpu()
    if gpu.present:
        pytest.skip(f"this machine has a GPU ({gpu.devices}): the GPU stages would run")
    out = tmp_path / "report"
    done = run_verify("--out", str(out), "--no-wheelhouse")
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert "no NVIDIA GPU here" in lines[0] and gpu.reason in lines[0]
    report = json.loads((out / "report.json").read_text(encoding="utf-8"))
    stages = report["stages"]
    assert stages["imports"]["status"] == "passed"
    assert int(stages["imports"]["summary"].split()[0]) > 50
    versions = stages["versions"]["versions"]
    assert versions["arraycore"].startswith(arraycore.__version__ + " (")
    assert versions["arraycore-cuda"].startswith(arraycore_cuda.__version__ + " (")
    for name in verify.GPU_STAGES:
        assert stages[name]["status"] == "not run"
        assert gpu.reason in stages[name]["summary"]
    markdown = (out / "report.md").read_text(encoding="utf-8")
    assert "| imports | passed |" in markdown and "| nnlayers | not run |" in markdown


def test_a_module_that_fails_to_import_fails_the_imports_stage(tmp_path: Path) -> None:
    broken = tmp_path / "shadow" / "nnlayers"
    broken.mkdir(parents=True)
    (broken / "__init__.py").write_text("raise RuntimeError('broken on purpose')\n")
    ctx = context(tmp_path)
    ctx.site = tmp_path / "shadow"  # first on the children's path, as the offline install is
    result = verify.stage_imports(ctx, 120)
    assert result["status"] == "failed"
    assert any("broken on purpose" in failure for failure in result["failures"])


@pytest.mark.parametrize("package", ["numba", "llvmlite"])
def test_a_module_needing_an_absent_optional_extra_is_listed_not_failed(
    tmp_path: Path, package: str
) -> None:
    """The numba kernels need ``arraycore[numba]`` (numba and its code generator llvmlite),
    which the GPU wheelhouse leaves out: their module is named in the summary and the stage
    passes, whichever of the two it misses first."""
    absent = tmp_path / "shadow" / package
    absent.mkdir(parents=True)
    (absent / "__init__.py").write_text(
        f"raise ModuleNotFoundError(\"No module named '{package}'\", name='{package}')\n"
    )
    ctx = context(tmp_path)
    ctx.site = tmp_path / "shadow"
    result = verify.stage_imports(ctx, 120)
    assert result["status"] == "passed", result
    assert result["summary"].endswith(
        f"1 left out, their extra absent: arraycore.backends._numba_kernels (needs {package}, "
        "an optional extra)"
    ), result["summary"]


def test_unknown_stage_is_a_usage_error(tmp_path: Path) -> None:
    done = run_verify("--out", str(tmp_path), "--only", "imports,warp-drive")
    assert done.returncode == 2
    assert "unknown stage(s) warp-drive" in done.stderr and "conformance" in done.stderr


def test_pytest_stage_counts_failures_and_skips(tmp_path: Path) -> None:
    tests = tmp_path / "suite" / "test_sample.py"
    tests.parent.mkdir()
    tests.write_text(
        "import pytest\n"
        "def test_ok():\n    assert 1 + 1 == 2\n"
        "def test_bad():\n    assert 1 + 1 == 3, 'arithmetic'\n"
        "def test_skipped():\n    pytest.skip('needs two GPUs')\n"
    )
    result = core.pytest_stage(context(tmp_path), "sample", [str(tests)], 120)
    assert result["status"] == "failed"
    assert (result["passed"], result["failed"], result["skipped"]) == (1, 1, 1)
    assert len(result["failures"]) == 1 and "test_bad" in result["failures"][0]
    assert result["skip_reasons"] == {"needs two GPUs": 1}
    assert (tmp_path / "report" / "logs" / "sample.log").is_file()


def test_a_stage_past_its_timeout_is_killed_and_the_run_goes_on(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    start = time.monotonic()
    code = "import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); time.sleep(60)"
    run = ctx.run("sleepy", [sys.executable, "-c", code], timeout=2)
    assert run.timed_out and time.monotonic() - start < 30
    assert core.outcome(run, True, "slept")["status"] == "timeout"
    after = ctx.run("next", [sys.executable, "-c", "print('still here')"], timeout=60)
    assert after.rc == 0 and "still here" in after.output


def make_wheel(
    folder: Path, project: str, version: str, tag: str = "py3-none-any", requires: str = ""
) -> Path:
    """A small but real wheel: one module, its dist-info, and a file under .data/purelib."""
    module = project.replace("-", "_")
    path = folder / f"{module}-{version}-{tag}.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{module}/__init__.py", f"NAME = {project!r}\n")
        archive.writestr(f"{module}-{version}.data/purelib/{module}_extra.py", "EXTRA = 1\n")
        info = f"{module}-{version}.dist-info"
        archive.writestr(
            f"{info}/METADATA",
            f"Metadata-Version: 2.1\nName: {project}\nVersion: {version}\n"
            + (f"Requires-Dist: {requires}\n" if requires else ""),
        )
        archive.writestr(
            f"{info}/entry_points.txt", f"[arraycore.backends]\n{module} = {module}:NAME\n"
        )
        archive.writestr(
            f"{info}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: {tag}\n"
        )
        archive.writestr(f"{info}/RECORD", "")
    return path


def write_manifest(folder: Path, wheels: list[Path]) -> None:
    entries = []
    for wheel in wheels:
        project = wheel.name.split("-")[0].replace("_", "-")
        entries.append(
            {
                "file": wheel.name,
                "project": project,
                "version": wheel.name.split("-")[1],
                "role": "ours" if project in verify.OURS else "runtime",
                "import": project.replace("-", "_"),
                "bytes": wheel.stat().st_size,
                "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
            }
        )
    manifest = {"python": "3.12", "platform": "manylinux_2_28_x86_64", "cuda": "13"}
    (folder / verify.MANIFEST).write_text(json.dumps({**manifest, "wheels": entries}))


def test_wheelhouse_stage_checks_hashes_tags_and_completeness(tmp_path: Path) -> None:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    wheels = [make_wheel(house, name, "0.1.0") for name in verify.OURS]
    write_manifest(house, wheels)
    ctx = context(tmp_path, house)
    good = verify.stage_wheelhouse(ctx, 60)
    assert good["status"] == "passed", good
    assert good["bytes"] == sum(w.stat().st_size for w in wheels)

    here = f"cp{sys.version_info.major}{sys.version_info.minor}"
    other = "cp39" if here != "cp39" else "cp310"
    foreign = make_wheel(house, "cuda-bindings", "13.5.0", f"{other}-{other}-manylinux_2_28_x86_64")
    write_manifest(house, [*wheels, foreign])
    with zipfile.ZipFile(wheels[0], "a") as archive:  # tampered after the manifest was written
        archive.writestr("arraycore/evil.py", "")
    make_wheel(house, "stray", "1.0")  # not in the manifest
    bad = verify.stage_wheelhouse(ctx, 60)
    assert bad["status"] == "failed"
    assert "sha256 differs" in bad["summary"] and wheels[0].name in bad["summary"]
    assert f"is for {other}, this Python is {here}" in bad["summary"]
    assert "stray-1.0-py3-none-any.whl is not in" in bad["summary"]

    write_manifest(house, wheels[1:])
    (house / "stray-1.0-py3-none-any.whl").unlink()
    foreign.unlink()
    assert "no wheel of arraycore" in verify.stage_wheelhouse(ctx, 60)["summary"]


@pytest.mark.parametrize(
    ("python_tag", "abi_tag", "runs"),
    [
        ("py3", "none", True),
        ("cp{mm}", "cp{mm}", True),
        ("cp{older}", "cp{older}", False),
        ("cp{older}", "abi3", True),
        ("cp{newer}", "abi3", False),
    ],
)
def test_wheel_python_tags(python_tag: str, abi_tag: str, runs: bool) -> None:
    major, minor = sys.version_info[:2]
    tags = {"mm": f"{major}{minor}", "older": f"{major}{minor - 1}", "newer": f"{major}{minor + 1}"}
    assert verify.runs_here(python_tag.format(**tags), abi_tag.format(**tags)) is runs


def test_unpacked_wheel_imports_with_its_metadata_and_entry_points(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path, "demo-backend", "2.0")
    site = tmp_path / "site"
    core.unpack_wheel(wheel, site)
    code = (
        "import importlib.metadata as m, demo_backend, demo_backend_extra\n"
        "eps = m.entry_points(group='arraycore.backends')\n"
        "print(m.version('demo-backend'), [e.value for e in eps if e.name == 'demo_backend'])\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip() == "2.0 ['demo_backend:NAME']"


def test_install_stage_installs_offline_and_reports_unmet_requirements(tmp_path: Path) -> None:
    house = tmp_path / "wheelhouse"
    house.mkdir()
    # nnlayers needs something the node does not have: pip check must name it
    wheels = [
        make_wheel(house, name, "0.1.0", requires="no-such-dist-xyz" if name == "nnlayers" else "")
        for name in verify.OURS
    ]
    write_manifest(house, wheels)
    ctx = context(tmp_path, house)
    result = verify.stage_install(ctx, 120)
    assert sorted(result["installed"]) == sorted(w.name for w in wheels)
    assert (ctx.site / "arraycore_cuda" / "__init__.py").is_file()
    assert result["status"] == "failed" and "no-such-dist-xyz" in result["summary"]


def test_only_reruns_some_stages_and_keeps_the_earlier_ones(tmp_path: Path) -> None:
    out = tmp_path / "report"
    first = run_verify("--out", str(out), "--no-wheelhouse", "--only", "versions")
    assert first.returncode in (0, 1, 2), first.stderr
    second = run_verify("--out", str(out), "--no-wheelhouse", "--only", "imports")
    assert second.returncode in (0, 1, 2), second.stderr
    stages = json.loads((out / "report.json").read_text(encoding="utf-8"))["stages"]
    assert stages["versions"]["status"] == "passed" and stages["versions"]["earlier run"]
    assert stages["imports"]["status"] == "passed" and "earlier run" not in stages["imports"]
    assert "| versions | passed (earlier run) |" in (out / "report.md").read_text()


def test_gpu_test_stages_run_side_by_side_with_xdist_workers(tmp_path: Path, monkeypatch) -> None:
    """On a many-core GPU node the test stages overlap (each pytest with its xdist workers and
    without pytest-benchmark, which refuses xdist), the benchmarks run alone after them, and the
    report keeps the stages' order. The stages here are stand-ins that record when they ran:
    what is tested is the scheduling, not a GPU."""
    spans: dict[str, tuple[float, float]] = {}
    commands: dict[str, list[str]] = {}

    def record(self: core.Context, stage: str, cmd: list[str], timeout: float, **env: str):
        # keyed by the stage's name: the stages share one context and run on several threads
        commands.setdefault(stage, cmd)
        return core.Run(0, 0.0, "")

    # the side-by-side stages meet at a barrier: it opens only once all of them are running at
    # once (run one after another, the first would wait out the timeout and the test fail), so
    # the check does not depend on how fast a loaded machine starts threads
    meet = {"barrier": threading.Barrier(len(verify.PARALLEL_STAGES), timeout=20)}

    def stand_in(name: str):
        def stage(ctx: core.Context, timeout: float) -> core.Result:
            began = time.monotonic()
            if name in ("cuda-tests", "nnlayers"):
                core.pytest_stage(ctx, name, ["tests"], timeout)
            if name in verify.PARALLEL_STAGES and meet["barrier"] is not None:
                meet["barrier"].wait()
            spans[name] = (began, time.monotonic())
            return {"status": "passed", "summary": name}

        return stage

    gpu_stages = [*verify.PARALLEL_STAGES, "bench", "bench-networks"]
    for name in gpu_stages:
        monkeypatch.setitem(verify.STAGES, name, stand_in(name))
    monkeypatch.setattr(core.Context, "run", record)
    monkeypatch.setattr(core, "probe_gpu", lambda: core.Gpu(True, devices=["0: stand-in"]))
    monkeypatch.setattr(verify.os, "cpu_count", lambda: 16)
    monkeypatch.setattr(verify, "importable", lambda ctx, module: module == "xdist")
    out = tmp_path / "report"
    verify.main(["--out", str(out), "--no-wheelhouse", "--only", ",".join(gpu_stages)])
    side = [spans[name] for name in verify.PARALLEL_STAGES]
    assert max(start for start, _ in side) < min(end for _, end in side)  # all overlapped
    last = max(end for _, end in side)
    assert spans["bench"][0] >= last and spans["bench-networks"][0] >= spans["bench"][1]
    assert "-n 2 -p no:benchmark" in " ".join(commands["cuda-tests"])
    assert "-n 4 -p no:benchmark" in " ".join(commands["nnlayers"])
    stages = json.loads((out / "report.json").read_text(encoding="utf-8"))["stages"]
    assert list(stages) == gpu_stages
    # --sequential: one after another, no xdist
    spans.clear()
    commands.clear()
    meet["barrier"] = None
    verify.main(
        ["--out", str(out), "--no-wheelhouse", "--sequential", "--only", ",".join(gpu_stages)]
    )
    order = sorted(spans, key=lambda name: spans[name][0])
    assert order == gpu_stages
    assert all(spans[a][1] <= spans[b][0] for a, b in itertools.pairwise(order))
    assert "-n" not in commands["nnlayers"]


def test_profile_stage_reads_the_costliest_op_of_each_case() -> None:
    """The ``profile`` stage's summary comes from ``bench_networks.py --profile``'s real output
    (run here on the NumPy backend: the GRU's recurrence leads its step)."""
    script = Path(__file__).resolve().parents[2] / "nnlayers" / "benchmarks" / "bench_networks.py"
    run = subprocess.run(
        [sys.executable, str(script), "--profile", "--only", "gru"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "ARRAYCORE_BACKEND": "numpy"},
        check=True,
    )
    (case, top), *rest = verify.profile_tops(run.stdout)
    assert not rest and case.startswith("GRU language model")
    assert top in ("gru_sequence backward", "gru_sequence forward"), run.stdout
    assert verify.profile_tops("no tables here") == []


def test_the_capture_check_rehearses_on_opencl(tmp_path) -> None:
    """The GPU's capture check (``verify.py --only capture``) runs its backend-independent part
    here, for real, on OpenCL (PoCL): random numbers and optimiser scalars under replay, the
    aliasing check, and two networks captured against eager; the CUDA-only tests say why they
    are skipped. A check that cannot run here cannot be trusted to run on the GPU node."""
    import importlib.util

    if importlib.util.find_spec("arraycore_opencl") is None:
        pytest.skip("arraycore-opencl is not installed here")
    try:
        arraycore.namespace("opencl")
    except arraycore.BackendError as exc:
        pytest.skip(f"no OpenCL device here: {exc}")
    bench = Path(__file__).resolve().parents[2] / "nnlayers" / "benchmarks"
    out = tmp_path / "capture.json"
    cmd = [sys.executable, "-m", "arraycore_cuda.capture_check", "--benchmarks", str(bench)]
    cmd += ["--json", str(out), "--backend", "opencl", "--quick", "--cases", "small-mlp,lstm"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    data = json.loads(out.read_text())
    assert {k: v["status"] for k, v in data["risks"].items()} == {
        "gemm": "skipped",
        "cupy-refuses-cublas": "skipped",
        "cudnn": "skipped",
        "rng": "passed",
        "scalars": "passed",
        "alias": "passed",
        "concat": "passed",
    }
    assert [v["status"] for v in data["networks"].values()] == ["passed", "passed"]
    assert set(data["timing"]) == {"small-mlp", "lstm"}
    assert "| small-mlp |" in data["table"]


def test_the_opencl_stages_say_in_one_line_that_nvidia_opencl_is_absent(tmp_path) -> None:
    """Without NVIDIA's OpenCL library (this machine), each OpenCL stage is 'not run' with the
    places searched, and nothing is written for the loader."""
    from arraycore_cuda import _verify_opencl as ocl

    library, how = ocl.find_library()
    if library is not None:
        pytest.skip(f"this machine has NVIDIA's OpenCL library ({library})")
    for folder in ("ldconfig -p", "/usr/local/nvidia/lib64", "/etc/OpenCL/vendors/nvidia.icd"):
        assert folder in how
    out = tmp_path / "report"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), "--no-wheelhouse", "--only",
         "opencl-probe,opencl-kit"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    stages = json.loads((out / "report.json").read_text())["stages"]
    for name in ("opencl-probe", "opencl-kit"):
        assert stages[name]["status"] == "not run", run.stdout
        assert stages[name]["summary"].startswith("no NVIDIA OpenCL library on this node (")
    assert not (out / "opencl-vendors").exists()


def test_the_opencl_probe_runs_on_a_given_library_through_ocl_icd_vendors(tmp_path) -> None:
    """Rehearsed on PoCL: the probe writes a vendor file naming the library by absolute path,
    reaches the device through OCL_ICD_VENDORS alone and reports it and an SGEMM."""
    import importlib.util

    from arraycore_cuda import _verify_opencl as ocl

    if importlib.util.find_spec("arraycore_opencl") is None:
        pytest.skip("arraycore-opencl is not installed here")
    listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True)
    found = [ln.split("=>")[1].strip() for ln in listing.stdout.splitlines() if "libpocl.so" in ln]
    if not found:
        pytest.skip("no PoCL here to rehearse the OpenCL stages on")
    out = tmp_path / "report"
    run = subprocess.run(
        [sys.executable, str(SCRIPT), "--out", str(out), "--no-wheelhouse", "--only",
         "opencl-probe", "--opencl-library", found[0], "--quick"],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "OPENCL_VENDOR_PATH": str(tmp_path / "nothing-here")},
    )  # fmt: skip
    stage = json.loads((out / "report.json").read_text())["stages"]["opencl-probe"]
    assert stage["status"] == "passed", (stage, run.stdout[-1500:], run.stderr[-1500:])
    assert (out / "opencl-vendors" / "given.icd").read_text().strip() == str(
        Path(found[0]).resolve()
    )
    device = stage["opencl"]["platforms"][0]["devices"][0]
    assert device["compute_units"] > 0 and "fp64" in device
    assert stage["opencl"]["sgemm"]["rel_err"] < 1e-4
    assert tuple(ocl.STAGE_FUNCTIONS) == ocl.STAGES
