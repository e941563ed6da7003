"""Verify the cuda backend on a GPU node that has no network: one command, one report.

From a checkout of the repository that has a ``wheelhouse/`` (``nox -s wheelhouse``)::

    python3 packages/arraycore-cuda/src/arraycore_cuda/verify.py --out verify-report

or, where arraycore-cuda and nnlayers are already installed, ``python -m arraycore_cuda.verify
--out verify-report``. It installs nothing from the network: the wheelhouse's wheels go into
``<out>/site-packages`` with pip's ``--no-index`` (or are unpacked where the node's Python has no
pip), and every stage runs in a child process of the node's own Python with that folder first on
its path. The stages, each with its own timeout, none stopping the others:

``wheelhouse``  the wheelhouse's files match its manifest (hashes, sizes, total under 60 MiB)
``install``     offline install of the wheelhouse; every requirement of ours is installed
``versions``    driver, GPU, CuPy, libcudnn, cudnn-frontend, PyTorch and our own versions
``imports``     every module of arraycore, arraycore_cuda and nnlayers imports
``info``        ``python -m arraycore info`` reports the cuda backend usable (GPU)
``capture``     captured training steps (``arraycore_cuda.capture_check``): the risk tests (the
                capturable cuBLAS product, cuDNN captured, random numbers, optimiser scalars,
                aliasing), every benchmark network captured against eager, and step time and
                memory against PyTorch eager and PyTorch with CUDA graphs, one table (GPU)
``cuda-tests``  the arraycore-cuda package's tests (GPU)
``conformance``, ``conformance-no-cudnn``, ``conformance-primitives``  the conformance kit on
                cuda, also with ``ARRAYCORE_CUDNN=0`` and ``ARRAYCORE_CUDA_OVERRIDES=none`` (GPU)
``nnlayers``    the nnlayers test suite with ``ARRAYCORE_BACKEND=cuda`` (GPU)
``demo``        the digits demo on numpy and on cuda: accuracies within 0.5 points (GPU)
``bench``       the training-step benchmark, nnlayers[cuda] against PyTorch on the same GPU (GPU)
``opencl-probe``, ``opencl-kit``, ``opencl-nnlayers``, ``opencl-demo``, ``opencl-bench``  the
                OpenCL backend on the node's NVIDIA OpenCL driver, found and named to the ICD
                loader by ``OCL_ICD_VENDORS`` (``_verify_opencl.py``; ``--opencl-library``
                rehearses them on another OpenCL, PoCL's)

It writes ``report.md`` and ``report.json`` (versions, pass/fail/skip counts, failing tests,
timings, ratios) and one log per stage into the ``--out`` folder. Exit status: 0 when every stage
passed on a GPU, 1 when a stage failed, 2 when there is no GPU here (then it runs only the stages
that need none, and says so in one line).

This file imports nothing but the standard library, so it runs before anything is installed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

if __package__:  # python -m arraycore_cuda.verify
    from . import _verify_core as core
    from . import _verify_opencl as opencl
else:  # python3 .../arraycore_cuda/verify.py, before anything is installed
    import _verify_core as core  # type: ignore[import-not-found,no-redef]
    import _verify_opencl as opencl  # type: ignore[import-not-found,no-redef]

#: The wheelhouse's manifest, written by ``nox -s wheelhouse`` beside the wheels.
MANIFEST = "wheelhouse.json"
MAX_WHEELHOUSE_BYTES = 60 * 2**20
#: The repo's own distributions and their import names.
OURS = {"arraycore": "arraycore", "arraycore-cuda": "arraycore_cuda", "nnlayers": "nnlayers"}
DEMO_TOLERANCE_POINTS = 0.5
#: The GPU target of the benchmark: nnlayers[cuda] at most this times PyTorch's step time.
BENCH_TARGET = 1.1
GPU_STAGES = (
    "info",
    "capture",
    "cuda-tests",
    "conformance",
    "conformance-no-cudnn",
    "conformance-primitives",
    "nnlayers",
    "demo",
    "bench",
    "bench-networks",
    "profile",
)
HOST_STAGES = ("wheelhouse", "install", "versions", "imports")
#: GPU stages that run side by side on a node with at least :data:`PARALLEL_CORES` cores (each
#: a child process; the pytest ones with this many pytest-xdist workers where the node has
#: xdist): on an H200 node they took 3.5 minutes together instead of 20 one after another. The
#: benchmarks run alone afterwards, so that nothing else shares the GPU while they time it.
PARALLEL_STAGES = {
    "cuda-tests": 2,
    "conformance": 3,
    "conformance-no-cudnn": 3,
    "conformance-primitives": 3,
    "nnlayers": 4,
    "demo": 0,
}
PARALLEL_CORES = 8
#: Default timeout of each stage, seconds (the whole run also has a --deadline).
TIMEOUTS = {
    "wheelhouse": 60,
    "install": 180,
    "versions": 120,
    "imports": 180,
    "info": 120,
    "capture": 360,
    "cuda-tests": 300,
    "conformance": 300,
    "conformance-no-cudnn": 240,
    "conformance-primitives": 240,
    "nnlayers": 540,
    "demo": 300,
    "bench": 420,
    "bench-networks": 540,
    "profile": 300,
    **opencl.TIMEOUTS,
}


# -- the stages ---------------------------------------------------------------------------------
def stage_wheelhouse(ctx: core.Context, timeout: float) -> core.Result:
    """Each file of the manifest is there with its hash and size; the total is under 60 MiB."""
    if ctx.wheelhouse is None:
        return {"status": "skipped", "summary": "no wheelhouse (using the installed packages)"}
    manifest = json.loads((ctx.wheelhouse / MANIFEST).read_text(encoding="utf-8"))
    problems, total = [], 0
    listed = {entry["file"] for entry in manifest["wheels"]}
    for extra in sorted(p.name for p in ctx.wheelhouse.glob("*.whl") if p.name not in listed):
        problems.append(f"{extra} is not in {MANIFEST}")
    here = f"cp{sys.version_info.major}{sys.version_info.minor}"
    for entry in manifest["wheels"]:
        path = ctx.wheelhouse / entry["file"]
        if not path.is_file():
            problems.append(f"{entry['file']} is missing")
            continue
        data = path.read_bytes()
        total += len(data)
        if hashlib.sha256(data).hexdigest() != entry["sha256"]:
            problems.append(f"{entry['file']}: sha256 differs from {MANIFEST}")
        python_tag, abi_tag, _ = core.wheel_tags(entry["file"])
        if not runs_here(python_tag, abi_tag):
            problems.append(f"{entry['file']} is for {python_tag}, this Python is {here}")
    missing = set(OURS) - {entry["project"] for entry in manifest["wheels"]}
    problems += [f"no wheel of {name}" for name in sorted(missing)]
    if total > MAX_WHEELHOUSE_BYTES:
        problems.append(f"{total / 2**20:.1f} MiB is over the {MAX_WHEELHOUSE_BYTES >> 20} MiB cap")
    summary = f"{len(manifest['wheels'])} wheels, {total / 2**20:.1f} MiB" + (
        "; " + "; ".join(problems) if problems else ""
    )
    return {
        "status": "failed" if problems else "passed",
        "summary": summary,
        "bytes": total,
        "wheels": [entry["file"] for entry in manifest["wheels"]],
        "built_for": {k: manifest.get(k) for k in ("python", "platform", "cuda")},
    }


def runs_here(python_tag: str, abi_tag: str) -> bool:
    """Whether a wheel of these tags installs into this CPython: ``py3`` always, ``cpXY``
    exactly, and ``cpXY-abi3`` (the stable ABI) from Python X.Y on."""
    if not python_tag.startswith("cp"):
        return True
    wanted = (sys.version_info.major, sys.version_info.minor)
    tags = [(int(t[2]), int(t[3:])) for t in python_tag.split(".") if t[2:].isdigit()]
    if abi_tag == "abi3":
        return any(tag <= wanted and tag[0] == wanted[0] for tag in tags)
    return wanted in tags


def importable(ctx: core.Context, module: str) -> bool:
    """Whether the node's Python (without our site folder) imports ``module``'s spec."""
    code = (
        "import importlib.util as u, sys\n"
        f"try:\n    sys.exit(u.find_spec({module!r}) is None)\n"
        "except ImportError:\n    sys.exit(1)\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    try:
        found = subprocess.run([ctx.python, "-c", code], env=env, timeout=60, capture_output=True)
        return found.returncode == 0
    except subprocess.TimeoutExpired:
        return False


#: Every requirement of the named distributions is installed (markers for extras are skipped;
#: the versions are pip's business at install time). Standard library only: the node's Python
#: may have no pip, and ``pip check`` would also list the frontend's left-out requirements.
REQUIREMENTS_CODE = r"""
import importlib.metadata as md, re, sys
for name in sys.argv[1:]:
    try:
        dist = md.distribution(name)
    except md.PackageNotFoundError:
        print(f"UNMET {name} is not installed")
        continue
    for req in dist.requires or []:
        if "extra ==" in req:
            continue
        project = re.split(r"[\s<>=!~;\[(]", req, maxsplit=1)[0]
        try:
            md.distribution(project)
        except md.PackageNotFoundError:
            print(f"UNMET {name} {dist.version} requires {req}, which is not installed")
"""


def stage_install(ctx: core.Context, timeout: float) -> core.Result:
    """Install the wheelhouse offline into ``<out>/site-packages``: our wheels always, the
    runtime wheels (cudnn frontend, cuda-bindings) only where the node lacks them."""
    if ctx.wheelhouse is None:
        return {"status": "skipped", "summary": "no wheelhouse (using the installed packages)"}
    manifest = json.loads((ctx.wheelhouse / MANIFEST).read_text(encoding="utf-8"))
    shutil.rmtree(ctx.site, ignore_errors=True)
    ctx.site.mkdir(parents=True)
    chosen, kept, opencl_wheels = [], [], []
    for entry in manifest["wheels"]:
        if entry["role"] == "opencl":  # the OpenCL backend's: installed apart, below
            if entry["project"] == "arraycore-opencl" or not importable(ctx, entry["import"]):
                opencl_wheels.append(ctx.wheelhouse / entry["file"])
        elif entry["role"] == "ours" or not importable(ctx, entry["import"]):
            chosen.append(ctx.wheelhouse / entry["file"])
        else:
            kept.append(f"{entry['project']} (the node has {entry['import']})")
    has_pip = subprocess.run(
        [ctx.python, "-m", "pip", "--version"], capture_output=True, timeout=60
    ).returncode
    if has_pip == 0:
        pip = [ctx.python, "-m", "pip", "install", "--no-index", "--no-deps", "--no-compile"]
        pip += ["--disable-pip-version-check", "--find-links", str(ctx.wheelhouse)]
        run = ctx.run("install", [*pip, "--target", str(ctx.site), *map(str, chosen)], timeout)
        if run.rc != 0:
            return core.outcome(
                run, False, f"pip install --no-index failed: {core.tail(run.output, 5)}"
            )
        how = "pip install --no-index --no-deps --target"
        opencl_note = ""
        if opencl_wheels:  # its own call: a wheel this node refuses (glibc) must not stop the rest
            cmd = [*pip, "--target", str(ctx.site), *map(str, opencl_wheels)]
            run = ctx.run("install", cmd, timeout)
            opencl_note = (
                f"; the OpenCL backend's {len(opencl_wheels)} wheels too"
                if run.rc == 0
                else f"; the OpenCL backend's wheels did NOT install: {core.tail(run.output, 2)}"
            )
    else:
        for wheel in [*chosen, *opencl_wheels]:
            core.unpack_wheel(wheel, ctx.site)
        how = "unpacked (this Python has no pip)"
        opencl_note = ""
    check = ctx.run("install", [ctx.python, "-c", REQUIREMENTS_CODE, *OURS], 120)
    unmet = [
        line[len("UNMET ") :] for line in check.output.splitlines() if line.startswith("UNMET ")
    ]
    summary = f"{len(chosen)} wheels {how} into {ctx.site.name}/{opencl_note}"
    if kept:
        summary += "; kept the node's " + ", ".join(kept)
    if unmet:
        summary += "; unmet: " + "; ".join(unmet)
    return {
        "status": "failed" if unmet else "passed",
        "summary": summary,
        "installed": [p.name for p in chosen],
    }


VERSIONS_CODE = r"""
import importlib, importlib.metadata as md, importlib.util, json, platform, sys
out = {"python": sys.version.split()[0], "platform": platform.platform()}
def dist(name):
    try:
        d = md.distribution(name)
        return f"{d.version} ({d.locate_file('')})"
    except md.PackageNotFoundError:
        return None
for name in ("arraycore", "arraycore-cuda", "nnlayers", "numpy", "cupy-cuda13x", "cupy-cuda12x",
             "nvidia-cudnn-cu13", "nvidia-cudnn-cu12", "nvidia-cudnn-frontend", "cuda-bindings",
             "cuda-pathfinder", "torch", "pytest", "hypothesis", "nvidia-cutlass-dsl",
             "apache-tvm-ffi"):
    out[name] = dist(name)
try:
    import cupy
    out["cupy.cuda runtime"] = cupy.cuda.runtime.runtimeGetVersion()
    out["cupy.cuda driver"] = cupy.cuda.runtime.driverGetVersion()
except Exception as exc:
    out["cupy error"] = f"{type(exc).__name__}: {exc}"
try:
    import cudnn
    out["libcudnn"] = cudnn.backend_version_string()
except Exception as exc:
    out["libcudnn error"] = f"{type(exc).__name__}: {exc}"
try:
    import torch
    out["torch.cuda"] = [torch.version.cuda, torch.cuda.is_available()]
except Exception as exc:
    out["torch error"] = f"{type(exc).__name__}: {exc}"
print("VERSIONS " + json.dumps(out))
"""


def stage_versions(ctx: core.Context, timeout: float) -> core.Result:
    """Driver, GPU, CuPy, libcudnn, cudnn-frontend, torch and our own versions."""
    run = ctx.run("versions", [ctx.python, "-c", VERSIONS_CODE], timeout)
    found = next((ln for ln in run.output.splitlines() if ln.startswith("VERSIONS ")), None)
    if found is None:
        return core.outcome(run, False, f"no versions printed: {core.tail(run.output, 5)}")
    versions = {
        "driver CUDA": ctx.gpu.driver_cuda or None,
        "GPUs": ctx.gpu.devices,
        **json.loads(found[len("VERSIONS ") :]),
    }
    problems = [f"{name} is not installed" for name in OURS if not versions.get(name)]
    if ctx.gpu.present:
        problems += gpu_version_problems(versions)
    summary = "; ".join(
        f"{k} {str(v).split(' (')[0]}"
        for k, v in versions.items()
        if k in ("arraycore", "numpy", "cupy-cuda13x", "cupy-cuda12x", "libcudnn", "torch") and v
    )
    if problems:
        summary += "; " + "; ".join(problems)
    return core.outcome(run, not problems, summary, versions=versions, problems=problems)


def gpu_version_problems(versions: dict[str, Any]) -> list[str]:
    """What keeps the cuda backend from its full path on a GPU node: CuPy missing or built for a
    newer CUDA than the driver's, libcudnn or the cudnn frontend missing."""
    problems = []
    if "cupy error" in versions:
        problems.append(f"CuPy does not import: {versions['cupy error']}")
    else:
        runtime, driver = versions["cupy.cuda runtime"], versions["cupy.cuda driver"]
        if runtime // 1000 > driver // 1000:
            problems.append(f"CuPy's CUDA runtime {runtime} is newer than the driver's {driver}")
    if not versions.get("nvidia-cudnn-frontend"):
        problems.append("nvidia-cudnn-frontend is not installed")
    elif "libcudnn error" in versions:
        problems.append(f"libcudnn does not load: {versions['libcudnn error']}")
    return problems


#: Packages of optional extras that some modules need (``arraycore[numba]``'s kernels: numba and
#: its code generator llvmlite): a module that fails to import for want of one alone is
#: reported, not failed.
OPTIONAL_IMPORTS = ("numba", "llvmlite")

IMPORTS_CODE = r"""
import importlib, pkgutil, sys, traceback
extras = set(sys.argv[1:])
failed, optional, count = [], [], 0
for top in ("arraycore", "arraycore_cuda", "nnlayers"):
    try:
        package = importlib.import_module(top)
    except BaseException as exc:
        failed.append(f"{top}: {type(exc).__name__}: {exc}")
        continue
    names = [top] + [m.name for m in pkgutil.walk_packages(package.__path__, top + ".",
                                                           onerror=failed.append)]
    for name in names:
        try:
            importlib.import_module(name)
            count += 1
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] in extras:
                optional.append(f"{name} (needs {exc.name}, an optional extra)")
            else:
                failed.append(f"{name}: {type(exc).__name__}: {exc}")
        except BaseException as exc:
            failed.append(f"{name}: {type(exc).__name__}: {exc}")
print(f"IMPORTED {count}")
for line in optional:
    print(f"OPTIONAL {line}")
for line in failed:
    print(f"FAILED {line}")
sys.exit(1 if failed else 0)
"""


def stage_imports(ctx: core.Context, timeout: float) -> core.Result:
    """Every module of arraycore, arraycore_cuda and nnlayers imports (those that need an
    optional extra that is not installed, :data:`OPTIONAL_IMPORTS`, are listed instead)."""
    run = ctx.run("imports", [ctx.python, "-c", IMPORTS_CODE, *OPTIONAL_IMPORTS], timeout)
    count = re.search(r"^IMPORTED (\d+)$", run.output, re.M)
    lines = run.output.splitlines()
    failed = [ln[len("FAILED ") :] for ln in lines if ln.startswith("FAILED ")]
    optional = [ln[len("OPTIONAL ") :] for ln in lines if ln.startswith("OPTIONAL ")]
    summary = f"{count.group(1) if count else 0} modules imported"
    if optional:
        summary += f"; {len(optional)} left out, their extra absent: {', '.join(optional)}"
    if failed or run.rc != 0:
        summary += f"; {len(failed)} failed" + (f": {failed[0]}" if failed else "")
    return core.outcome(run, run.rc == 0 and count is not None, summary, failures=failed)


def stage_info(ctx: core.Context, timeout: float) -> core.Result:
    run = ctx.run(
        "info", [ctx.python, "-m", "arraycore", "info"], timeout, ARRAYCORE_BACKEND="cuda"
    )
    usable = re.search(r"^\s+cuda: usable", run.output, re.M) is not None
    path = re.search(r"nn kernels: (.*)$", run.output, re.M)
    summary = "cuda usable" if usable else "cuda NOT usable: " + core.tail(run.output, 3)
    if path:
        summary += f"; nn kernels: {path.group(1)}"
    return core.outcome(run, run.rc == 0 and usable, summary, text=run.output)


def stage_cuda_tests(ctx: core.Context, timeout: float) -> core.Result:
    tests = core.repo_path(ctx, "packages", "arraycore-cuda", "tests")
    if tests is None:
        return core.no_checkout("packages/arraycore-cuda/tests")
    return core.pytest_stage(ctx, "cuda-tests", [str(tests)], timeout)


def conformance_stage(name: str, **env: str) -> Callable[[core.Context, float], core.Result]:
    def stage(ctx: core.Context, timeout: float) -> core.Result:
        args = ["--pyargs", "arraycore.testing.conformance", "--arraycore-backend=cuda"]
        return core.pytest_stage(ctx, name, args, timeout, **env)

    stage.__doc__ = f"The conformance kit on cuda{' with ' + str(env) if env else ''}."
    return stage


def stage_nnlayers(ctx: core.Context, timeout: float) -> core.Result:
    tests = core.repo_path(ctx, "packages", "nnlayers", "tests")
    if tests is None:
        return core.no_checkout("packages/nnlayers/tests")
    return core.pytest_stage(ctx, "nnlayers", [str(tests)], timeout, ARRAYCORE_BACKEND="cuda")


ACCURACY = re.compile(r"held-out accuracy ([0-9.]+)%")


def stage_capture(ctx: core.Context, timeout: float) -> core.Result:
    """``arraycore_cuda.capture_check`` on cuda: risks, networks captured against eager, times
    against PyTorch eager and graphed (its table goes into the summary's details)."""
    bench = core.repo_path(ctx, "packages", "nnlayers", "benchmarks")
    if bench is None:
        return core.no_checkout("packages/nnlayers/benchmarks")
    result = ctx.out / "capture.json"
    result.unlink(missing_ok=True)
    cmd = [ctx.python, "-m", "arraycore_cuda.capture_check", "--benchmarks", str(bench)]
    cmd += ["--json", str(result), "--steps", "50" if ctx.quick else "200"]
    run = ctx.run("capture", cmd, timeout, ARRAYCORE_BACKEND="cuda")
    if not result.is_file():
        return core.outcome(run, False, f"no results written: {core.tail(run.output, 5)}")
    data = json.loads(result.read_text(encoding="utf-8"))
    counts: dict[str, dict[str, int]] = {}
    bad = []
    for group in ("risks", "networks", "timing"):
        for name, found in data.get(group, {}).items():
            counts.setdefault(group, {}).setdefault(found["status"], 0)
            counts[group][found["status"]] += 1
            if found["status"] in ("failed", "error"):
                bad.append(f"{group}/{name}: {found.get('detail', '')[:120]}")
    summary = "; ".join(
        f"{group} " + ", ".join(f"{n} {s}" for s, n in sorted(c.items()))
        for group, c in counts.items()
    )
    if bad:
        summary += "; " + "; ".join(bad[:4])
    ok = run.rc == 0 and not bad
    return core.outcome(run, ok, summary, capture=data, table=data.get("table", ""))


def stage_demo(ctx: core.Context, timeout: float) -> core.Result:
    """The digits demo on numpy, then on cuda; the accuracies differ by at most 0.5 points."""
    found: dict[str, Any] = {}
    for backend in ("numpy", "cuda"):
        folder = ctx.out / f"demo-{backend}"
        cmd = [ctx.python, "-m", "nnlayers.demo", "--quiet", "--out", str(folder)]
        run = ctx.run(f"demo-{backend}", cmd, timeout / 2, ARRAYCORE_BACKEND=backend)
        match = ACCURACY.search(run.output)
        found[backend] = {
            "rc": run.rc,
            "seconds": round(run.seconds, 1),
            "accuracy": float(match.group(1)) if match else None,
        }
        if run.timed_out:
            return core.outcome(run, False, f"the {backend} demo did not finish", runs=found)
    acc = [found[b]["accuracy"] for b in ("numpy", "cuda")]
    if None in acc:
        return {"status": "failed", "summary": f"no accuracy printed: {found}", "runs": found}
    diff = abs(acc[0] - acc[1])
    ok = diff <= DEMO_TOLERANCE_POINTS and all(found[b]["rc"] == 0 for b in found)
    summary = f"numpy {acc[0]:.2f}%, cuda {acc[1]:.2f}% ({diff:.2f} points apart)"
    return {"status": "passed" if ok else "failed", "summary": summary, "runs": found}


def _run_bench(
    ctx: core.Context,
    timeout: float,
    stage: str,
    script_name: str,
    args: list[str],
    rows: Callable[[Any], list[tuple[str, dict[str, float]]]],
) -> core.Result:
    """Run one benchmark script on the cuda backend with ``--json``; the result holds the
    nnlayers[cuda] / PyTorch[cuda] ratio of each ``(name, medians)`` that ``rows`` reads."""
    script = core.repo_path(ctx, "packages", "nnlayers", "benchmarks", script_name)
    if script is None:
        return core.no_checkout("packages/nnlayers/benchmarks")
    result = ctx.out / f"{stage}.json"
    result.unlink(missing_ok=True)
    cmd = [ctx.python, str(script), *args, "--json", str(result)]
    run = ctx.run(stage, cmd, timeout, ARRAYCORE_BACKEND="cuda")
    if not result.is_file():
        return core.outcome(run, False, f"no results written: {core.tail(run.output, 5)}")
    data = json.loads(result.read_text(encoding="utf-8"))
    ratios = {}
    for name, times in rows(data):
        if times.get("nnlayers[cuda]") and times.get("PyTorch[cuda]"):
            ratios[name] = round(times["nnlayers[cuda]"] / times["PyTorch[cuda]"], 3)
    if not ratios:
        return core.outcome(
            run, False, "no nnlayers[cuda] / PyTorch[cuda] pair was timed", bench=data
        )
    summary = "; ".join(f"{name} {ratio:.2f}x" for name, ratio in ratios.items())
    met = all(ratio <= BENCH_TARGET for ratio in ratios.values())
    summary += f" (target <= {BENCH_TARGET}x: {'met' if met else 'NOT met'})"
    return core.outcome(run, run.rc == 0, summary, ratios=ratios, target_met=met, bench=data)


def stage_bench(ctx: core.Context, timeout: float) -> core.Result:
    """nnlayers[cuda] against PyTorch on the same GPU: ratios of median step times."""
    args = ["--budget", "1" if ctx.quick else "6", "--only", "mlp,lenet,small,memory"]
    return _run_bench(
        ctx,
        timeout,
        "bench",
        "bench_training.py",
        args,
        lambda data: [(case["name"], case["median_seconds"]) for case in data["cases"]],
    )


def stage_bench_networks(ctx: core.Context, timeout: float) -> core.Result:
    """The realistic suite (VGG-BN, ResNet-style, LSTM, GRU, transformer block) on the GPU:
    nnlayers[cuda] against PyTorch[cuda], every CPU core for the CPU columns."""
    args = ["--budget", "1" if ctx.quick else "4", "--threads", "all"]
    return _run_bench(
        ctx,
        timeout,
        "bench-networks",
        "bench_networks.py",
        args,
        lambda data: [(row["key"], row["median"]) for row in data["runs"][-1]["rows"]],
    )


def profile_tops(output: str) -> list[tuple[str, str]]:
    """``(case, "op phase")`` of the costliest row of each case's first table in the output of
    ``bench_networks.py --profile``."""
    tops = []
    for block in re.split(r"^## ", output, flags=re.MULTILINE)[1:]:
        lines = block.splitlines()
        rule = next((k for k, line in enumerate(lines) if line.startswith("---")), len(lines))
        first = lines[rule + 1].split() if rule + 1 < len(lines) else []
        if len(first) >= 2:
            tops.append((lines[0].rsplit(" (", 1)[0], f"{first[0]} {first[1]}"))
    return tops


def stage_profile(ctx: core.Context, timeout: float) -> core.Result:
    """Where each network's step goes on the GPU: ``bench_networks.py --profile`` (nnlayers'
    per-op profile, with the device waited for around each op and with host time alone); the
    tables are in ``logs/profile.log``, the summary names each case's costliest op."""
    script = core.repo_path(ctx, "packages", "nnlayers", "benchmarks", "bench_networks.py")
    if script is None:
        return core.no_checkout("packages/nnlayers/benchmarks")
    cases = ("vgg", "resnet", "lstm", "transformer")
    cmd = [ctx.python, str(script), "--profile", "--only", ",".join(cases)]
    run = ctx.run("profile", cmd, timeout, ARRAYCORE_BACKEND="cuda")
    tops = profile_tops(run.output)
    ok = run.rc == 0 and len(tops) == len(cases)
    summary = "; ".join(f"{case[:28]}: {top}" for case, top in tops)
    if not ok:
        summary = f"profiles missing ({summary}): {core.tail(run.output, 5)}"
    return core.outcome(run, ok, summary, tops=dict(tops))


STAGES: dict[str, Callable[[core.Context, float], core.Result]] = {
    "wheelhouse": stage_wheelhouse,
    "install": stage_install,
    "versions": stage_versions,
    "imports": stage_imports,
    "info": stage_info,
    "capture": stage_capture,
    "cuda-tests": stage_cuda_tests,
    "conformance": conformance_stage("conformance"),
    "conformance-no-cudnn": conformance_stage("conformance-no-cudnn", ARRAYCORE_CUDNN="0"),
    "conformance-primitives": conformance_stage(
        "conformance-primitives", ARRAYCORE_CUDA_OVERRIDES="none"
    ),
    "nnlayers": stage_nnlayers,
    "demo": stage_demo,
    "bench": stage_bench,
    "bench-networks": stage_bench_networks,
    "profile": stage_profile,
    # the OpenCL backend on the node's OpenCL driver (arraycore_cuda/_verify_opencl.py): they
    # need an OpenCL library, not a CUDA GPU (--opencl-library rehearses them on PoCL)
    **opencl.STAGE_FUNCTIONS,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m arraycore_cuda.verify",
        description=__doc__.splitlines()[0] if __doc__ else None,
    )
    parser.add_argument("--out", type=Path, required=True, help="folder for the report and logs")
    parser.add_argument(
        "--wheelhouse",
        type=Path,
        default=None,
        help="folder of `nox -s wheelhouse` (default: <repo>/wheelhouse if it exists)",
    )
    parser.add_argument("--no-wheelhouse", action="store_true", help="use what is installed")
    parser.add_argument("--repo", type=Path, default=None, help="repository checkout (for tests)")
    parser.add_argument("--only", default="", help="comma-separated stages to run")
    parser.add_argument("--deadline", type=float, default=1140.0, help="seconds for the run")
    parser.add_argument("--quick", action="store_true", help="short benchmark budget")
    parser.add_argument(
        "--opencl-library",
        default=None,
        help="an OpenCL ICD library for the opencl-* stages instead of NVIDIA's (PoCL's, to "
        "rehearse them without a GPU)",
    )
    parser.add_argument(
        "--sequential",
        action="store_true",
        help=f"run the GPU stages one after another (default where the node has at least "
        f"{PARALLEL_CORES} cores: {', '.join(PARALLEL_STAGES)} side by side)",
    )
    args = parser.parse_args(argv)

    only = [s for s in args.only.split(",") if s]
    unknown = sorted(set(only) - set(STAGES))
    if unknown:
        parser.error(f"unknown stage(s) {', '.join(unknown)}; stages: {', '.join(STAGES)}")
    here = Path(__file__).resolve().parent
    repo = args.repo or core.find_repo(Path.cwd()) or core.find_repo(here)
    wheelhouse = None
    if not args.no_wheelhouse:
        wheelhouse = args.wheelhouse or (repo / "wheelhouse" if repo else None)
        if wheelhouse is not None and not (wheelhouse / MANIFEST).is_file():
            if args.wheelhouse is not None:
                parser.error(f"{wheelhouse} has no {MANIFEST}: build it with nox -s wheelhouse")
            wheelhouse = None
    out = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    start, started = time.monotonic(), time.strftime("%Y-%m-%d %H:%M:%S %Z")
    ctx = core.Context(
        python=sys.executable,
        out=out,
        repo=repo.resolve() if repo else None,
        wheelhouse=wheelhouse.resolve() if wheelhouse else None,
        site=out / "site-packages",
        deadline=start + args.deadline,
        gpu=core.probe_gpu(),
        quick=args.quick,
        opencl_library=args.opencl_library,
    )
    results: dict[str, core.Result] = {}
    earlier = core.previous_stages(out / "report.json") if only else {}
    lock = threading.Lock()

    def run_stage(name: str) -> None:
        if name in GPU_STAGES and not ctx.gpu.present:
            result: core.Result = {"status": "not run", "summary": f"needs a GPU: {ctx.gpu.reason}"}
        elif time.monotonic() >= ctx.deadline:
            result = {"status": "not run", "summary": "the run's deadline had passed"}
        else:
            began = time.monotonic()
            try:
                result = STAGES[name](ctx, TIMEOUTS[name])
            except Exception as exc:  # a bug here must not stop the other stages
                result = {"status": "error", "summary": f"{type(exc).__name__}: {exc}"}
            result["seconds"] = round(time.monotonic() - began, 1)
            if ctx.gpu.present:
                print(f"{name}: {result['status']} ({result['seconds']} s) {result['summary']}")
        with lock:
            results[name] = result
            core.write_report(ctx, _in_order(results), started, time.monotonic() - start)

    selected = [name for name in STAGES if not only or name in only]
    for name in STAGES:
        if only and name not in only and name in earlier:
            results[name] = {**earlier[name], "earlier run": True}
    side_by_side = [
        name
        for name in selected
        if name in PARALLEL_STAGES
        and ctx.gpu.present
        and not args.sequential
        and (os.cpu_count() or 1) >= PARALLEL_CORES
    ]
    ctx.xdist = any(name in selected for name in opencl.PARALLEL) and importable(ctx, "xdist")
    if len(side_by_side) > 1 and importable(ctx, "xdist"):
        ctx.workers = {name: PARALLEL_STAGES[name] for name in side_by_side}
    for name in selected:
        if name in side_by_side and len(side_by_side) > 1:
            if name == side_by_side[0]:
                with ThreadPoolExecutor(max_workers=len(side_by_side)) as pool:
                    list(pool.map(run_stage, side_by_side))
            continue
        run_stage(name)
    results = _in_order(results)
    core.write_report(ctx, results, started, time.monotonic() - start)
    bad = [n for n, r in results.items() if r["status"] not in ("passed", "skipped", "not run")]
    if not ctx.gpu.present:
        ran = ", ".join(f"{n} {r['status']}" for n, r in results.items() if n in HOST_STAGES)
        print(
            f"arraycore_cuda.verify: no NVIDIA GPU here ({ctx.gpu.reason}); ran only the stages "
            f"that need none ({ran}); report in {out / 'report.md'}",
            file=sys.stderr,
        )
        return 1 if bad else 2
    print(f"report: {out / 'report.md'}")
    return 1 if bad else 0


def _in_order(results: dict[str, core.Result]) -> dict[str, core.Result]:
    """``results`` in the order of :data:`STAGES` (stages that ran side by side end in any order)."""
    return {name: results[name] for name in STAGES if name in results}


if __name__ == "__main__":
    raise SystemExit(main())
