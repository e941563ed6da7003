"""CLBlast GEMM parameters chosen by timing on the device (``ARRAYCORE_OPENCL_TUNE``).

Each case runs in a fresh interpreter: CLBlast's parameter overrides are process-wide, and a
fresh process is also what a later run that reuses the file on disk looks like.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from arraycore.backend import BackendUnavailable
from arraycore_opencl import OpenCLBackend
from arraycore_opencl._gemm_tuning import ENV_CANDIDATES, cache_path, shape_key

try:
    OpenCLBackend.probe()
except BackendUnavailable as exc:  # pragma: no cover - only where OpenCL is absent
    pytest.skip(f"no usable OpenCL device here: {exc}", allow_module_level=True)

#: Products of every routing: plain, transposed operands (views passed with CLBlast's flags), a
#: batch sharing its right-hand side (one GEMM) and a strided batch; all above _SMALL_GEMM.
SCRIPT = """
import json, numpy as np, arraycore
xp = arraycore.namespace("opencl", device=0)
rng = np.random.default_rng(0)
a = rng.standard_normal((96, 160), dtype=np.float32)
b = rng.standard_normal((160, 112), dtype=np.float32)
c = rng.standard_normal((3, 96, 160), dtype=np.float32)
d = rng.standard_normal((3, 160, 112), dtype=np.float32)
cases = [
    (a, b, lambda x, y: xp.matmul(x, y)),
    (b.T.copy(), b, lambda x, y: xp.matmul(xp.permute_dims(x, (1, 0)), xp.permute_dims(y, (1, 0)))),
    (c, b, lambda x, y: xp.matmul(x, y)),
    (c, d, lambda x, y: xp.matmul(x, y)),
]
errors = []
for x, y, f in cases:
    got = xp.to_numpy(f(xp.asarray(x), xp.asarray(y)))
    ref = x @ y if f is not cases[1][2] else x.T @ y.T
    errors.append(float(np.max(np.abs(got - ref)) / np.max(np.abs(ref))))
tuner = xp._backend.rt.gemm_tuner()
print(json.dumps({
    "errors": errors, "choices": tuner.choices, "timings": tuner.timings,
    "current": {str(k): v for k, v in tuner.current.items()}, "path": str(tuner.path),
    "name": tuner.name, "model": tuner.model,
}))
"""


#: The candidates timed here: the direct kernel, a CPU tile and a local-memory tile (all three
#: routines CLBlast compiles differently). Timing all ten compiles every candidate's kernels on
#: PoCL, 10+ minutes with a cold kernel cache on a 2-core machine; three take about a third.
TIMED = ("direct", "cpu64", "gpu64")


def _run(cache: Path, tune: str | None) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ARRAYCORE_OPENCL_TUNE")}
    env["ARRAYCORE_CACHE_DIR"] = str(cache)
    env["ARRAYCORE_OPENCL_GEMM"] = (
        "clblast"  # the tuning is CLBlast's (CPU devices default to ours)
    )
    if tune is not None:
        env["ARRAYCORE_OPENCL_TUNE"] = tune
    env[ENV_CANDIDATES] = ",".join(TIMED)
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(SCRIPT)],
        capture_output=True,
        text=True,
        env=env,
        # CLBlast compiles each timed candidate's kernels on PoCL: minutes with a cold kernel
        # cache on a busy 2-core machine
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    cache = tmp_path_factory.mktemp("cache")
    return cache, _run(cache, "1")


def test_tuning_times_the_named_candidates_per_shape_and_keeps_the_fastest(
    tuned: tuple[Path, dict[str, Any]],
) -> None:
    _, out = tuned
    assert max(out["errors"]) < 1e-5, out["errors"]  # every candidate computes the product
    keys = {
        shape_key("float32", 96, 112, 160, False, False),
        shape_key("float32", 160, 160, 112, True, True),
        shape_key("float32", 288, 112, 160, False, False),  # the batch folded into the rows
        shape_key("float32", 96, 112, 160, False, False, 3),
    }
    assert set(out["choices"]) == keys
    for key in keys:
        times = out["timings"][key]
        assert set(times) == set(TIMED), "only the named candidates, and PoCL accepts them"
        assert out["choices"][key] == min(times, key=times.__getitem__)
        assert all(t > 0 for t in times.values())


def test_choices_are_written_per_device_and_reused_without_timing(
    tuned: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, first = tuned
    path = Path(first["path"])
    monkeypatch.setenv("ARRAYCORE_CACHE_DIR", str(cache))
    assert path == cache_path(first["name"])
    assert path.parent == cache / "opencl-gemm"
    on_file = json.loads(path.read_text())
    assert on_file == {
        "device": first["name"],
        "model": first["model"],
        "choices": first["choices"],
    }
    assert first["name"].startswith(first["model"] + " "), "the model is the name less its driver"
    assert not list(path.parent.glob("*.tmp")), "written through a temporary file"

    again = _run(cache, None)
    assert again["timings"] == {}, "nothing timed: the file's choices are used"
    assert again["choices"] == first["choices"]
    assert max(again["errors"]) < 1e-5
    last = shape_key("float32", 96, 112, 160, False, False, 3)
    assert again["current"] == {"32": first["choices"][last]}


def test_tune_zero_ignores_the_file_and_overrides_nothing(
    tuned: tuple[Path, dict[str, Any]],
) -> None:
    cache, _ = tuned
    out = _run(cache, "0")
    assert out["choices"] == {} and out["timings"] == {} and out["current"] == {}
    assert max(out["errors"]) < 1e-5


def test_a_damaged_file_or_unknown_candidate_falls_back_to_clblast(tmp_path: Path) -> None:
    probe = _run(tmp_path, "0")
    path = Path(probe["path"])
    path.parent.mkdir(parents=True)
    for text in ("{not json", json.dumps({"choices": {"float32 1x96x112x160 nn": "no-such"}})):
        path.write_text(text)
        out = _run(tmp_path, None)
        assert out["choices"] == {} and out["current"] == {}, "CLBlast's database"
        assert max(out["errors"]) < 1e-5


def test_arraycore_info_says_where_the_choices_are(
    tuned: tuple[Path, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache, _ = tuned
    monkeypatch.setenv("ARRAYCORE_CACHE_DIR", str(cache))
    monkeypatch.delenv("ARRAYCORE_OPENCL_TUNE", raising=False)
    line = OpenCLBackend.version()
    assert f"1 device file(s) of choices in {cache / 'opencl-gemm'}" in line
    assert "set ARRAYCORE_OPENCL_TUNE=1 to time new shapes" in line
    monkeypatch.setenv("ARRAYCORE_OPENCL_TUNE", "0")
    assert (
        "GEMM parameters: CLBlast's database (ARRAYCORE_OPENCL_TUNE=0)" in OpenCLBackend.version()
    )


def test_shapes_without_a_choice_take_the_most_chosen_candidate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from arraycore_opencl._gemm_tuning import GemmTuner

    monkeypatch.setenv("ARRAYCORE_CACHE_DIR", str(tmp_path))
    import pyopencl

    platform = SimpleNamespace(name="Some Platform")
    device = SimpleNamespace(
        platform=platform,
        name="Some GPU",
        type=int(pyopencl.device_type.GPU),
        driver_version="1.0",
        max_work_group_size=256,
    )
    tuner = GemmTuner(device, mode="")
    assert tuner.fallback() is None, "nothing on file: CLBlast's database"
    choices = {"a": "cpu64", "b": "direct", "c": "cpu64", "d": "gpu64", "e": "unknown"}
    tuner.path.parent.mkdir(parents=True)
    tuner.path.write_text(json.dumps({"device": tuner.name, "choices": choices}))
    tuner = GemmTuner(device, mode="")
    assert "e" not in tuner.choices, "a candidate this version does not have is dropped"
    assert tuner.fallback() == "cpu64"
    tuner.choices["f"] = "direct"
    assert tuner.fallback() == "direct", "a tie goes to the earlier candidate"
    assert GemmTuner(device, mode="0").choices == {}
    assert GemmTuner(device, mode="1").timed is None, "unset: every candidate is timed"
    monkeypatch.setenv(ENV_CANDIDATES, "direct, cpu64,clblast-nvidia-p100")
    assert GemmTuner(device, mode="1").timed == ["direct", "cpu64", "clblast-nvidia-p100"]
    cpu = SimpleNamespace(**{**vars(device), "type": int(pyopencl.device_type.CPU)})
    assert GemmTuner(cpu, mode="1").timed == ["direct", "cpu64"], "GPU sets: GPUs only"
    monkeypatch.setenv(ENV_CANDIDATES, "direct,cpu65")
    with pytest.raises(ValueError, match=r"ARRAYCORE_OPENCL_TUNE_CANDIDATES: .*'cpu65'.*cpu64"):
        GemmTuner(device, mode="1")
    small = SimpleNamespace(**{**vars(device), "max_work_group_size": 32})
    assert "gpu128" not in GemmTuner(small, mode="").candidates, "work-groups over the limit"


def test_gpus_are_offered_clblast_database_sets_and_shipped_choices(tmp_path, monkeypatch) -> None:
    """A GPU device is offered the sets CLBlast's database holds for NVIDIA and AMD parts (a CPU
    device is not), and a device without a file of its own starts from the choices shipped for
    its model, whatever its driver; its own file, once there, wins."""
    from types import SimpleNamespace

    import pyopencl

    from arraycore_opencl import _gemm_tuning as gt

    def device(kind: int, driver: str) -> Any:
        return SimpleNamespace(
            platform=SimpleNamespace(name="NVIDIA CUDA"), name="NVIDIA H200", type=kind,
            driver_version=driver, max_work_group_size=1024,
        )  # fmt: skip

    monkeypatch.setenv("ARRAYCORE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("ARRAYCORE_OPENCL_TUNE", raising=False)
    shipped = tmp_path / "shipped"
    shipped.mkdir()
    key = gt.shape_key("float32", 64, 64, 64, False, False)
    (shipped / "h200.json").write_text(json.dumps({
        "device": "NVIDIA CUDA NVIDIA H200 580.1", "model": "NVIDIA CUDA NVIDIA H200",
        "choices": {key: "clblast-nvidia-p100"},
    }))  # fmt: skip
    monkeypatch.setattr(gt, "SHIPPED", shipped)
    gpu = gt.GemmTuner(device(int(pyopencl.device_type.GPU), "580.9"))
    assert set(gt.GPU_DATABASE) <= set(gpu.candidates)
    assert gpu.choices == {key: "clblast-nvidia-p100"} and gpu.source.startswith("shipped")
    cpu = gt.GemmTuner(device(int(pyopencl.device_type.CPU), "580.9"))
    assert not set(gt.GPU_DATABASE) & set(cpu.candidates)
    assert cpu.choices == {}  # the shipped choice names a set a CPU device is not offered
    gpu.choices = {key: "gpu64"}
    gpu._save()
    again = gt.GemmTuner(device(int(pyopencl.device_type.GPU), "580.9"))
    assert again.choices == {key: "gpu64"} and again.source.startswith("cache")
    assert json.loads(again.path.read_text())["model"] == "NVIDIA CUDA NVIDIA H200"
