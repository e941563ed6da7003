"""Training-step benchmark: nnlayers against hand-written NumPy and PyTorch CPU, in one run.

Run it with ``python3 -m nox -s bench`` (which installs arraycore, nnlayers, threadpoolctl and
torch), or directly: ``python packages/nnlayers/benchmarks/bench_training.py [--threads N]
[--quick] [--write docs/benchmarks.md]``.

What it measures, per network (MLP 784-1024-1024-10 batch 128, the LeNet-style CNN batch 64, a
small MLP 64-64-10 batch 32, and the big MLP at batch sizes 1 to 1024):

- the median time of one training step (forward, backward, SGD-with-momentum update) of every
  implementation, timed round-robin (one block of steps of each implementation in turn, the
  starting one rotating) so that drift on a shared machine hits all of them alike;
- the peak memory of one step of the NumPy-based implementations (``tracemalloc``, which NumPy
  reports its allocations to): everything alive during the step, parameters, optimiser state
  and buffers included, measured after two warm-up steps.

Implementations: nnlayers on the NumPy backend; hand-written NumPy (``numpy_steps.py``);
PyTorch CPU (``torch_steps.py``) when torch is installed; and nnlayers on the backend named by
``ARRAYCORE_BACKEND`` when that is not ``numpy`` and its device exists (a column is added).
All start from the same weights, and their first losses are checked to agree before timing.

BLAS and torch use the same number of threads (``--threads``, default 1: the machine this was
written on has two cores shared with other work, and one thread per implementation gives the
steadiest ratios).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import os
import platform
import re
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE))

import numpy_steps  # noqa: E402

import arraycore  # noqa: E402
import nnlayers.expr as ex  # noqa: E402
from nnlayers.layers import Affine, Conv2D, Flatten, Pool2D, Sequential  # noqa: E402
from nnlayers.models import Model  # noqa: E402
from nnlayers.optim import SGD  # noqa: E402

try:
    import torch_steps
except ImportError as error:  # torch absent: that column is skipped with a note
    torch_steps = None  # type: ignore[assignment]
    TORCH_NOTE = f"PyTorch not installed ({error}); its column is skipped"
else:
    TORCH_NOTE = ""

LR, MOMENTUM = 0.01, 0.9
START, END = "<!-- bench:start -->", "<!-- bench:end -->"


# -- networks ---------------------------------------------------------------------------------
@dataclass
class Case:
    """One benchmark: a network and a batch size."""

    name: str
    kind: str  # "mlp" or "lenet"
    batch: int
    sizes: list[int] = field(default_factory=list)

    @property
    def input_shape(self) -> tuple[int, ...]:
        return (1, 28, 28) if self.kind == "lenet" else (self.sizes[0],)


def nnlayers_model(case: Case) -> Model:
    """The nnlayers model of ``case`` on the active arraycore backend."""
    if case.kind == "lenet":
        layers: list[Any] = [
            Conv2D(20, 5, activation="relu"),
            Pool2D(2),
            Conv2D(50, 5, activation="relu"),
            Pool2D(2),
            Flatten(),
            Affine(500, activation="relu"),
            Affine(10),
        ]
    else:
        hidden, classes = case.sizes[1:-1], case.sizes[-1]
        layers = [Affine(u, activation="relu") for u in hidden] + [Affine(classes)]
    net = Sequential(layers, seed=0)
    x = ex.placeholder((None, *case.input_shape), name="x")
    y = ex.placeholder((None,), "int64", name="y")
    loss = ex.softmax_cross_entropy(net(x), y)
    return Model(loss, inputs=[x, y], optimizer=SGD(LR, momentum=MOMENTUM))


@dataclass
class Impl:
    """An implementation of one case's step: ``step(batch index) -> loss``; ``sync(loss)``."""

    name: str
    step: Callable[[int], Any]
    sync: Callable[[Any], float]
    times: list[float] = field(default_factory=list)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def make_batches(case: Case, count: int = 4) -> list[tuple[np.ndarray, np.ndarray]]:
    """``count`` fixed random batches (float32 inputs, int64 labels)."""
    rng = np.random.default_rng(1)
    return [
        (
            rng.standard_normal((case.batch, *case.input_shape), dtype=np.float32),
            rng.integers(0, 10, case.batch, dtype=np.int64),
        )
        for _ in range(count)
    ]


def _host_float(value: Any) -> float:
    return float(value)


def build_impls(case: Case, extra_backend: str | None) -> tuple[list[Impl], list[np.ndarray]]:
    """Every implementation of ``case``, all starting from nnlayers' initial weights."""
    batches = make_batches(case)
    k = len(batches)
    with arraycore.use("numpy"):
        model = nnlayers_model(case)
    params = [np.array(p.numpy()) for p in model.params]

    def nn_step(i: int, model: Model = model, batches: Any = batches) -> Any:
        return model.train_step(batches[i % k])[0]

    impls = [Impl("nnlayers", nn_step, _host_float)]
    step = (
        numpy_steps.LeNetStep(params, LR, MOMENTUM)
        if case.kind == "lenet"
        else numpy_steps.MLPStep(params, LR, MOMENTUM)
    )
    impls.append(Impl("NumPy", lambda i: step.step(*batches[i % k]), _host_float))
    if torch_steps is not None:
        tstep = (
            torch_steps.lenet(params, LR, MOMENTUM)
            if case.kind == "lenet"
            else torch_steps.mlp(case.sizes, params, LR, MOMENTUM)
        )
        tb = [(torch_steps.to_torch(x), torch_steps.to_torch(y)) for x, y in batches]
        impls.append(Impl("PyTorch", lambda i: tstep.step(*tb[i % k]), lambda v: float(v.item())))
    if extra_backend is not None:
        with arraycore.use(extra_backend) as xp:
            dev_model = nnlayers_model(case)
            db = [(xp.asarray(x), xp.asarray(y)) for x, y in batches]
        for p, value in zip(dev_model.params, params, strict=True):
            p.assign(value)

        def dev_step(i: int) -> Any:
            return dev_model.train_step(db[i % k])[0]

        def dev_sync(v: Any) -> float:
            return float(xp.to_numpy(v))

        impls.append(Impl(f"nnlayers[{extra_backend}]", dev_step, dev_sync))
    return impls, params


def check_agreement(case: Case, impls: list[Impl], steps: int = 3) -> None:
    """The first losses of every implementation agree (same weights, same batches)."""
    losses = {impl.name: [impl.sync(impl.step(i)) for i in range(steps)] for impl in impls}
    ref = losses["NumPy"]
    for name, got in losses.items():
        rtol = 2e-3 if name in ("nnlayers", "NumPy", "PyTorch") else 2e-2
        if not np.allclose(got, ref, rtol=rtol, atol=1e-4):
            raise SystemExit(f"{case.name}: {name} losses {got} differ from NumPy's {ref}")


def time_case(case: Case, impls: list[Impl], budget: float) -> None:
    """Round-robin timing: each round times one block of steps of every implementation."""
    # warm up (and estimate): three more steps each
    est = []
    for impl in impls:
        t0 = time.perf_counter()
        for i in range(3):
            v = impl.step(i)
        impl.sync(v)
        est.append((time.perf_counter() - t0) / 3)
    block = max(1, int(0.02 / min(est)))  # blocks of at least ~20 ms for the fastest
    rounds = int(budget / (block * sum(est)))
    rounds = max(7, min(rounds, 200))
    counter = 0
    for r in range(rounds):
        for j in range(len(impls)):
            impl = impls[(r + j) % len(impls)]
            t0 = time.perf_counter()
            for _ in range(block):
                v = impl.step(counter)
                counter += 1
            impl.sync(v)
            impl.times.append((time.perf_counter() - t0) / block)


def peak_memory(case: Case, name: str, *, warm: bool = True) -> int:
    """Peak bytes traced during one step (after two), everything the implementation holds.

    A first, untraced build and step (``warm``) leaves out what happens once per process
    (lazy imports, NumPy's and arraycore's caches).
    """
    if warm:
        peak_memory(case, name, warm=False)
    batches = make_batches(case, 1)
    x, y = batches[0]
    gc.collect()
    tracemalloc.start()
    try:
        if name == "nnlayers":
            with arraycore.use("numpy"):
                model = nnlayers_model(case)
            params = None

            def step() -> Any:
                return model.train_step((x, y))
        else:
            with arraycore.use("numpy"):
                params = [np.array(p.numpy()) for p in nnlayers_model(case).params]
            impl = (
                numpy_steps.LeNetStep(params, LR, MOMENTUM)
                if case.kind == "lenet"
                else numpy_steps.MLPStep(params, LR, MOMENTUM)
            )

            def step() -> Any:
                return impl.step(x, y)

        gc.collect()
        step()
        step()
        tracemalloc.reset_peak()
        step()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        del params


# -- environment ----------------------------------------------------------------------------------
def set_threads(n: int) -> str:
    """Limit BLAS/OpenMP (threadpoolctl) and torch to ``n`` threads; returns a description."""
    notes = []
    try:
        from threadpoolctl import threadpool_info, threadpool_limits
    except ImportError:
        notes.append("threadpoolctl missing: BLAS threads not limited")
    else:
        global _LIMITS
        _LIMITS = threadpool_limits(limits=n)
        libs = sorted({f"{i['internal_api']} ({i['num_threads']})" for i in threadpool_info()})
        notes.append("thread pools: " + ", ".join(libs))
    if torch_steps is not None:
        torch_steps.set_threads(n)
    return "; ".join(notes)


_LIMITS: Any = None


def machine() -> dict[str, str]:
    """CPU model and cores, library versions, date."""
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
        "torch": torch_steps.version() if torch_steps is not None else TORCH_NOTE,
        "date": _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
    }


# -- report ---------------------------------------------------------------------------------------
def fmt_ms(seconds: float) -> str:
    return f"{seconds * 1e3:.3g}" if seconds < 0.1 else f"{seconds * 1e3:.0f}"


def ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a / b:.2f}x"


def step_table(results: list[tuple[Case, list[Impl]]], memory: dict[str, dict[str, int]]) -> str:
    names = [impl.name for impl in results[0][1]]
    head = ["network", *[f"{n} ms" for n in names], "nnlayers / NumPy", "nnlayers / PyTorch"]
    extra = [n for n in names if n.startswith("nnlayers[")]
    head += [f"{n} / NumPy" for n in extra]
    head += ["peak MB nnlayers", "peak MB NumPy", "memory ratio"]
    rows = [head, ["---"] * len(head)]
    for case, impls in results:
        med = {i.name: i.median for i in impls}
        mem = memory.get(case.name, {})
        row = [case.name, *[fmt_ms(med[n]) for n in names]]
        row += [ratio(med["nnlayers"], med["NumPy"]), ratio(med["nnlayers"], med.get("PyTorch"))]
        row += [ratio(med[n], med["NumPy"]) for n in extra]
        mn, mp = mem.get("nnlayers"), mem.get("NumPy")
        row += [
            "-" if mn is None else f"{mn / 2**20:.1f}",
            "-" if mp is None else f"{mp / 2**20:.1f}",
            ratio(mn, mp),
        ]
        rows.append(row)
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def sweep_table(results: list[tuple[Case, list[Impl]]]) -> str:
    names = [impl.name for impl in results[0][1]]
    head = ["batch", *[f"{n} µs/sample" for n in names], "nnlayers / NumPy", "nnlayers / PyTorch"]
    rows = [head, ["---"] * len(head)]
    for case, impls in results:
        med = {i.name: i.median for i in impls}
        row = [str(case.batch), *[f"{med[n] / case.batch * 1e6:.1f}" for n in names]]
        row += [ratio(med["nnlayers"], med["NumPy"]), ratio(med["nnlayers"], med.get("PyTorch"))]
        rows.append(row)
    return "\n".join("| " + " | ".join(r) + " |" for r in rows)


def report(
    info: dict[str, str], threads: int, pools: str, steps: str, sweep: str, notes: list[str]
) -> str:
    lines = [
        f"Measured {info['date']} on {info['cpu']}; Python {info['python']}, {info['numpy']}, "
        f"{info['torch']}. Every implementation ran with {threads} thread(s) ({pools}).",
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


def write_docs(path: Path, text: str) -> None:
    """Replace the text between the bench markers of ``path`` (create the page if missing)."""
    block = f"{START}\n{text}\n{END}"
    if path.exists():
        old = path.read_text(encoding="utf-8")
        if START in old and END in old:
            before, rest = old.split(START, 1)
            after = rest.split(END, 1)[1]
            path.write_text(before + block + after, encoding="utf-8")
            return
        path.write_text(old.rstrip() + "\n\n" + block + "\n", encoding="utf-8")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# Benchmarks\n\n{block}\n", encoding="utf-8")


# -- main -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="BLAS and torch threads")
    parser.add_argument("--quick", action="store_true", help="short timing budget (a smoke run)")
    parser.add_argument("--budget", type=float, default=None, help="seconds of timing per case")
    parser.add_argument("--write", type=Path, default=None, help="docs page to update")
    parser.add_argument(
        "--only", default="", help="comma-separated subset: mlp,lenet,small,sweep,memory"
    )
    args = parser.parse_args(argv)
    budget = args.budget if args.budget is not None else (1.0 if args.quick else 12.0)
    only = set(filter(None, args.only.split(","))) or {"mlp", "lenet", "small", "sweep", "memory"}

    pools = set_threads(args.threads)
    info = machine()
    notes = []
    if TORCH_NOTE:
        notes.append(TORCH_NOTE)
    notes.append(
        "PyTorch peak memory is not measured: its CPU allocator does not report to tracemalloc "
        "and torch keeps no CPU peak counter."
    )
    extra = os.environ.get("ARRAYCORE_BACKEND", "numpy").strip().lower() or "numpy"
    extra_backend: str | None = None
    if extra != "numpy":
        try:
            arraycore.namespace(extra)
            extra_backend = extra
        except arraycore.BackendError as error:
            notes.append(f"ARRAYCORE_BACKEND={extra}: no column ({str(error).splitlines()[0]})")
    print(f"{info['cpu']} | {info['numpy']} | {info['torch']} | {pools}", flush=True)

    main_cases = [
        Case("MLP 784-1024-1024-10, batch 128", "mlp", 128, [784, 1024, 1024, 10]),
        Case("LeNet CNN, batch 64", "lenet", 64),
        Case("MLP 64-64-10, batch 32", "mlp", 32, [64, 64, 10]),
    ]
    keys = ["mlp", "lenet", "small"]
    main_cases = [c for c, key in zip(main_cases, keys, strict=True) if key in only]
    results = []
    for case in main_cases:
        impls, _ = build_impls(case, extra_backend)
        check_agreement(case, impls)
        time_case(case, impls, budget)
        results.append((case, impls))
        med = ", ".join(f"{i.name} {fmt_ms(i.median)} ms" for i in impls)
        print(f"{case.name}: {med}", flush=True)
    memory: dict[str, dict[str, int]] = {}
    if "memory" in only:
        for case in main_cases:
            memory[case.name] = {n: peak_memory(case, n) for n in ("nnlayers", "NumPy")}
            print(f"{case.name}: peak bytes {memory[case.name]}", flush=True)
    sweep = []
    if "sweep" in only:
        for batch in (1, 4, 16, 64, 256, 1024):
            case = Case(f"MLP batch {batch}", "mlp", batch, [784, 1024, 1024, 10])
            impls, _ = build_impls(case, extra_backend)
            time_case(case, impls, budget / 2)
            sweep.append((case, impls))
            med = ", ".join(f"{i.name} {i.median / batch * 1e6:.1f} µs/sample" for i in impls)
            print(f"{case.name}: {med}", flush=True)
    steps_md = step_table(results, memory) if results else "(not run)"
    sweep_md = sweep_table(sweep) if sweep else "(not run)"
    text = report(info, args.threads, pools, steps_md, sweep_md, notes)
    print()
    print(text)
    if args.write is not None:
        path = args.write if args.write.is_absolute() else ROOT / args.write
        write_docs(path, text)
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
