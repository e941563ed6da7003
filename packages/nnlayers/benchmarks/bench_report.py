"""The tables and files of ``bench_training.py``: the Markdown block it writes into
``docs/benchmarks.md`` and the JSON of a run."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import re
from pathlib import Path
from typing import Any

import numpy as np

import arraycore

CUDA_NN, CUDA_TORCH = "nnlayers[cuda]", "PyTorch[cuda]"
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


def machine(torch: str) -> dict[str, str]:
    """CPU model and cores, library versions (``torch``: PyTorch's, or why it is absent), date."""
    cpu = platform.processor() or platform.machine()
    try:
        text = Path("/proc/cpuinfo").read_text()
        found = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
        if found:
            cpu = found.group(1).strip()
    except OSError:
        pass
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]  # type: ignore[index]
        blas_name = f"{blas['name']} {blas.get('version', '')}".strip()
    except Exception:
        blas_name = "unknown BLAS"
    return {
        "cpu": f"{cpu}, {os.cpu_count()} logical cores",
        "python": platform.python_version(),
        "numpy": f"numpy {np.__version__} ({blas_name})",
        "torch": torch,
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


def gpu_info(torch_steps: Any) -> str:
    """The GPU (the CUDA backend's device; torch's name for it too where torch sees it), CuPy,
    CUDA runtime and driver versions (as ``arraycore info`` reports them), torch's CUDA and
    cuDNN versions and TF32 settings (``torch_steps``: the module, where torch sees the GPU, else
    None). Called only when the ``cuda`` backend is in use."""
    xp = arraycore.namespace("cuda")
    parts = [f"GPU {xp.device}", type(xp._backend).version()]
    if torch_steps is not None:
        parts.append(f"PyTorch on {torch_steps.cuda_info()}")
    tf32 = os.environ.get("CUPY_TF32", "0")
    on = tf32.strip().isdigit() and int(tf32) > 0  # CuPy's own test for it
    parts.append(f"CUPY_TF32={tf32} ({'TF32 on' if on else 'full float32'} in CuPy's matmuls)")
    return "; ".join(parts)


def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}" if seconds < 0.1 else f"{seconds * 1e3:.0f}"


def ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a / b:.2f}x"


def step_table(results: list[tuple[Any, list[Any]]], memory: dict[str, dict[str, int]]) -> str:
    names = [impl.name for impl in results[0][1]]
    head = ["network", *[f"{n} ms" for n in names], "nnlayers / NumPy", "nnlayers / PyTorch"]
    extra = [n for n in names if n.startswith("nnlayers[")]
    head += [f"{n} / NumPy" for n in extra]
    gpu_pair = CUDA_NN in names and CUDA_TORCH in names
    if gpu_pair:
        head.append(f"{CUDA_NN} / {CUDA_TORCH}")
    head += ["peak MB nnlayers", "peak MB NumPy", "memory ratio"]
    gpu_mem = [n for n in (CUDA_NN, CUDA_TORCH) if any(n in m for m in memory.values())]
    head += [f"peak device MB {n}" for n in gpu_mem]
    if len(gpu_mem) == 2:
        head.append("device memory ratio")
    rows = [head, ["---"] * len(head)]
    for case, impls in results:
        med = {i.name: i.median for i in impls}
        mem = memory.get(case.name, {})
        row = [case.name, *[fmt_ms(med[n]) for n in names]]
        row += [ratio(med["nnlayers"], med["NumPy"]), ratio(med["nnlayers"], med.get("PyTorch"))]
        row += [ratio(med[n], med["NumPy"]) for n in extra]
        if gpu_pair:
            row.append(ratio(med[CUDA_NN], med[CUDA_TORCH]))
        mn, mp = mem.get("nnlayers"), mem.get("NumPy")
        row += [
            "-" if mn is None else f"{mn / 2**20:.1f}",
            "-" if mp is None else f"{mp / 2**20:.1f}",
            ratio(mn, mp),
        ]
        row += ["-" if mem.get(n) is None else f"{mem[n] / 2**20:.1f}" for n in gpu_mem]
        if len(gpu_mem) == 2:
            row.append(ratio(mem.get(CUDA_NN), mem.get(CUDA_TORCH)))
        rows.append(row)
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def sweep_table(results: list[tuple[Any, list[Any]]]) -> str:
    names = [impl.name for impl in results[0][1]]
    head = ["batch", *[f"{n} µs/sample" for n in names], "nnlayers / NumPy", "nnlayers / PyTorch"]
    gpu_pair = CUDA_NN in names and CUDA_TORCH in names
    if gpu_pair:
        head.append(f"{CUDA_NN} / {CUDA_TORCH}")
    rows = [head, ["---"] * len(head)]
    for case, impls in results:
        med = {i.name: i.median for i in impls}
        row = [str(case.batch), *[f"{med[n] / case.batch * 1e6:.1f}" for n in names]]
        row += [ratio(med["nnlayers"], med["NumPy"]), ratio(med["nnlayers"], med.get("PyTorch"))]
        if gpu_pair:
            row.append(ratio(med[CUDA_NN], med[CUDA_TORCH]))
        rows.append(row)
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def report(
    info: dict[str, str], threads: int, pools: str, steps: str, sweep: str, notes: list[str]
) -> str:
    gpu = f" GPU implementations: {info['gpu']}." if info.get("gpu") else ""
    lines = [
        f"Measured {info['date']} on {info['cpu']}; Python {info['python']}, {info['numpy']}, "
        f"{info['torch']}. Every implementation ran with {threads} thread(s) ({pools}).{gpu}",
        "",
        "Median training step (forward, backward, SGD-momentum update), float32, timed "
        "round-robin in one run:",
        "",
        steps,
        "",
        "MLP 784-1024-1024-10, per-sample cost of a step by batch size:",
        "",
        sweep,
    ]
    if notes:
        lines += ["", *[f"- {n}" for n in notes]]
    return "\n".join(lines)


def write_docs(path: Path, text: str, markers: tuple[str, str] = (START, END)) -> None:
    """Replace the text between the ``markers`` of ``path`` (create the page if missing)."""
    start, end = markers
    block = f"{start}\n{text}\n{end}"
    if path.exists():
        old = path.read_text(encoding="utf-8")
        if start in old and end in old:
            before, rest = old.split(start, 1)
            after = rest.split(end, 1)[1]
            path.write_text(before + block + after, encoding="utf-8")
            return
        path.write_text(old.rstrip() + "\n\n" + block + "\n", encoding="utf-8")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# Benchmarks\n\n{block}\n", encoding="utf-8")


def write_json(
    path: Path,
    info: dict[str, str],
    threads: int,
    results: list[tuple[Any, list[Any]]],
    memory: dict[str, dict[str, int]],
    sweep: list[tuple[Any, list[Any]]],
    notes: list[str],
) -> None:
    """The run's figures for programs (the offline GPU verification reads them): median step
    seconds per case and implementation, peak bytes, the sweep and the notes."""
    data = {
        "machine": info,
        "threads": threads,
        "cases": [
            {
                "name": case.name,
                "batch": case.batch,
                "median_seconds": {impl.name: impl.median for impl in impls},
                "repeats": {impl.name: len(impl.times) for impl in impls},
                "peak_bytes": memory.get(case.name, {}),
            }
            for case, impls in results
        ],
        "sweep": [
            {"name": case.name, "median_seconds": {impl.name: impl.median for impl in impls}}
            for case, impls in sweep
        ],
        "notes": notes,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
