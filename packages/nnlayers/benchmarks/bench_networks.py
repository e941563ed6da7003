"""The realistic suite: training steps of the networks people train, nnlayers against PyTorch.

Run it with ``python3 -m nox -s bench`` (after ``bench_training.py``), or directly:
``python packages/nnlayers/benchmarks/bench_networks.py [--threads 1,2] [--quick]
[--only vgg,lstm] [--write docs/benchmarks.md] [--json out.json]``.

The networks (``networks.py``): a VGG-style CNN with BatchNorm, a ResNet-style CNN (residual adds,
a strided block with a projection shortcut), an LSTM and a GRU language model, and a pre-norm
transformer encoder block (multi-head attention from expression ops, GELU MLP, Adam). For each
network and each thread count (``--threads``, default one thread and every core):

1. **It trains.** A fresh build of each implementation takes 12 steps on one batch and its loss
   must fall (the labels are learnable), so that what is timed is a real training step.
2. **Same numbers.** nnlayers and PyTorch start from the same weights (copied by name) and their
   first three losses on the same batches must agree (float32, rtol 2e-3; other backends 2e-2).
3. **Time.** Median step of round-robin blocks (``bench_training.time_case``), so the load of a
   shared machine hits every implementation alike; the ratio is within the one run. With more
   than one thread each block starts after a pause and an untimed step, so that neither
   library's idle spinning threads (OpenBLAS's, OpenMP's) slow the other's block.
4. **Memory.** Peak resident memory of one step (after two), each implementation in a fresh
   subprocess: the kernel's high-water mark (``VmHWM``, reset through ``/proc/self/clear_refs``)
   less the resident size before the model was built, so parameters, optimiser state, gradients
   and temporaries count alike for NumPy's and torch's allocators (the batch does not).
5. **GEMM.** The machine's GEMM peak (a 2048x2048 float32 matmul, best of five, at the same
   thread count) and, for nnlayers on NumPy, the share of the step spent inside BLAS calls and
   oneDNN convolutions and the GFLOP/s they reached (every ``numpy.matmul``/``dot``/
   ``tensordot`` and oneDNN convolution pass timed and its flops counted, in a separate
   profiled run). "step GFLOP/s" is the network's GEMM work (from
   the shapes; convolutions as their im2col GEMMs) over the median step, for both libraries: the
   distance to the machine's peak is what any implementation could still gain.

``ARRAYCORE_BACKEND`` naming another backend whose device exists adds a column for it (and on
``cuda``, with torch seeing the GPU, a ``PyTorch[cuda]`` column with TF32 off, as
``bench_training.py`` does; on ``opencl`` with ``ARRAYCORE_OPENCL_TUNE=1`` unless set otherwise,
CLBlast's GEMM parameters chosen per shape on the device, as ``cudnn.benchmark`` does for
PyTorch).
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import functools
import gc
import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(HERE))

import networks  # noqa: E402
from bench_report import CUDA_NN, CUDA_TORCH, fmt_ms, machine, ratio, write_docs  # noqa: E402
from bench_training import Impl, time_case  # noqa: E402

import arraycore  # noqa: E402
import nnlayers  # noqa: E402
from arraycore.backends import _onednn as onednn  # noqa: E402

MARKERS = ("<!-- networks:start -->", "<!-- networks:end -->")
TRAIN_STEPS = 12
GPU_WARMUP = 10
#: Pause before each timed block with more than one thread (``bench_training.time_case``): longer
#: than OpenBLAS's threads spin after a call (2^28 cycles, about 0.1 s).
SETTLE = 0.15

try:
    import torch
except ImportError as error:  # torch absent: its column is skipped with a note
    torch = None  # type: ignore[assignment]
    TORCH_NOTE = f"PyTorch not installed ({error}); its column is skipped"
else:
    TORCH_NOTE = ""


# -- threads --------------------------------------------------------------------------------------
def set_threads(n: int) -> str:
    """BLAS/OpenMP pools (``arraycore.set_threads``, oneDNN's loaded first so that its OpenMP
    pool is among them) and torch's intra-op pool to ``n`` threads."""
    onednn.library()
    arraycore.set_threads(n)
    pools = ", ".join(
        sorted({f"{p['internal_api']} ({p['num_threads']})" for p in arraycore.thread_info()})
    )
    if torch is not None:
        torch.set_num_threads(n)
        pools += f", torch ({torch.get_num_threads()})"
    return pools


def thread_counts(spec: str) -> list[int]:
    """``"1,all"`` -> ``[1, cores]`` (duplicates dropped)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    out: list[int] = []
    for part in spec.split(","):
        n = int(cores or 1) if part.strip() == "all" else int(part)
        if n < 1:
            raise SystemExit(f"--threads: thread counts must be positive, got {part!r}")
        if n not in out:
            out.append(n)
    return out


# -- GEMM -----------------------------------------------------------------------------------------
def gemm_peak(size: int = 2048, repeats: int = 5) -> tuple[float, float | None]:
    """GFLOP/s of the best of ``repeats`` float32 ``size``-cubed matmuls: NumPy's BLAS, torch's."""
    a = np.random.default_rng(0).standard_normal((size, size), dtype=np.float32)
    out = np.empty_like(a)
    flops = 2.0 * size**3

    def best(fn: Callable[[], Any]) -> float:
        fn()
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return flops / min(times) / 1e9

    numpy_peak = best(lambda: np.matmul(a, a, out=out))
    torch_peak = None
    if torch is not None:
        ta = torch.from_numpy(a)
        tout = torch.empty_like(ta)
        torch_peak = best(lambda: torch.mm(ta, ta, out=tout))
    return numpy_peak, torch_peak


class GemmProfile:
    """Time and count the flops of every ``numpy.matmul``/``dot``/``tensordot`` call while active
    (nested calls, such as ``tensordot`` calling ``dot``, count once)."""

    NAMES = ("matmul", "dot", "tensordot")

    def __init__(self) -> None:
        self.seconds = 0.0
        self.flops = 0.0
        self.calls = 0
        self._depth = 0

    @staticmethod
    def _flops(name: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> float:
        a = np.asarray(args[0])
        size = float(np.size(out))
        if name == "tensordot":
            axes = kwargs.get("axes", args[2] if len(args) > 2 else 2)
            if isinstance(axes, int):
                contracted = int(np.prod(a.shape[a.ndim - axes :]))
            else:
                first = axes[0] if isinstance(axes[0], (list, tuple)) else [axes[0]]
                contracted = int(np.prod([a.shape[i] for i in first]))
        else:
            contracted = a.shape[-1] if a.ndim else 1
        return 2.0 * size * contracted

    def _wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._depth:
                return fn(*args, **kwargs)
            self._depth += 1
            t0 = time.perf_counter()
            try:
                out = fn(*args, **kwargs)
            finally:
                self._depth -= 1
            self.seconds += time.perf_counter() - t0
            self.flops += self._flops(name, args, kwargs, out)
            self.calls += 1
            return out

        return timed

    @staticmethod
    def _conv_flops(plan: Any) -> float:
        n, c, _, _ = plan.xshape
        o, _, kh, kw = plan.wshape
        return 2.0 * n * o * c * kh * kw * plan.yshape[2] * plan.yshape[3]

    @staticmethod
    def _lstm_flops(plan: Any, passes: int) -> float:
        n, t, c, h = plan.shapes
        return 2.0 * n * t * 4 * h * (c + h) * passes

    def _wrap_plan(
        self, fn: Callable[..., Any], flops: Callable[[Any], float]
    ) -> Callable[..., Any]:
        @functools.wraps(fn)
        def timed(plan: Any, *args: Any) -> Any:
            t0 = time.perf_counter()
            out = fn(plan, *args)
            self.seconds += time.perf_counter() - t0
            self.flops += flops(plan)
            self.calls += 1
            return out

        return timed

    @contextlib.contextmanager
    def active(self) -> Iterator[GemmProfile]:
        """Wrap the functions in ``numpy`` (the backend's kernels call them there), where the
        NumPy namespace binds them directly (its ``matmul`` is ``numpy.matmul`` itself), and
        the oneDNN convolution passes (counted as the GEMMs they replace) and LSTM passes
        (counted as their GEMMs, forward one pass of products, backward two)."""
        xp = arraycore.namespace("numpy")
        saved = [(np, name, getattr(np, name)) for name in self.NAMES]
        saved += [(xp, name, getattr(xp, name)) for name in self.NAMES if hasattr(xp, name)]
        convs = ("forward", "backward_data", "backward_filter")
        plans: list[tuple[type, str, Callable[[Any], float]]] = [
            *((onednn.ConvPlan, name, self._conv_flops) for name in convs),
            (onednn.LSTMPlan, "forward", lambda plan: self._lstm_flops(plan, 1)),
            (onednn.LSTMPlan, "backward", lambda plan: self._lstm_flops(plan, 2)),
        ]
        saved_plans = [(cls, name, getattr(cls, name)) for cls, name, _ in plans]
        try:
            for owner, name, fn in saved:
                setattr(owner, name, self._wrap(name, fn))
            for cls, name, flops in plans:
                setattr(cls, name, self._wrap_plan(getattr(cls, name), flops))
            yield self
        finally:
            for owner, name, fn in saved:
                setattr(owner, name, fn)
            for cls, name, fn in saved_plans:
                setattr(cls, name, fn)


def gemm_share(case: networks.Case, steps: int = 6) -> dict[str, float]:
    """nnlayers on NumPy: the share of a step inside BLAS calls and their GFLOP/s."""
    with arraycore.use("numpy"):
        model, _ = case.build()
    batches = case.batches(2)
    for i in range(2):
        model.train_step(batches[i % 2])
    profile = GemmProfile()
    with profile.active():
        t0 = time.perf_counter()
        for i in range(steps):
            float(model.train_step(batches[i % 2])[0])
        total = time.perf_counter() - t0
    return {
        "share": profile.seconds / total,
        "gflops": profile.flops / max(profile.seconds, 1e-12) / 1e9,
        "flops_per_step": profile.flops / steps,
        "calls_per_step": profile.calls / steps,
    }


# -- implementations ------------------------------------------------------------------------------
def _float(v: Any) -> float:
    return float(v)


def build_impls(case: networks.Case, extra: str | None, torch_cuda: bool) -> list[Impl]:
    """nnlayers on NumPy, PyTorch CPU, and the extra backend / PyTorch on the GPU where asked."""
    batches = case.batches(4)
    k = len(batches)
    with arraycore.use("numpy"):
        model, layers = case.build()

    def nn_step(i: int) -> Any:
        return model.train_step(batches[i % k])[0]

    impls = [Impl("nnlayers", nn_step, _float)]
    if torch is not None:
        tstep = case.torch(layers)
        tb = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches]
        impls.append(Impl("PyTorch", lambda i: tstep.step(*tb[i % k]), lambda v: float(v.item())))
    if extra is not None:
        with arraycore.use(extra) as xp:
            dev_model, _ = case.build()
            db = [(xp.asarray(x), xp.asarray(y)) for x, y in batches]
        for p, src in zip(dev_model.params, model.params, strict=True):
            p.assign(np.array(src.numpy()))  # the same seeds give the same weights; made sure

        for x, y in batches:  # host data checked once, as fit checks an in-memory feed
            dev_model.check_data(x, y)
        graph, inputs = dev_model.graph, dev_model.inputs

        def dev_step(i: int) -> Any:
            # labels and ids made on the host and checked there, as fit does: no per-step
            # read-back
            with arraycore.checks(False, only="labels"), graph.checked_feeds(inputs):
                return dev_model.train_step(db[i % k])[0]

        backend = xp._backend

        def dev_sync(v: Any) -> float:
            if extra == "cuda":
                backend.synchronize()
            return float(xp.to_numpy(v))

        name = CUDA_NN if extra == "cuda" else f"nnlayers[{extra}]"
        # untimed steps first: past the three eager ones and the capture of its steps
        group, warm = ("gpu", GPU_WARMUP) if extra == "cuda" else ("cpu", 6)
        impls.append(Impl(name, dev_step, dev_sync, group=group, warmup=warm))
    if torch_cuda and torch is not None:
        cstep = case.torch(layers, device="cuda")
        cb = [(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()) for x, y in batches]

        def cuda_sync(v: Any) -> float:
            torch.cuda.synchronize()
            return float(v.item())

        impls.append(
            Impl(
                CUDA_TORCH,
                lambda i: cstep.step(*cb[i % k]),
                cuda_sync,
                group="gpu",
                warmup=GPU_WARMUP,
            )
        )
    return impls


def check_trains(case: networks.Case, extra: str | None) -> dict[str, list[float]]:
    """Fresh builds take ``TRAIN_STEPS`` steps on one batch; every loss curve must fall."""
    curves = {}
    for impl in build_impls(case, extra, torch_cuda=False):
        losses = [impl.sync(impl.step(0)) for _ in range(TRAIN_STEPS)]
        first, last = losses[0], min(losses[-3:])
        if not (np.isfinite(losses).all() and last < first * 0.99):
            raise SystemExit(f"{case.name}: {impl.name} does not train: losses {losses}")
        curves[impl.name] = losses
    return curves


def check_agreement(case: networks.Case, impls: list[Impl], steps: int = 3) -> None:
    """The first losses of every implementation agree with nnlayers on NumPy."""
    losses = {impl.name: [impl.sync(impl.step(i)) for i in range(steps)] for impl in impls}
    ref = losses["nnlayers"]
    for name, got in losses.items():
        rtol = 2e-3 if name in ("nnlayers", "PyTorch", CUDA_TORCH, CUDA_NN) else 2e-2
        if not np.allclose(got, ref, rtol=rtol, atol=1e-4):
            raise SystemExit(f"{case.name}: {name} losses {got} differ from nnlayers' {ref}")


# -- memory (one subprocess per implementation) ---------------------------------------------------
def _rss() -> tuple[int, int]:
    """(current, peak) resident bytes of this process."""
    found = {}
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) * 1024
    return found["VmRSS"], found["VmHWM"]


def _trim() -> None:
    gc.collect()
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)


def memory_child(key: str, name: str) -> int:
    """Peak resident bytes of one step of ``name`` on ``key``, in this (fresh) process."""
    case = networks.BY_KEY[key]
    x, y = case.batches(1)[0]

    def make() -> Callable[[], Any]:
        if name == "nnlayers":
            with arraycore.use("numpy"):
                model, _ = case.build()
            return lambda: float(model.train_step((x, y))[0])
        with arraycore.use("numpy"):
            _, layers = case.build()
        step = case.torch(layers)
        tx, ty = torch.from_numpy(x), torch.from_numpy(y)
        return lambda: float(step.step(tx, ty).item())

    warm = make()  # lazy imports, kernel caches: once per process, not the step's memory
    warm()
    del warm
    _trim()
    base, _ = _rss()
    step = make()
    step()
    step()
    Path("/proc/self/clear_refs").write_text("5")
    step()
    return _rss()[1] - base


#: Fresh processes per peak-memory figure (the median is reported): one process's resident
#: peak moves by up to 25% between identical runs (an LSTM step: 15.8 to 20.1 MB).
MEMORY_RUNS = 3


def peak_memory(key: str, name: str, threads: int) -> int | None:
    """The median of :data:`MEMORY_RUNS` runs of :func:`memory_child`, each in a subprocess;
    ``None`` where /proc cannot tell."""
    if not Path("/proc/self/clear_refs").exists():
        return None
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), ARRAYCORE_BACKEND="numpy")
    cmd = [sys.executable, __file__, "--memory-child", key, name]
    found = []
    for _ in range(MEMORY_RUNS):
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
        if done.returncode:
            print(f"memory of {name} on {key} failed:\n{done.stderr[-2000:]}", flush=True)
            return None
        found.append(int(done.stdout.split()[-1]))
    return int(statistics.median(found))


# -- report ---------------------------------------------------------------------------------------
def table(rows: list[dict[str, Any]], names: list[str]) -> str:
    extra = [n for n in names if n not in ("nnlayers", "PyTorch")]
    head = ["network", *[f"{n} ms" for n in names], "nnlayers / PyTorch"]
    head += [f"{n} / nnlayers" for n in extra if n != CUDA_TORCH]
    if CUDA_NN in names and CUDA_TORCH in names:
        head.append(f"{CUDA_NN} / {CUDA_TORCH}")
    head += ["peak MB nnlayers", "peak MB PyTorch", "memory ratio"]
    head += ["nnlayers GEMM+conv share", "its GFLOP/s", "step GFLOP/s nnlayers"]
    head += ["step GFLOP/s PyTorch"]
    lines = [head, ["---"] * len(head)]
    for row in rows:
        med = row["median"]
        mem = row["memory"]
        line = [row["name"], *[fmt_ms(med[n]) for n in names]]
        line.append(ratio(med["nnlayers"], med.get("PyTorch")))
        line += [ratio(med[n], med["nnlayers"]) for n in extra if n != CUDA_TORCH]
        if CUDA_NN in names and CUDA_TORCH in names:
            line.append(ratio(med[CUDA_NN], med[CUDA_TORCH]))
        mn, mt = mem.get("nnlayers"), mem.get("PyTorch")
        line += [
            "-" if mn is None else f"{mn / 2**20:.1f}",
            "-" if mt is None else f"{mt / 2**20:.1f}",
        ]
        line.append(ratio(mn, mt))
        gemm = row["gemm"]
        line += [f"{gemm['share']:.0%}", f"{gemm['gflops']:.1f}"]
        flops = row["flops"]
        line.append(f"{flops / med['nnlayers'] / 1e9:.1f}")
        line.append("-" if "PyTorch" not in med else f"{flops / med['PyTorch'] / 1e9:.1f}")
        lines.append(line)
    return "\n".join("| " + " | ".join(r) + " |" for r in lines)


def report(info: dict[str, str], runs: list[dict[str, Any]], notes: list[str]) -> str:
    lines = [
        f"Measured {info['date']} on {info['cpu']}; Python {info['python']}, {info['numpy']}, "
        f"{info['torch']}. NumPy backend's float32 convolutions: {info['onednn']}.",
        "",
        "Median training step (forward, backward, optimiser update), float32, nnlayers on the "
        "NumPy backend against PyTorch CPU from the same weights, timed round-robin in one run. "
        "Every network was first checked to train (its loss falls over "
        f"{TRAIN_STEPS} steps) and to give PyTorch's first three losses.",
        "",
        "| network | optimiser | GEMM GFLOP per step |",
        "| --- | --- | --- |",
        *[f"| {c.name} | {c.optimizer} | {c.gemm_flops / 1e9:.2f} |" for c in runs[0]["cases"]],
    ]
    for run in runs:
        peak = f"{run['peak'][0]:.0f} GFLOP/s"
        if run["peak"][1] is not None:
            peak += f" (torch.mm: {run['peak'][1]:.0f})"
        lines += [
            "",
            f"**{run['threads']} thread(s)** ({run['pools']}); machine GEMM peak, 2048^3 float32 "
            f"matmul through NumPy's BLAS: {peak}.",
            "",
            table(run["rows"], run["names"]),
        ]
    lines += ["", *[f"- {n}" for n in notes]]
    return "\n".join(lines)


# -- main -----------------------------------------------------------------------------------------
def profile_case(case: networks.Case, steps: int = 5) -> str:
    """The per-op profile (:func:`nnlayers.profile`) of ``steps`` training steps of ``case`` on
    the active backend at one thread, after warm-up steps; on a device backend also with the
    host's time alone (no waiting for the device around each op)."""
    set_threads(1)
    batches = case.batches(2)
    model, layers = case.build()
    xp = model.xp
    modes = [True] if xp.name == "numpy" else [True, False]
    parts = [f"## {case.name} ({xp.name}, one thread)"]
    for i in range(2):  # kernels compiled and tuned; each profile compiles plans of its own
        model.train_step(batches[i % 2])
    for sync in modes:
        with nnlayers.profile(sync=sync) as prof:
            for i in range(steps):
                model.train_step(batches[i % 2])
        parts.append(prof.table(top=15))
    if torch is not None and xp.name == "numpy":
        parts.append(torch_profile(case, layers, batches, steps))
    return "\n\n".join(parts)


def torch_profile(case: networks.Case, layers: dict[str, Any], batches: Any, steps: int) -> str:
    """PyTorch's own per-op profile (``torch.profiler``, CPU, one thread) of the same number of
    training steps of ``case``'s PyTorch twin, built from the same weights, after warm-up steps:
    the ops to put beside nnlayers' rows (``aten::mkldnn_rnn_layer`` beside ``lstm``, ...)."""
    from torch.profiler import ProfilerActivity, profile

    tstep = case.torch(layers)
    tb = [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in batches]
    for i in range(2):
        tstep.step(*tb[i % 2])
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for i in range(steps):
            tstep.step(*tb[i % 2])
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=15)
    return f"PyTorch, the same {steps} steps (torch.profiler, self CPU time):\n{table}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,all", help="thread counts, e.g. 1,2 or 1,all")
    parser.add_argument("--quick", action="store_true", help="short timing budget (a smoke run)")
    parser.add_argument("--budget", type=float, default=None, help="seconds of timing per case")
    parser.add_argument("--only", default="", help=f"subset of {','.join(networks.BY_KEY)}")
    parser.add_argument("--write", type=Path, default=None, help="docs page to update")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures here")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="print each case's per-op profile on $ARRAYCORE_BACKEND (one thread; on the NumPy "
        "backend PyTorch's beside it) and stop",
    )
    parser.add_argument("--memory-child", nargs=2, metavar=("CASE", "IMPL"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        print(memory_child(*args.memory_child))
        return 0
    budget = args.budget if args.budget is not None else (1.5 if args.quick else 10.0)
    keys = [k for k in args.only.split(",") if k] or list(networks.BY_KEY)
    unknown = [k for k in keys if k not in networks.BY_KEY]
    if unknown:
        raise SystemExit(f"--only: unknown {unknown}; the cases are {list(networks.BY_KEY)}")
    cases = [networks.BY_KEY[k] for k in keys]
    if args.profile:
        for case in cases:
            print(profile_case(case), flush=True)
        return 0

    notes = [TORCH_NOTE] if TORCH_NOTE else []
    extra_name = os.environ.get("ARRAYCORE_BACKEND", "numpy").strip().lower() or "numpy"
    extra: str | None = None
    if extra_name != "numpy":
        try:
            arraycore.namespace(extra_name)
            extra = extra_name
        except arraycore.BackendError as error:
            notes.append(
                f"ARRAYCORE_BACKEND={extra_name}: no column ({str(error).splitlines()[0]})"
            )
    torch_cuda = extra == "cuda" and torch is not None and torch.cuda.is_available()
    if torch_cuda:
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = True
        notes.append("GPU: TF32 off in torch (matmul and cuDNN) and in CuPy unless CUPY_TF32 > 0.")
    if extra == "opencl":
        # As cudnn.benchmark for PyTorch: CLBlast's GEMM tiles timed per shape on the device.
        os.environ.setdefault("ARRAYCORE_OPENCL_TUNE", "1")
        tune = os.environ["ARRAYCORE_OPENCL_TUNE"]
        from arraycore_opencl._runtime import describe_gemm

        notes.append(
            f"OpenCL: {describe_gemm()}; ARRAYCORE_OPENCL_TUNE={tune} (CLBlast's GEMM "
            "parameters per shape, where CLBlast runs). PoCL runs its kernels on the same cores "
            "whatever the thread count: its column is the same device at one and two threads."
        )
    info = machine(f"torch {torch.__version__}" if torch is not None else TORCH_NOTE)
    info["onednn"] = onednn.status()
    print(f"{info['cpu']} | {info['numpy']} | {info['torch']} | {info['onednn']}", flush=True)

    set_threads(1)
    for case in cases:
        curves = check_trains(case, extra)
        shown = ", ".join(f"{n} {c[0]:.3f} -> {c[-1]:.3f}" for n, c in curves.items())
        print(f"{case.key}: trains ({shown})", flush=True)

    runs = []
    for threads in thread_counts(args.threads):
        pools = set_threads(threads)
        peak = gemm_peak()
        print(f"\n{threads} thread(s): {pools}; GEMM peak {peak[0]:.1f} GFLOP/s", flush=True)
        rows = []
        names: list[str] = []
        for case in cases:
            impls = build_impls(case, extra, torch_cuda)
            names = [impl.name for impl in impls]
            check_agreement(case, impls)
            time_case(case, impls, budget, SETTLE if threads > 1 else 0.0)  # type: ignore[arg-type]
            memory = {n: peak_memory(case.key, n, threads) for n in ("nnlayers", "PyTorch")}
            if torch is None:
                memory.pop("PyTorch")
            gemm = gemm_share(case)
            median = {impl.name: impl.median for impl in impls}
            rows.append(
                {
                    "key": case.key,
                    "name": case.name,
                    "median": median,
                    "repeats": {impl.name: len(impl.times) for impl in impls},
                    "memory": memory,
                    "gemm": gemm,
                    "flops": case.gemm_flops,
                }
            )
            shown = ", ".join(f"{n} {fmt_ms(m)} ms" for n, m in median.items())
            mem = ", ".join(f"{n} {v / 2**20:.1f} MB" for n, v in memory.items() if v)
            print(
                f"{case.key}: {shown}; nnlayers/PyTorch {ratio(median['nnlayers'], median.get('PyTorch'))}"
                f"; peak {mem}; GEMM share {gemm['share']:.0%} at {gemm['gflops']:.1f} GFLOP/s",
                flush=True,
            )
        runs.append(
            {
                "threads": threads,
                "pools": pools,
                "peak": peak,
                "rows": rows,
                "names": names,
                "cases": cases,
            }
        )
    notes.append(
        "Peak memory: resident-set high-water mark of the third step in a fresh process, less the "
        "resident size before the build (parameters, optimiser state, gradients and temporaries; "
        f"the batch not counted), the median of {MEMORY_RUNS} processes; the same measure for "
        "both libraries."
    )
    text = report(info, runs, notes)
    print()
    print(text)
    if args.json is not None:
        data = {
            "machine": info,
            "notes": notes,
            "runs": [{k: v for k, v in r.items() if k != "cases"} for r in runs],
        }
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")
        print(f"wrote {args.json}")
    if args.write is not None:
        path = args.write if args.write.is_absolute() else ROOT / args.write
        write_docs(path, text, MARKERS)
        print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
