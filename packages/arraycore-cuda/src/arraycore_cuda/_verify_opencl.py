"""verify.py's OpenCL stages: the OpenCL backend on the GPU node's own OpenCL driver (NVIDIA's).

Standard library only (it runs before anything is installed). The node's driver ships
``libnvidia-opencl.so.1`` with the CUDA driver, but containers often leave out the vendor file
``/etc/OpenCL/vendors/nvidia.icd`` that an ICD loader reads, and ``/etc`` may not be writable.
pyopencl's wheels bundle an ocl-icd loader that reads ``OCL_ICD_VENDORS`` (a folder of ``.icd``
files) instead (``../shared/research/opencl-on-gpu.md``), so these stages find the library
(``ldconfig``, then the driver's folders), write ``<out>/opencl-vendors/nvidia.icd`` naming it by
absolute path, and run every child with ``OCL_ICD_VENDORS`` pointing there:

``opencl-probe``     the platform and device (limits, extensions, floating-point config), a
                     square SGEMM through arraycore (CLBlast) against PyTorch on CUDA (float32,
                     TF32 off), and ``arraycore info``'s OpenCL lines
``opencl-kit``       the conformance kit on ``opencl``
``opencl-nnlayers``  the nnlayers suite on ``opencl``
``opencl-demo``      the digits demo on ``opencl`` (its accuracy beside the NumPy backend's)
``opencl-bench``     the benchmark networks' steps on OpenCL, eager and captured
                     (``capture_check --only timing``), against the CUDA backend's from the
                     ``capture`` stage where it ran, CLBlast's products tuned on the device
                     (the choices land in ``<out>/opencl-cache/opencl-gemm/``, to be copied into
                     ``arraycore_opencl/gemm_choices/``)

Where the node has no NVIDIA OpenCL library (or the runtime refuses it), each says exactly that
in one line and does not run. ``--opencl-library PATH`` names another ICD library instead (PoCL's:
how these stages are rehearsed without a GPU).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path
from typing import Any

try:
    from . import _verify_core as core
except ImportError:  # run as a script, before anything is installed
    import _verify_core as core  # type: ignore[import-not-found,no-redef]

NVIDIA_OPENCL = "libnvidia-opencl.so.1"
#: Where a driver's libraries live when ``ldconfig`` does not list them (containers mount the
#: driver read-only under /usr/local/nvidia; Debian's and RPM distributions' own folders).
DRIVER_FOLDERS = (
    "/usr/local/nvidia/lib64",
    "/usr/local/nvidia/lib",
    "/usr/lib/x86_64-linux-gnu",
    "/usr/lib64",
    "/usr/lib",
    "/run/nvidia/driver/usr/lib/x86_64-linux-gnu",
)
STAGES = ("opencl-probe", "opencl-kit", "opencl-nnlayers", "opencl-demo", "opencl-bench")
TIMEOUTS = {
    "opencl-probe": 150,
    "opencl-kit": 240,
    "opencl-nnlayers": 300,
    "opencl-demo": 180,
    "opencl-bench": 240,
}
#: pytest-xdist workers of the two test stages on a node of at least 8 cores that has xdist
#: (each runs alone, its workers side by side: the OpenCL group's share of a GPU call is short)
PARALLEL = {"opencl-kit": 6, "opencl-nnlayers": 8}
SGEMM_N = 4096


def find_library(given: str | None = None) -> tuple[str | None, str]:
    """``(absolute path of the OpenCL ICD library, how it was found)``, or ``(None, what was
    searched)``: ``given`` as it is, else NVIDIA's by ``ldconfig -p``, then the driver's
    folders, then what an existing ``/etc/OpenCL/vendors/nvidia.icd`` names."""
    if given:
        path = Path(given)
        return (str(path.resolve()), "given") if path.is_file() else (None, f"{given} not found")
    searched = []
    try:
        listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=30)
        for line in listing.stdout.splitlines():
            if NVIDIA_OPENCL in line and "=>" in line:
                found = line.split("=>", 1)[1].strip()
                if Path(found).is_file():
                    return found, "ldconfig -p"
        searched.append("ldconfig -p")
    except (OSError, subprocess.SubprocessError):
        searched.append("ldconfig (not runnable)")
    for folder in DRIVER_FOLDERS:
        path = Path(folder) / NVIDIA_OPENCL
        if path.is_file():
            return str(path), folder
    searched.append(", ".join(DRIVER_FOLDERS))
    icd = Path("/etc/OpenCL/vendors/nvidia.icd")
    if icd.is_file():
        name = icd.read_text(encoding="utf-8", errors="replace").strip()
        if name and Path(name).is_file():
            return name, str(icd)
        searched.append(f"{icd} (names {name!r}, not found)")
    else:
        searched.append(f"{icd} (absent)")
    return None, "; ".join(searched)


def missing_helpers(library: str) -> list[str]:
    """The shared libraries ``library`` needs that the dynamic loader cannot find (``ldd``):
    NVIDIA's OpenCL needs its compiler libraries (libnvidia-compiler, -ptxjitcompiler)."""
    try:
        run = subprocess.run(["ldd", library], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.split("=>")[0].strip() for line in run.stdout.splitlines() if "not found" in line]


_SETUP: dict[str, Any] = {}


def setup(ctx: core.Context) -> dict[str, str] | str:
    """The children's environment for OpenCL (``OCL_ICD_VENDORS``), made once; or, where there
    is no library to run on, the one line that says so."""
    key = str(ctx.out)
    if key in _SETUP:
        return _SETUP[key]  # type: ignore[no-any-return]
    library, how = find_library(getattr(ctx, "opencl_library", None))
    if library is None:
        found: dict[str, str] | str = f"no NVIDIA OpenCL library on this node ({how})"
    else:
        missing = missing_helpers(library)
        vendors = ctx.out / "opencl-vendors"
        vendors.mkdir(parents=True, exist_ok=True)
        name = "nvidia.icd" if NVIDIA_OPENCL in library else "given.icd"
        (vendors / name).write_text(library + "\n", encoding="utf-8")
        found = {
            "OCL_ICD_VENDORS": str(vendors),
            "ARRAYCORE_OPENCL_LIBRARY": library,
            "ARRAYCORE_OPENCL_FOUND": how
            + (f"; ldd: missing {', '.join(missing)}" if missing else ""),
        }
    _SETUP[key] = found
    return found


PROBE_CODE = r"""
import json, os, sys, time
import numpy as np
import pyopencl as cl
out = {"platforms": []}
for p in cl.get_platforms():
    entry = {"name": p.name, "vendor": p.vendor, "version": p.version, "devices": []}
    for d in p.get_devices():
        fp = d.single_fp_config
        entry["devices"].append({
            "name": d.name, "type": cl.device_type.to_string(d.type),
            "driver": d.driver_version, "opencl_c": d.opencl_c_version,
            "compute_units": d.max_compute_units, "max_work_group_size": d.max_work_group_size,
            "local_mem_kib": d.local_mem_size // 1024,
            "global_mem_gib": round(d.global_mem_size / 2**30, 1),
            "max_alloc_gib": round(d.max_mem_alloc_size / 2**30, 1),
            "fp16": "cl_khr_fp16" in d.extensions, "fp64": "cl_khr_fp64" in d.extensions,
            "correctly_rounded_divide_sqrt": bool(
                fp & cl.device_fp_config.CORRECTLY_ROUNDED_DIVIDE_SQRT),
            "extensions": d.extensions.split(),
        })
    out["platforms"].append(entry)
import arraycore
xp = arraycore.namespace("opencl")
out["arraycore_device"] = str(xp.device)
n = int(sys.argv[1])
rng = np.random.default_rng(0)
a = rng.standard_normal((n, n), dtype=np.float32)
b = rng.standard_normal((n, n), dtype=np.float32)
A, B = xp.asarray(a), xp.asarray(b)
info = xp.__array_namespace_info__()
xp.matmul(A, B); info.synchronize()
began = time.perf_counter()
for _ in range(3):
    C = xp.matmul(A, B)
info.synchronize()
seconds = (time.perf_counter() - began) / 3
got = xp.to_numpy(C)
sgemm = {"n": n, "opencl_ms": seconds * 1e3, "opencl_gflops": 2 * n**3 / seconds / 1e9}
try:
    import torch
    if not torch.cuda.is_available():
        raise ImportError("no CUDA device for torch")
    torch.backends.cuda.matmul.allow_tf32 = False
    ta, tb = torch.from_numpy(a).cuda(), torch.from_numpy(b).cuda()
    torch.matmul(ta, tb); torch.cuda.synchronize()
    began = time.perf_counter()
    for _ in range(3):
        tc = torch.matmul(ta, tb)
    torch.cuda.synchronize()
    tsec = (time.perf_counter() - began) / 3
    ref = tc.cpu().numpy().astype(np.float64)
    sgemm.update(torch_ms=tsec * 1e3, torch_gflops=2 * n**3 / tsec / 1e9, against="PyTorch fp32")
except ImportError as exc:
    ref = a.astype(np.float64) @ b.astype(np.float64)
    sgemm.update(against=f"NumPy float64 ({exc})")
sgemm["rel_err"] = float(np.max(np.abs(got - ref)) / np.max(np.abs(ref)))
out["sgemm"] = sgemm
print("OPENCL " + json.dumps(out))
"""


def _not_run(reason: str) -> core.Result:
    return {"status": "not run", "summary": reason}


def stage_probe(ctx: core.Context, timeout: float) -> core.Result:
    """Platform, device limits, extensions, fp config, an SGEMM against PyTorch, arraycore info."""
    env = setup(ctx)
    if isinstance(env, str):
        return _not_run(env)
    n = "1024" if ctx.quick else str(SGEMM_N)
    run = ctx.run("opencl-probe", [ctx.python, "-c", PROBE_CODE, n], timeout, **env)
    found = next((ln for ln in run.output.splitlines() if ln.startswith("OPENCL ")), None)
    if found is None:
        why = core.tail(run.output, 3).replace("\n", " ")
        return core.outcome(run, False, f"the OpenCL runtime refused the library: {why}")
    data = json.loads(found[len("OPENCL ") :])
    info = ctx.run("opencl-probe", [ctx.python, "-m", "arraycore", "info"], 120, **env)
    lines = [ln.strip() for ln in info.output.splitlines() if "opencl" in ln.lower()][:4]
    device: dict[str, Any] = next((d for p in data["platforms"] for d in p["devices"]), {})
    sgemm = data["sgemm"]
    summary = (
        f"{device.get('name', '?')} ({env['ARRAYCORE_OPENCL_FOUND']}), driver "
        f"{device.get('driver', '?')}, {device.get('opencl_c', '?')}, fp16 "
        f"{'yes' if device.get('fp16') else 'no'}, fp64 {'yes' if device.get('fp64') else 'no'}, "
        f"local {device.get('local_mem_kib', '?')} KiB; SGEMM {sgemm['n']}^2 "
        f"{sgemm['opencl_gflops']:.0f} GFLOP/s"
    )
    if "torch_gflops" in sgemm:
        summary += f" (PyTorch fp32 {sgemm['torch_gflops']:.0f})"
    summary += f", rel. error {sgemm['rel_err']:.1e} against {sgemm['against']}"
    ok = run.rc == 0 and sgemm["rel_err"] < 1e-4
    return core.outcome(run, ok, summary, opencl=data, info=lines, library=env)


def _workers(ctx: core.Context, name: str) -> None:
    if ctx.xdist and (os.cpu_count() or 1) >= 8:
        ctx.workers[name] = PARALLEL[name]


def stage_kit(ctx: core.Context, timeout: float) -> core.Result:
    env = setup(ctx)
    if isinstance(env, str):
        return _not_run(env)
    _workers(ctx, "opencl-kit")
    args = ["--pyargs", "arraycore.testing.conformance", "--arraycore-backend=opencl"]
    return core.pytest_stage(ctx, "opencl-kit", args, timeout, **env)


def stage_nnlayers(ctx: core.Context, timeout: float) -> core.Result:
    env = setup(ctx)
    if isinstance(env, str):
        return _not_run(env)
    tests = core.repo_path(ctx, "packages", "nnlayers", "tests")
    if tests is None:
        return core.no_checkout("packages/nnlayers/tests")
    _workers(ctx, "opencl-nnlayers")
    return core.pytest_stage(
        ctx, "opencl-nnlayers", [str(tests)], timeout, ARRAYCORE_BACKEND="opencl", **env
    )


ACCURACY = re.compile(r"held-out accuracy ([0-9.]+)%")


def stage_demo(ctx: core.Context, timeout: float) -> core.Result:
    """The digits demo on opencl and on numpy: accuracies at most 0.5 points apart."""
    env = setup(ctx)
    if isinstance(env, str):
        return _not_run(env)
    found = {}
    for backend in ("numpy", "opencl"):
        folder = ctx.out / f"opencl-demo-{backend}"
        cmd = [ctx.python, "-m", "nnlayers.demo", "--quiet", "--out", str(folder)]
        run = ctx.run("opencl-demo", cmd, timeout / 2, ARRAYCORE_BACKEND=backend, **env)
        match = ACCURACY.search(run.output)
        found[backend] = float(match.group(1)) if match else None
        if run.timed_out or match is None:
            return core.outcome(run, False, f"no accuracy from the {backend} demo", runs=found)
    diff = abs(found["numpy"] - found["opencl"])  # type: ignore[operator]
    summary = f"opencl {found['opencl']:.2f}%, numpy {found['numpy']:.2f}% ({diff:.2f} points)"
    return {"status": "passed" if diff <= 0.5 else "failed", "summary": summary, "runs": found}


def stage_bench(ctx: core.Context, timeout: float) -> core.Result:
    """The benchmark networks' steps on OpenCL (eager and captured), against the CUDA backend's
    captured steps of the ``capture`` stage where that ran (target: within 2x)."""
    env = setup(ctx)
    if isinstance(env, str):
        return _not_run(env)
    bench = core.repo_path(ctx, "packages", "nnlayers", "benchmarks")
    if bench is None:
        return core.no_checkout("packages/nnlayers/benchmarks")
    result = ctx.out / "opencl-bench.json"
    result.unlink(missing_ok=True)
    cmd = [ctx.python, "-m", "arraycore_cuda.capture_check", "--benchmarks", str(bench)]
    cmd += ["--backend", "opencl", "--only", "timing", "--json", str(result)]
    if ctx.quick:
        cmd.append("--quick")
    # CLBlast's products tuned on the device (arraycore_opencl._gemm_tuning), the choices kept
    # in the report folder: copy them into arraycore_opencl/gemm_choices/ to ship them
    tuned = {"ARRAYCORE_OPENCL_TUNE": "1", "ARRAYCORE_CACHE_DIR": str(ctx.out / "opencl-cache")}
    run = ctx.run("opencl-bench", cmd, timeout, **env, **tuned)
    if not result.is_file():
        return core.outcome(run, False, f"no results written: {core.tail(run.output, 5)}")
    ours = json.loads(result.read_text(encoding="utf-8"))["timing"]
    cuda_file = ctx.out / "capture.json"
    cuda = (
        json.loads(cuda_file.read_text(encoding="utf-8"))["timing"] if cuda_file.is_file() else {}
    )
    ratios = {}
    parts = []
    for key, found in ours.items():
        rows = found.get("rows") or {}
        ms = (rows.get("nnlayers captured") or {}).get("ms")
        if ms is None:
            parts.append(f"{key} {found['status']}")
            continue
        other = ((cuda.get(key) or {}).get("rows") or {}).get("nnlayers captured", {}).get("ms")
        if other:
            ratios[key] = ms / other
            parts.append(f"{key} {ms:.1f} ms ({ms / other:.2f}x CUDA)")
        else:
            parts.append(f"{key} {ms:.1f} ms")
    met = bool(ratios) and all(r <= 2.0 for r in ratios.values())
    summary = "; ".join(parts) + (
        f" (target <= 2x CUDA: {'met' if met else 'NOT met'})" if ratios else ""
    )
    return core.outcome(run, run.rc == 0, summary, timing=ours, ratios=ratios)


STAGE_FUNCTIONS = {
    "opencl-probe": stage_probe,
    "opencl-kit": stage_kit,
    "opencl-nnlayers": stage_nnlayers,
    "opencl-demo": stage_demo,
    "opencl-bench": stage_bench,
}
