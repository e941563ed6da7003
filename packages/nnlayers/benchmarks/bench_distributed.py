"""Data-parallel benchmark: training throughput on 1 and 2 processes (``mpiexec -n P``) and the
time of the gradient all-reduce per step, for the MLP and the LeNet-style CNN of
``bench_training.py``.

Run it with ``python3 -m nox -s bench`` (which installs ``nnlayers[mpi]``: mpi4py and MPICH),
or directly: ``python packages/nnlayers/benchmarks/bench_distributed.py [--procs 1,2] [--quick]
[--json FILE] [--write docs/benchmarks.md]``. It starts ``mpiexec -n P`` of itself for each
``P`` (with ``--worker``) and gathers what rank 0 measured.

What it measures, per network and process count (each rank one BLAS thread, its own batch of
the network's batch size, so the global batch grows with ``P``: weak scaling, as data-parallel
training is used):

- throughput: examples per second over all ranks, from the median time of a block of training
  steps (forward, backward, all-reduce, SGD-with-momentum update) after warm-up steps;
- all-reduce: milliseconds per step in ``DataParallel.reduce`` (packing the gradients into
  flat buckets, ``MPI_Allreduce`` on host buffers, unpacking), and of that the collective
  (``MPI_Allreduce``, waiting for the slower rank included); and ``MPI_Allreduce`` of the same
  bytes alone, right after a barrier (the engine's own cost).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
MARKERS = ("<!-- distributed:start -->", "<!-- distributed:end -->")

#: name -> (kind, per-rank batch, timed steps per block, blocks)
NETWORKS: dict[str, tuple[str, int, int, int]] = {
    "MLP 784-1024-1024-10": ("mlp", 128, 10, 5),
    "CNN (LeNet-style, 28x28)": ("lenet", 64, 4, 5),
}


def build(kind: str) -> Any:
    """The nnlayers model of ``bench_training.py``'s MLP or LeNet, SGD with momentum."""
    import nnlayers.expr as ex
    from nnlayers.layers import Affine, Conv2D, Flatten, Pool2D, Sequential
    from nnlayers.models import Model
    from nnlayers.optim import SGD

    if kind == "lenet":
        layers: list[Any] = [
            Conv2D(20, 5, activation="relu"),
            Pool2D(2),
            Conv2D(50, 5, activation="relu"),
            Pool2D(2),
            Flatten(),
            Affine(500, activation="relu"),
            Affine(10),
        ]
        shape: tuple[int, ...] = (1, 28, 28)
    else:
        layers = [Affine(1024, activation="relu"), Affine(1024, activation="relu"), Affine(10)]
        shape = (784,)
    x = ex.placeholder((None, *shape), name="x")
    y = ex.placeholder((None,), "int64", name="y")
    loss = ex.softmax_cross_entropy(Sequential(layers, seed=0)(x), y)
    return Model(loss, inputs=[x, y], optimizer=SGD(0.01, momentum=0.9)), shape


def worker(quick: bool, out: Path) -> None:
    """One rank: time every network, rank 0 writes the results to ``out``."""
    import arraycore
    import nnlayers.distributed as dist
    from nnlayers.distributed.buckets import layout

    context = dist.init()
    arraycore.set_threads(1)
    results = []
    for name, (kind, batch, steps, blocks) in NETWORKS.items():
        if quick:
            steps, blocks = max(2, steps // 2), 3
        model, shape = build(kind)
        model = dist.data_parallel(model)
        sync = model.data_parallel
        rng = np.random.default_rng(1 + context.rank)
        data = [
            (
                rng.standard_normal((batch, *shape), dtype=np.float32),
                rng.integers(0, 10, batch, dtype=np.int64),
            )
            for _ in range(4)
        ]
        for k in range(3):  # warm-up: first-use allocations, kernel choices
            model.train_step(data[k % 4])
        times, reduce_ms, collective_ms = [], [], []
        for _ in range(blocks):
            context.barrier()
            r0, c0, n0 = sync.reduce_seconds, sync.allreduce_seconds, sync.reductions
            start = time.perf_counter()
            for k in range(steps):
                loss = model.train_step(data[k % 4])[0]
            float(model.xp.to_numpy(loss))  # the step's work has finished
            elapsed = time.perf_counter() - start
            slowest = max(context.allgather(elapsed))
            times.append(slowest / steps)
            reductions = max(1, sync.reductions - n0)
            reduce_ms.append(1e3 * (sync.reduce_seconds - r0) / reductions)
            collective_ms.append(1e3 * (sync.allreduce_seconds - c0) / reductions)
        step = statistics.median(times)
        gradients = sum(int(np.prod(p.shape)) for p in model.params)
        alone = []  # the collective on its own: the same bytes, the ranks in step (a barrier)
        buffer = np.ones(gradients + 1, dtype=np.float32)
        for _ in range(blocks * 2):
            context.barrier()
            start = time.perf_counter()
            context.allreduce_sum(buffer)
            alone.append(time.perf_counter() - start)
        results.append(
            {
                "network": name,
                "procs": context.world_size,
                "batch_per_rank": batch,
                "step_ms": 1e3 * step,
                "examples_per_second": context.world_size * batch / step,
                "allreduce_ms": statistics.median(reduce_ms) if context.distributed else 0.0,
                "collective_ms": statistics.median(collective_ms) if context.distributed else 0.0,
                "mpi_allreduce_ms": 1e3 * statistics.median(alone) if context.distributed else 0.0,
                "gradient_mb": 4 * gradients / 2**20,
                "buckets": len(layout(model.params, sync.bucket_bytes)),
            }
        )
    if context.is_main:
        out.write_text(json.dumps(results, indent=2), encoding="utf-8")


def mpiexec() -> str:
    beside = Path(sys.executable).parent / "mpiexec"  # the MPICH wheel's, beside python
    if beside.exists():
        return str(beside)
    found = subprocess.run(["which", "mpiexec"], capture_output=True, text=True, check=False)
    if found.returncode or not found.stdout.strip():
        sys.exit('bench_distributed.py: no mpiexec; pip install "nnlayers[mpi]" (mpi4py, MPICH)')
    return found.stdout.strip()


def run(procs: list[int], quick: bool) -> list[dict[str, Any]]:
    """Start ``mpiexec -n P`` of the worker for each ``P``; every result of every run."""
    rows: list[dict[str, Any]] = []
    env = dict(os.environ, ARRAYCORE_NUM_THREADS="1", OMP_NUM_THREADS="1")
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # Open MPI refuses root unless told twice
        env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    for p in procs:
        with tempfile.TemporaryDirectory() as tmp:
            out = Path(tmp) / "results.json"
            command = [mpiexec(), "-n", str(p), sys.executable, __file__, "--worker", str(out)]
            if quick:
                command.append("--quick")
            print(f"$ {' '.join(command)}", flush=True)
            subprocess.run(command, env=env, check=True, timeout=1800)
            rows += json.loads(out.read_text(encoding="utf-8"))
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of the runs, with each network's speed-up over one process."""
    single = {r["network"]: r["examples_per_second"] for r in rows if r["procs"] == 1}
    lines = [
        "| network | processes | batch per rank | step | examples/s (all ranks) | speed-up | "
        "all-reduce per step | of which the collective | MPI_Allreduce alone | gradients |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        base = single.get(r["network"])
        speedup = f"{r['examples_per_second'] / base:.2f}x" if base else "-"
        reduce = f"{r['allreduce_ms']:.1f} ms" if r["procs"] > 1 else "-"
        collective = f"{r['collective_ms']:.1f} ms" if r["procs"] > 1 else "-"
        alone = f"{r['mpi_allreduce_ms']:.1f} ms" if r["procs"] > 1 else "-"
        lines.append(
            f"| {r['network']} | {r['procs']} | {r['batch_per_rank']} | {r['step_ms']:.1f} ms | "
            f"{r['examples_per_second']:,.0f} | {speedup} | {reduce} | {collective} | {alone} | "
            f"{r['gradient_mb']:.1f} MB in {r['buckets']} bucket(s) |"
        )
    return "\n".join(lines)


def report(rows: list[dict[str, Any]]) -> str:
    import mpi4py
    from mpi4py import MPI

    library = " ".join(MPI.Get_library_version().split()[:3])  # "MPICH Version: 5.0.2"
    cores = os.cpu_count()
    when = time.strftime("%Y-%m-%d")
    return "\n".join(
        [
            f"Data-parallel training on the NumPy backend, {platform.processor() or platform.machine()}"
            f" ({cores} cores), {when}: mpi4py {mpi4py.__version__}, {library}; each rank one "
            "BLAS thread and its own batch (weak scaling). The all-reduce per step is "
            "`DataParallel.reduce`: gradients packed into flat host buckets, `MPI_Allreduce`, "
            'unpacked; its collective includes waiting for the slower rank. "MPI_Allreduce '
            'alone" sums the same bytes right after a barrier. Written by '
            "`packages/nnlayers/benchmarks/bench_distributed.py` (`nox -s bench`).",
            "",
            table(rows),
        ]
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--procs", default="1,2", help="process counts, comma-separated")
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke test)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON")
    parser.add_argument("--write", type=Path, help="rewrite this page's distributed block")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker is not None:
        worker(args.quick, args.worker)
        return 0
    rows = run([int(p) for p in args.procs.split(",")], args.quick)
    text = report(rows)
    print(text)
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    if args.write is not None:
        sys.path.insert(0, str(HERE))
        from bench_report import write_docs

        path = args.write if args.write.is_absolute() else ROOT / args.write
        write_docs(path, text, MARKERS)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
