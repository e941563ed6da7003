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

On an NVIDIA GPU (``ARRAYCORE_BACKEND=cuda``, the arraycore-cuda backend installed and
``torch.cuda.is_available()``), a ``PyTorch[cuda]`` column joins ``nnlayers[cuda]``: the same
networks, weights and SGD settings, the batches copied to the GPU once before timing, TF32 off in
torch (``allow_tf32 = False`` for matmuls and cuDNN) so that both sides compute in full float32.
Kernels are asynchronous, so every timed block of steps of a GPU implementation ends with a
device synchronisation (``torch.cuda.synchronize()``; the CUDA backend's ``synchronize()``) and
the block's time over its step count is the per-step time; both are warmed up first (CuPy
compiles its kernels on first use, cuDNN autotunes each shape). The GPU implementations' block
size is set from the faster of the two, apart from the CPU ones'. Peak device memory of one step
counts allocated blocks on both sides (a CuPy memory hook; ``torch.cuda.max_memory_allocated()``). Without a GPU, or with another
backend, none of this code runs (``--self-check`` tests that).
"""

from __future__ import annotations

import argparse
import gc
import os
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
from bench_report import (  # noqa: E402
    CUDA_NN,
    CUDA_TORCH,
    fmt_ms,
    gpu_info,
    machine,
    report,
    step_table,
    sweep_table,
    write_docs,
    write_json,
)

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
GPU_WARMUP = 20  # untimed steps of each GPU implementation before the estimate and the timing


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
    """An implementation of one case's step: ``step(batch index) -> loss``; ``sync(loss)``.

    ``sync`` waits for the step's work to finish (a device synchronisation on a GPU) and returns
    the loss as a Python float. ``group``: implementations of one group share a block size in
    the timing (``"gpu"`` for the CUDA ones); ``warmup``: untimed steps run before anything else.
    """

    name: str
    step: Callable[[int], Any]
    sync: Callable[[Any], float]
    times: list[float] = field(default_factory=list)
    group: str = "cpu"
    warmup: int = 0

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


def torch_cuda_usable(extra_backend: str | None, steps: Any = None) -> bool:
    """Whether to add the PyTorch-on-GPU column: only for the ``cuda`` backend, torch installed
    and ``torch.cuda.is_available()`` (asked only in that case). ``steps`` stands in for the
    ``torch_steps`` module (``--self-check``)."""
    steps = torch_steps if steps is None else steps
    return extra_backend == "cuda" and steps is not None and bool(steps.cuda_available())


def build_impls(
    case: Case, extra_backend: str | None, torch_cuda: bool = False
) -> tuple[list[Impl], list[np.ndarray]]:
    """Every implementation of ``case``, all starting from nnlayers' initial weights.

    ``torch_cuda`` (see :func:`torch_cuda_usable`) adds PyTorch on the GPU, its batches copied
    there once, here, outside anything timed.
    """
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
            # labels made on the host and checked there, as fit does: no per-step read-back
            with arraycore.checks(False, only="labels"):
                return dev_model.train_step(db[i % k])[0]

        if extra_backend == "cuda":
            backend = xp._backend

            def dev_sync(v: Any) -> float:
                backend.synchronize()  # every queued kernel, not only the loss's
                return float(xp.to_numpy(v))

            backend.synchronize()
            impls.append(Impl(CUDA_NN, dev_step, dev_sync, group="gpu", warmup=GPU_WARMUP))
        else:

            def dev_sync(v: Any) -> float:
                return float(xp.to_numpy(v))

            # untimed steps first: past the three eager ones and the capture of its steps
            impls.append(Impl(f"nnlayers[{extra_backend}]", dev_step, dev_sync, warmup=6))
    if torch_cuda and torch_steps is not None:
        cstep = (
            torch_steps.lenet(params, LR, MOMENTUM, device="cuda")
            if case.kind == "lenet"
            else torch_steps.mlp(case.sizes, params, LR, MOMENTUM, device="cuda")
        )
        cb = [(torch_steps.to_cuda(x), torch_steps.to_cuda(y)) for x, y in batches]
        torch_steps.cuda_sync()

        def torch_cuda_sync(v: Any) -> float:
            torch_steps.cuda_sync()
            return float(v.item())

        impls.append(
            Impl(
                CUDA_TORCH,
                lambda i: cstep.step(*cb[i % k]),
                torch_cuda_sync,
                group="gpu",
                warmup=GPU_WARMUP,
            )
        )
    return impls, params


def check_agreement(case: Case, impls: list[Impl], steps: int = 3) -> None:
    """The first losses of every implementation agree (same weights, same batches)."""
    losses = {impl.name: [impl.sync(impl.step(i)) for i in range(steps)] for impl in impls}
    ref = losses["NumPy"]
    for name, got in losses.items():
        # float32 everywhere; on the GPU with TF32 off (torch) and off by default (CuPy)
        rtol = 2e-3 if name in ("nnlayers", "NumPy", "PyTorch", CUDA_NN, CUDA_TORCH) else 2e-2
        if not np.allclose(got, ref, rtol=rtol, atol=1e-4):
            raise SystemExit(f"{case.name}: {name} losses {got} differ from NumPy's {ref}")


def time_case(case: Case, impls: list[Impl], budget: float, settle: float = 0.0) -> None:
    """Round-robin timing: each round times one block of steps of every implementation.

    A block is timed from before its first step to after ``sync`` of its last (a device
    synchronisation for the GPU implementations), and its time over its step count is one
    sample. Implementations of one ``group`` share a block size (without a GPU there is one
    group, so one block size for all, as before).

    ``settle`` (seconds; use it with more than one thread): before each block, sleep that long
    and run one untimed step, so that each block is timed as a user of that library alone sees
    it. Idle worker threads spin after a call (OpenBLAS's for about 0.1 s, OpenMP's for a
    while): without the pause the previous implementation's spinning threads take the cores
    from the next one's, and the ratio measures which library spins longer.
    """
    for impl in impls:  # GPU: kernels compiled, cuDNN autotuned, memory pools filled
        if impl.warmup:
            for i in range(impl.warmup):
                v = impl.step(i)
            impl.sync(v)
    # warm up (and estimate): three more steps each
    est = []
    for impl in impls:
        t0 = time.perf_counter()
        for i in range(3):
            v = impl.step(i)
        impl.sync(v)
        est.append((time.perf_counter() - t0) / 3)
    fastest: dict[str, float] = {}
    for impl, e in zip(impls, est, strict=True):
        fastest[impl.group] = min(fastest.get(impl.group, e), e)
    # blocks of at least ~20 ms for the fastest of each group
    blocks = [max(1, int(0.02 / fastest[impl.group])) for impl in impls]
    per_round = sum((b + (1 if settle else 0)) * e for b, e in zip(blocks, est, strict=True))
    rounds = int(budget / (per_round + settle * len(impls)))
    rounds = max(7, min(rounds, 200))
    counter = 0
    for r in range(rounds):
        for j in range(len(impls)):
            idx = (r + j) % len(impls)
            impl, block = impls[idx], blocks[idx]
            if settle:
                time.sleep(settle)
                impl.sync(impl.step(counter))
                counter += 1
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
            del params  # the step keeps its own copies: the weights count once, as nnlayers'

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


def gpu_peak_memory(case: Case, name: str) -> int:
    """Peak device bytes of one GPU step (after six: nnlayers' steps are captured by then, and
    their graph's pool is counted): parameters, optimiser state, gradients and temporaries, not
    the batch (as :func:`peak_memory` leaves out the batch).

    Measured against what is already allocated on the device (the timed implementations are
    still alive), so only what this fresh build and its steps allocate counts. nnlayers: the
    bytes the CuPy pool hands out (``used_bytes``) before the step, plus their high-water mark
    during it, tracked by a CuPy memory hook on every allocation and release; PyTorch:
    ``torch.cuda.max_memory_allocated()`` after ``reset_peak_memory_stats()``. Both count
    allocated blocks, not what the allocator holds. (Until 2026-11-28 the nnlayers figure was
    the pool's held bytes, which count the free remainder of cached blocks that the earlier,
    larger cases left split under a live array: a small MLP "used" 32.9 MB on an H200.)
    """
    x, y = make_batches(case, 1)[0]
    with arraycore.use("numpy"):
        params = [np.array(p.numpy()) for p in nnlayers_model(case).params]
    gc.collect()
    if name == CUDA_NN:
        with arraycore.use("cuda") as xp:
            data = (xp.asarray(x), xp.asarray(y))
            backend = xp._backend
            backend.synchronize()
            base = backend.memory_stats()["used_bytes"]
            model = nnlayers_model(case)
        for p, value in zip(model.params, params, strict=True):
            p.assign(value)

        def step() -> Any:
            return model.train_step(data)

        tracker = _cupy_peak_tracker()
        sync = backend.synchronize

        def reset() -> None:
            tracker.start(backend.memory_stats()["used_bytes"])

        def peak() -> int:
            # a captured step allocates from its graph's own pool, which the hook does not
            # see: that pool's bytes are the captured step's intermediates
            return tracker.stop() + int(backend.memory_stats().get("graph_pool_bytes", 0))
    else:
        assert torch_steps is not None
        data = (torch_steps.to_cuda(x), torch_steps.to_cuda(y))
        torch_steps.cuda_sync()
        base = torch_steps.cuda_allocated()
        tstep = (
            torch_steps.lenet(params, LR, MOMENTUM, device="cuda")
            if case.kind == "lenet"
            else torch_steps.mlp(case.sizes, params, LR, MOMENTUM, device="cuda")
        )

        def step() -> Any:
            return tstep.step(*data)

        sync, reset, peak = (
            torch_steps.cuda_sync,
            torch_steps.cuda_reset_peak,
            torch_steps.cuda_peak,
        )
    for _ in range(6):  # past nnlayers' warm-up and capture (three eager steps, then one)
        step()
    sync()
    gc.collect()
    reset()
    step()
    sync()
    return peak() - base


def _cupy_peak_tracker() -> Any:
    """A tracker of the bytes CuPy's pool has handed out: ``start(used)`` from ``used`` bytes,
    ``stop()`` returns the most held in between (allocations and releases seen by a
    ``cupy.cuda.MemoryHook``, rounded sizes, as the pool's ``used_bytes``)."""
    import cupy

    class PeakHook(cupy.cuda.MemoryHook):  # type: ignore[misc]
        name = "nnlayers_bench_peak"
        now = peak = 0

        def malloc_postprocess(self, **kw: Any) -> None:
            self.now += int(kw["mem_size"])
            self.peak = max(self.peak, self.now)

        def free_postprocess(self, **kw: Any) -> None:
            self.now -= int(kw["mem_size"])

        def start(self, used: int) -> None:
            self.now = self.peak = used
            self.__enter__()

        def stop(self) -> int:
            self.__exit__(None, None, None)
            return int(self.peak)

    return PeakHook()


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


# -- main -----------------------------------------------------------------------------------------
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1, help="BLAS and torch threads")
    parser.add_argument("--quick", action="store_true", help="short timing budget (a smoke run)")
    parser.add_argument("--budget", type=float, default=None, help="seconds of timing per case")
    parser.add_argument("--write", type=Path, default=None, help="docs page to update")
    parser.add_argument(
        "--json", type=Path, default=None, help="also write the medians and peaks as JSON here"
    )
    parser.add_argument(
        "--only", default="", help="comma-separated subset: mlp,lenet,small,sweep,memory"
    )
    parser.add_argument(
        "--self-check",
        action="store_true",
        help="check (no GPU needed) that the GPU code paths stay off without cuda, then exit",
    )
    args = parser.parse_args(argv)
    if args.self_check:
        return self_check()
    budget = args.budget if args.budget is not None else (1.0 if args.quick else 12.0)
    only = set(filter(None, args.only.split(","))) or {"mlp", "lenet", "small", "sweep", "memory"}

    pools = set_threads(args.threads)
    info = machine(torch_steps.version() if torch_steps is not None else TORCH_NOTE)
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
    torch_cuda = torch_cuda_usable(extra_backend)
    if extra_backend == "cuda":
        if torch_cuda and torch_steps is not None:
            torch_steps.cuda_setup()  # TF32 off before anything runs on the GPU
            notes.append(
                f"GPU: {CUDA_NN} and {CUDA_TORCH} start from the same weights, the batches are "
                "copied to the GPU once before timing; TF32 is off in torch (matmul and cuDNN "
                "allow_tf32 = False, cudnn.benchmark on) and in CuPy unless CUPY_TF32 > 0 (see "
                "above), so both compute in full float32. Each timed block of steps ends with a "
                f"device synchronisation, after {GPU_WARMUP} untimed warm-up steps; peak device "
                "memory is CuPy's pool high-water mark and torch.cuda.max_memory_allocated() for "
                "a third step, less what was allocated before the build (the batch not counted)."
            )
        else:
            why = TORCH_NOTE or "torch.cuda.is_available() is False"
            notes.append(f"no {CUDA_TORCH} column: {why}")
        info["gpu"] = gpu_info(torch_steps if torch_cuda else None)
    print(f"{info['cpu']} | {info['numpy']} | {info['torch']} | {pools}", flush=True)
    if info.get("gpu"):
        print(info["gpu"], flush=True)

    main_cases = [
        Case("MLP 784-1024-1024-10, batch 128", "mlp", 128, [784, 1024, 1024, 10]),
        Case("LeNet CNN, batch 64", "lenet", 64),
        Case("MLP 64-64-10, batch 32", "mlp", 32, [64, 64, 10]),
    ]
    keys = ["mlp", "lenet", "small"]
    main_cases = [c for c, key in zip(main_cases, keys, strict=True) if key in only]
    results = []
    for case in main_cases:
        impls, _ = build_impls(case, extra_backend, torch_cuda)
        check_agreement(case, impls)
        time_case(case, impls, budget)
        results.append((case, impls))
        med = ", ".join(f"{i.name} {fmt_ms(i.median)} ms" for i in impls)
        print(f"{case.name}: {med}", flush=True)
    memory: dict[str, dict[str, int]] = {}
    if "memory" in only:
        for case in main_cases:
            memory[case.name] = {n: peak_memory(case, n) for n in ("nnlayers", "NumPy")}
            if extra_backend == "cuda":
                gpu_names = [CUDA_NN, CUDA_TORCH] if torch_cuda else [CUDA_NN]
                memory[case.name].update({n: gpu_peak_memory(case, n) for n in gpu_names})
            print(f"{case.name}: peak bytes {memory[case.name]}", flush=True)
    sweep = []
    if "sweep" in only:
        for batch in (1, 4, 16, 64, 256, 1024):
            case = Case(f"MLP batch {batch}", "mlp", batch, [784, 1024, 1024, 10])
            impls, _ = build_impls(case, extra_backend, torch_cuda)
            time_case(case, impls, budget / 2)
            sweep.append((case, impls))
            med = ", ".join(f"{i.name} {i.median / batch * 1e6:.1f} µs/sample" for i in impls)
            print(f"{case.name}: {med}", flush=True)
    steps_md = step_table(results, memory) if results else "(not run)"
    sweep_md = sweep_table(sweep) if sweep else "(not run)"
    text = report(info, args.threads, pools, steps_md, sweep_md, notes)
    print()
    print(text)
    if args.json is not None:
        write_json(args.json, info, args.threads, results, memory, sweep, notes)
        print(f"wrote {args.json}")
    if args.write is not None:
        path = args.write if args.write.is_absolute() else ROOT / args.write
        write_docs(path, text)
        print(f"\nwrote {path}")
    return 0


# -- self-check -----------------------------------------------------------------------------------
def self_check() -> int:
    """Pure-Python check that nothing needing CUDA runs unless the backend is ``cuda`` and torch
    sees a GPU: a stand-in for ``torch_steps`` whose CUDA functions fail if called."""
    global torch_steps
    calls: list[str] = []

    class _Step:
        def step(self, x: Any, labels: Any) -> Any:
            return np.float32(0.0)

    def forbidden(name: str) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError(f"CUDA path entered: torch_steps.{name}")

        return call

    def available(answer: bool) -> Callable[[], bool]:
        def call() -> bool:
            calls.append("cuda_available")
            return answer

        return call

    def cpu_only(*args: Any, device: str = "cpu", **kwargs: Any) -> _Step:
        assert device == "cpu", f"CUDA path entered: a torch step on {device!r}"
        return _Step()

    cuda_fns = ("cuda_setup", "to_cuda", "cuda_sync", "cuda_allocated", "cuda_reset_peak")
    cuda_fns += ("cuda_peak", "cuda_info")
    fake: Any = type(sys)("fake_torch_steps")
    fake.mlp = fake.lenet = cpu_only
    fake.to_torch = lambda x: x
    for name in cuda_fns:
        setattr(fake, name, forbidden(name))
    saved = torch_steps
    try:
        for backend in (None, "opencl", "numpy"):
            fake.cuda_available = available(True)
            assert not torch_cuda_usable(backend, fake), backend
        assert not calls, f"torch.cuda.is_available() asked for another backend: {calls}"
        fake.cuda_available = available(False)
        assert not torch_cuda_usable("cuda", fake)
        assert calls == ["cuda_available"], calls
        fake.cuda_available = available(True)
        assert torch_cuda_usable("cuda", fake)
        torch_steps = fake
        for case in (
            Case("small", "mlp", 4, [8, 8, 10]),
            Case("lenet", "lenet", 2),
        ):
            impls, _ = build_impls(case, None, torch_cuda_usable(None, fake))
            names = [impl.name for impl in impls]
            assert names == ["nnlayers", "NumPy", "PyTorch"], names
            assert all(impl.group == "cpu" and not impl.warmup for impl in impls)
        table = step_table(
            [(case, [Impl(n, lambda i: 0.0, float, [1e-3]) for n in names])],
            {case.name: {"nnlayers": 2**20, "NumPy": 2**20}},
        )
        assert "cuda" not in table and "device" not in table, table
        torch_steps = None
        assert not torch_cuda_usable("cuda")
    finally:
        torch_steps = saved
    print("self-check passed: no CUDA code path without the cuda backend and a torch GPU")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
