"""The machinery of ``arraycore_cuda.verify``: the GPU probe, child processes with timeouts,
pytest's JUnit counts, wheels unpacked without pip, and the Markdown/JSON report.

Standard library only, like ``verify`` itself, which imports it both as a module of the package
and, when run as a file before anything is installed, as a module beside it.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
import subprocess
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree


# -- the GPU, found without CuPy ----------------------------------------------------------------
@dataclass
class Gpu:
    """What the NVIDIA driver reports (through ``libcuda``, with ctypes)."""

    present: bool
    reason: str = ""
    driver_cuda: str = ""
    devices: list[str] = field(default_factory=list)


def probe_gpu() -> Gpu:
    """Ask the driver API for its CUDA version and devices; never raises."""
    lib = None
    for name in ("libcuda.so.1", "libcuda.so", "nvcuda.dll"):
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    if lib is None:
        return Gpu(False, "no NVIDIA driver (libcuda.so.1 cannot be loaded)")
    version, count = ctypes.c_int(0), ctypes.c_int(0)
    lib.cuDriverGetVersion(ctypes.byref(version))
    cuda = f"{version.value // 1000}.{version.value % 1000 // 10}"
    err = lib.cuInit(0)
    if err != 0:
        return Gpu(False, f"the NVIDIA driver (CUDA {cuda}) found no usable GPU (cuInit: {err})")
    lib.cuDeviceGetCount(ctypes.byref(count))
    if count.value == 0:
        return Gpu(False, f"the NVIDIA driver (CUDA {cuda}) sees no GPU", cuda)
    devices = []
    for index in range(count.value):
        dev, major, minor, total = ctypes.c_int(), ctypes.c_int(), ctypes.c_int(), ctypes.c_size_t()
        name_buf = ctypes.create_string_buffer(256)
        lib.cuDeviceGet(ctypes.byref(dev), index)
        lib.cuDeviceGetName(name_buf, 256, dev)
        lib.cuDeviceGetAttribute(ctypes.byref(major), 75, dev)  # compute capability major
        lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, dev)
        lib.cuDeviceTotalMem_v2(ctypes.byref(total), dev)
        devices.append(
            f"{index}: {name_buf.value.decode(errors='replace')} (sm_{major.value}{minor.value}, "
            f"{total.value / 2**30:.0f} GiB)"
        )
    return Gpu(True, "", cuda, devices)


# -- running a stage ----------------------------------------------------------------------------
@dataclass
class Run:
    """One child process: exit status (None when killed at its timeout), seconds, output."""

    rc: int | None
    seconds: float
    output: str

    @property
    def timed_out(self) -> bool:
        return self.rc is None


@dataclass
class Context:
    """What every stage needs: the Python, the folders and the environment of the children."""

    python: str
    out: Path
    repo: Path | None
    wheelhouse: Path | None
    site: Path
    deadline: float
    gpu: Gpu
    quick: bool = False
    logs: list[str] = field(default_factory=list)
    #: pytest-xdist workers per pytest stage (stages run side by side on a many-core node)
    workers: dict[str, int] = field(default_factory=dict)
    #: an OpenCL ICD library for the OpenCL stages other than NVIDIA's (``--opencl-library``)
    opencl_library: str | None = None
    #: whether the node's Python has pytest-xdist (the OpenCL test stages use its workers)
    xdist: bool = False

    def env(self, **extra: str) -> dict[str, str]:
        env = dict(os.environ)
        if self.site.is_dir():
            env["PYTHONPATH"] = os.pathsep.join(
                filter(None, [str(self.site), env.get("PYTHONPATH", "")])
            )
        env.setdefault("PYTHONUNBUFFERED", "1")
        env.update(extra)
        return env

    def run(self, name: str, cmd: list[str], timeout: float, **env: str) -> Run:
        """Run ``cmd`` (cwd: the repo or the out folder), its output teed into ``logs/<name>.log``;
        at the timeout its whole process group is killed."""
        log = self.out / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        limit = max(1.0, min(timeout, self.deadline - time.monotonic()))
        start = time.monotonic()
        with log.open("a", encoding="utf-8") as sink:
            sink.write(f"$ {' '.join(cmd)}\n")
            sink.flush()
            proc = subprocess.Popen(
                cmd,
                cwd=self.repo or self.out,
                env=self.env(**env),
                stdout=sink,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
            try:
                rc: int | None = proc.wait(timeout=limit)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                rc = None
                sink.write(f"\n[killed after {limit:.0f} s]\n")
        self.logs.append(str(log.relative_to(self.out)))
        text = log.read_text(encoding="utf-8", errors="replace")
        return Run(rc, time.monotonic() - start, text)


Result = dict[str, Any]


def outcome(run: Run, ok: bool, summary: str, **details: Any) -> Result:
    """A stage's result from its last command and whether it met its check."""
    if run.timed_out:
        status, summary = "timeout", f"killed at its timeout; {summary}"
    else:
        status = "passed" if ok else "failed"
    return {"status": status, "summary": summary, **details}


def tail(text: str, lines: int = 15) -> str:
    return "\n".join(text.rstrip().splitlines()[-lines:])


# -- pytest stages ------------------------------------------------------------------------------
def junit_counts(path: Path) -> dict[str, Any]:
    """Counts, failing test ids and skip reasons from a pytest ``--junitxml`` file."""
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failures: list[str] = []
    skips: dict[str, int] = {}
    if not path.is_file():
        return {**counts, "failures": failures, "skip_reasons": skips}
    for case in ElementTree.parse(path).getroot().iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        kinds = {child.tag: child for child in case}
        if "failure" in kinds or "error" in kinds:
            key, child = (
                ("failed", kinds["failure"]) if "failure" in kinds else ("errors", kinds["error"])
            )
            counts[key] += 1
            message = (child.get("message") or "").strip().splitlines()
            failures.append(f"{test}: {message[0][:200] if message else child.tag}")
        elif "skipped" in kinds:
            counts["skipped"] += 1
            reason = (kinds["skipped"].get("message") or "").strip()[:200]
            skips[reason] = skips.get(reason, 0) + 1
        else:
            counts["passed"] += 1
    return {**counts, "failures": failures, "skip_reasons": skips}


def pytest_stage(ctx: Context, name: str, args: list[str], timeout: float, **env: str) -> Result:
    """Run pytest with ``args``; the result carries the JUnit counts and failures."""
    junit = ctx.out / "junit" / f"{name}.xml"
    junit.parent.mkdir(parents=True, exist_ok=True)
    junit.unlink(missing_ok=True)
    cmd = [ctx.python, "-m", "pytest", *args, "-q", "-ra", "-p", "no:cacheprovider"]
    workers = ctx.workers.get(name, 0)
    if workers > 1:  # pytest-benchmark refuses to load beside xdist: it is not used here
        cmd += ["-n", str(workers), "-p", "no:benchmark"]
    run = ctx.run(name, [*cmd, f"--junitxml={junit}"], timeout, **env)
    found = junit_counts(junit)
    summary = ", ".join(f"{found[k]} {k}" for k in ("passed", "failed", "errors", "skipped"))
    if run.rc not in (0, 1, None):
        summary += f" (pytest exit {run.rc}: {tail(run.output, 3)})"
    ok = run.rc == 0 and found["passed"] > 0
    return outcome(run, ok, summary, **found)


def repo_path(ctx: Context, *parts: str) -> Path | None:
    path = ctx.repo.joinpath(*parts) if ctx.repo else None
    return path if path is not None and path.exists() else None


def no_checkout(what: str) -> Result:
    return {"status": "skipped", "summary": f"no repository checkout with {what} (--repo)"}


def wheel_tags(filename: str) -> tuple[str, str, str]:
    """(python tag, abi tag, platform tag) of a wheel's file name."""
    parts = filename[: -len(".whl")].split("-")
    return parts[-3], parts[-2], parts[-1]


def unpack_wheel(wheel: Path, target: Path) -> None:
    """Install a wheel by unpacking it (the node's Python has no pip): its ``.data/purelib`` and
    ``.data/platlib`` go beside the packages; scripts and headers are not needed here."""
    with zipfile.ZipFile(wheel) as archive:
        for member in archive.namelist():
            parts = member.split("/")
            if parts[0].endswith(".data"):
                if len(parts) < 3 or parts[1] not in ("purelib", "platlib"):
                    continue
                dest = target.joinpath(*parts[2:])
            else:
                dest = target.joinpath(*parts)
            if member.endswith("/"):
                continue
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(archive.read(member))


# -- the report ---------------------------------------------------------------------------------
def write_report(ctx: Context, results: dict[str, Result], started: str, seconds: float) -> None:
    versions = results.get("versions", {}).get("versions", {})
    report = {
        "started": started,
        "seconds": round(seconds, 1),
        "host": platform.node(),
        "python": ctx.python,
        "gpu": {"present": ctx.gpu.present, "reason": ctx.gpu.reason, "devices": ctx.gpu.devices},
        "versions": versions,
        "stages": results,
    }
    (ctx.out / "report.json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    lines = [
        "# arraycore-cuda offline verification",
        "",
        f"Started {started} on `{platform.node()}`, {seconds / 60:.1f} min in all.",
        f"GPU: {'; '.join(ctx.gpu.devices) if ctx.gpu.present else ctx.gpu.reason}"
        + (f" (driver CUDA {ctx.gpu.driver_cuda})" if ctx.gpu.driver_cuda else ""),
        "",
        "| stage | status | seconds | summary |",
        "| --- | --- | ---: | --- |",
    ]
    for name, res in results.items():
        summary = str(res.get("summary", "")).replace("|", "\\|").replace("\n", " ")
        status = res["status"] + (" (earlier run)" if res.get("earlier run") else "")
        lines.append(f"| {name} | {status} | {res.get('seconds', '')} | {summary} |")
    if versions:
        lines += ["", "## Versions", "", "| what | version |", "| --- | --- |"]
        lines += [f"| {k} | {v} |" for k, v in versions.items()]
    for name, res in results.items():
        extra = res.get("failures") or []
        skips = res.get("skip_reasons") or {}
        if extra or skips:
            lines += ["", f"## {name}", ""]
            lines += [f"- FAILED {item}" for item in extra[:60]]
            if len(extra) > 60:
                lines.append(f"- ... and {len(extra) - 60} more (junit/{name}.xml)")
            lines += [f"- skipped x{n}: {reason}" for reason, n in skips.items()]
    lines += ["", "Logs: " + ", ".join(sorted(set(ctx.logs))), ""]
    (ctx.out / "report.md").write_text("\n".join(lines), encoding="utf-8")


def previous_stages(path: Path) -> dict[str, Result]:
    """The stages of an earlier report in the same folder: a run with --only updates those it
    runs and keeps the rest (a GPU session re-runs what it fixed)."""
    try:
        stages = json.loads(path.read_text(encoding="utf-8"))["stages"]
    except (OSError, ValueError, KeyError, TypeError):
        return {}
    return stages if isinstance(stages, dict) else {}


def find_repo(start: Path) -> Path | None:
    for folder in (start, *start.parents):
        if (folder / "packages" / "nnlayers" / "tests").is_dir():
            return folder
    return None
