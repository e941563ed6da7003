"""The GPU check of captured training steps: ``verify.py --only capture``, or by hand::

    python -m arraycore_cuda.capture_check --benchmarks packages/nnlayers/benchmarks \\
        --json capture.json [--backend cuda] [--steps 200] [--quick] [--only risks,networks,timing]

Three groups, in this order, each able to run alone (``--only``), every test in its own
``try`` so that one failure never hides the next; the JSON file is rewritten after each test, so
a run cut short by its timeout still reports what it did:

``risks``     what could make a captured step wrong, each alone (``../shared/research/
              cuda-graphs.md``, section 9): the capturable cuBLAS product against ``cupy.matmul``
              (eager and replayed on new inputs; memory flat over repeated captures), CuPy's own
              cuBLAS refused under capture (why the first exists), cuDNN convolution, batch norm
              and attention captured and replayed equal to eager, random numbers new at each replay
              and in eager's sequence, optimiser scalars not frozen (Adam on a warm-up + cosine
              schedule, captured against eager), an eager allocation after a capture not touching
              what the replay uses;
``networks``  every benchmark network (``bench_networks.py``'s and ``bench_training.py``'s)
              trained ``--steps`` steps captured and eagerly from the same weights on the same
              batches: losses within 1e-5 relative at every step;
``timing``    per network: the step time of nnlayers eager and captured, PyTorch eager and
              PyTorch with ``torch.cuda.graph`` (TF32 off on both sides), the captured steps' GPU
              time (back-to-back replays: the GPU's busy time per step once no host waits
              between kernels), and peak device memory of each.

It prints one table at the end. On a backend other than CUDA (``--backend opencl``: how it is
rehearsed without a GPU) the CUDA-only tests are skipped with the reason and the PyTorch
columns are left out.
"""

from __future__ import annotations

import argparse
import functools
import gc
import json
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import arraycore

REL_LOSS = 1e-5


class Skip(Exception):
    """A test that does not apply here (its reason is the message)."""


class Check:
    """The results so far, written to ``path`` after each test."""

    def __init__(self, path: Path | None, backend: str) -> None:
        self.path = path
        self.results: dict[str, Any] = {
            "backend": backend,
            "risks": {},
            "networks": {},
            "timing": {},
        }

    def run(self, group: str, name: str, test: Callable[[], dict[str, Any]]) -> None:
        began = time.monotonic()
        try:
            found = {"status": "passed", **test()}
        except Skip as exc:
            found = {"status": "skipped", "detail": str(exc)}
        except AssertionError as exc:
            found = {"status": "failed", "detail": " ".join(str(exc).split())[:600]}
        except Exception as exc:
            tail = traceback.format_exc().strip().splitlines()[-4:]
            found = {"status": "error", "detail": f"{type(exc).__name__}: {exc}"[:600], "tb": tail}
        found["seconds"] = round(time.monotonic() - began, 2)
        self.results[group][name] = found
        print(f"{group}/{name}: {found['status']} ({found['seconds']} s) {found.get('detail', '')}")
        sys.stdout.flush()
        self.write()

    def write(self) -> None:
        if self.path is not None:
            self.path.write_text(json.dumps(self.results, indent=1, default=str), encoding="utf-8")


def _cupy(xp: Any) -> Any:
    if xp.name != "cuda":
        raise Skip(f"needs the cuda backend (this run is on {xp.name})")
    import cupy

    return cupy


def _host(xp: Any, a: Any) -> np.ndarray:
    return np.asarray(xp.to_numpy(a), dtype=np.float64)


def _rel(a: np.ndarray, b: np.ndarray) -> float:
    scale = max(float(np.max(np.abs(b))) if b.size else 0.0, 1e-30)
    return float(np.max(np.abs(a - b))) / scale if a.size else 0.0


def _capture(xp: Any, fn: Callable[[], Any]) -> Any:
    return xp.__array_namespace_info__().capture(fn)


def _sync(xp: Any) -> None:
    xp.__array_namespace_info__().synchronize()


# -- risks ------------------------------------------------------------------------------------------
GEMM_CASES = [
    ((256, 512), (512, 128), "c", "c"),
    ((512, 256), (512, 128), "t", "c"),
    ((256, 512), (128, 512), "c", "t"),
    ((8, 64, 96), (96, 32), "c", "c"),
    ((8, 64, 96), (8, 96, 32), "c", "c"),
    ((8, 96, 64), (8, 96, 32), "t", "c"),
    ((4, 3, 16, 24), (4, 3, 24, 8), "c", "c"),
    ((96,), (96, 32), "c", "c"),
    ((64, 96), (96,), "c", "c"),
    ((1, 1024), (1024, 1000), "c", "c"),
]


def risk_gemm(xp: Any) -> dict[str, Any]:
    """The capturable cuBLAS product against ``cupy.matmul``: eager, then captured and replayed
    on new inputs; device memory flat over ten captures."""
    cp = _cupy(xp)
    graphs = xp._backend._graphs
    gemm = graphs.gemm()
    stream = cp.cuda.Stream(non_blocking=True)
    worst: dict[str, float] = {}
    rng = np.random.default_rng(0)
    tol = {"float32": 1e-6, "float64": 1e-12, "float16": 2e-3}
    for dtype in ("float32", "float64", "float16"):
        for sa, sb, la, lb in GEMM_CASES:
            a = cp.asarray(rng.standard_normal(sa[:-2] + sa[-2:][:: -1 if la == "t" else 1]))
            b = cp.asarray(rng.standard_normal(sb[:-2] + sb[-2:][:: -1 if lb == "t" else 1]))
            a = (cp.swapaxes(a, -1, -2) if la == "t" else a).astype(dtype)
            b = (cp.swapaxes(b, -1, -2) if lb == "t" else b).astype(dtype)
            expected = cp.matmul(a, b)
            with stream:
                gemm.bind(int(stream.ptr))
                got = gemm.matmul(a, b)
            stream.synchronize()
            err = _rel(cp.asnumpy(got).astype(np.float64), cp.asnumpy(expected).astype(np.float64))
            worst[f"{dtype} eager"] = max(worst.get(f"{dtype} eager", 0.0), err)
            assert got.shape == expected.shape, f"{sa} @ {sb}: {got.shape} != {expected.shape}"
            assert err <= tol[dtype], f"{dtype} {sa}@{sb} ({la},{lb}) eager: {err:.2e}"
            sa_, sb_ = a.copy(), b.copy()
            captured = _capture(xp, functools.partial(xp.matmul, sa_, sb_))
            for _ in range(3):
                sa_[...] = cp.asarray(rng.standard_normal(sa_.shape)).astype(dtype)
                sb_[...] = cp.asarray(rng.standard_normal(sb_.shape)).astype(dtype)
                captured.replay()
                ref = cp.matmul(sa_, sb_)
                err = _rel(
                    cp.asnumpy(captured.result).astype(np.float64),
                    cp.asnumpy(ref).astype(np.float64),
                )
                worst[f"{dtype} replayed"] = max(worst.get(f"{dtype} replayed", 0.0), err)
                assert err <= tol[dtype], f"{dtype} {sa}@{sb} replayed: {err:.2e}"
    cp.cuda.Device().synchronize()
    free_before = cp.cuda.runtime.memGetInfo()[0]
    a = cp.ones((1024, 1024), cp.float32)
    for _ in range(10):
        captured = _capture(xp, lambda: xp.matmul(a, a))
        captured.replay()
        del captured
        gc.collect()
    cp.cuda.Device().synchronize()
    grown = free_before - cp.cuda.runtime.memGetInfo()[0]
    assert grown < 64 << 20, f"ten captures took {grown / 2**20:.0f} MiB of device memory"
    return {"detail": ", ".join(f"{k} {v:.1e}" for k, v in worst.items()), "worst": worst}


def risk_cupy_refuses(xp: Any) -> dict[str, Any]:
    """``cupy.matmul`` itself is refused under capture (why the ctypes product exists)."""
    cp = _cupy(xp)
    a = cp.ones((64, 64), cp.float32)
    cp.matmul(a, a)
    try:
        _capture(xp, lambda: cp.matmul(a, a))
    except arraycore.CaptureUnsupported as exc:
        return {"detail": f"refused, as expected: {str(exc)[:160]}"}
    return {"detail": "NOT refused: CuPy now captures its cuBLAS calls (cupy/cupy#6290 closed?)"}


def risk_cudnn(xp: Any) -> dict[str, Any]:
    """cuDNN convolution (forward, data and filter gradients), batch norm (train forward and
    backward) and attention, captured after eager warm-up, replayed on new inputs: equal to
    eager on those inputs."""
    cp = _cupy(xp)
    rng = np.random.default_rng(1)

    def arr(*shape: int) -> Any:
        return xp.asarray(rng.standard_normal(shape).astype(np.float32))

    x, w, dy = arr(16, 32, 16, 16), arr(64, 32, 3, 3), arr(16, 64, 16, 16)
    g, b = arr(32), arr(32)
    q, k, v = arr(4, 8, 64, 32), arr(4, 8, 64, 32), arr(4, 8, 64, 32)
    nn = xp.nn
    ops: dict[str, Callable[[], Any]] = {
        "conv2d": lambda: nn.conv2d(x, w, padding=1),
        "conv2d_backward_data": lambda: nn.conv2d_backward_data(dy, w, x.shape, padding=1),
        "conv2d_backward_filter": lambda: nn.conv2d_backward_filter(dy, x, w.shape, padding=1),
        "batch_norm": lambda: nn.batch_norm(x, g, b, training=True)[0],
        "attention": lambda: nn.scaled_dot_product_attention(q, k, v, causal=True),
    }
    worst, skipped = {}, []
    for name, fn in ops.items():
        try:
            fn()  # warm-up: plans built and tuned
        except (TypeError, AttributeError) as exc:  # a signature this check got wrong: say so
            skipped.append(f"{name} ({type(exc).__name__}: {str(exc)[:80]})")
            continue
        captured = _capture(xp, fn)
        for t in (x, dy, q):
            t[...] = cp.asarray(rng.standard_normal(t.shape).astype(np.float32))
        captured.replay()
        expected = fn()
        err = _rel(_host(xp, captured.result), _host(xp, expected))
        worst[name] = err
        assert err <= 1e-6, f"{name}: replay differs from eager by {err:.2e}"
    detail = ", ".join(f"{k} {v:.1e}" for k, v in worst.items())
    if skipped:
        detail += "; not run: " + "; ".join(skipped)
    return {"detail": detail, "worst": worst}


def risk_rng(xp: Any) -> dict[str, Any]:
    """A captured draw gives new numbers at each replay, eager's next draws in order."""
    shape = (4096,)
    gen = xp.random.default_rng(0)
    clone = xp.random.default_rng(0)
    gen.uniform(shape=shape, dtype=xp.float32)
    clone.uniform(shape=shape, dtype=xp.float32)
    captured = _capture(xp, lambda: gen.uniform(shape=shape, dtype=xp.float32))
    draws = []
    for _ in range(3):
        captured.replay()
        draws.append(_host(xp, captured.result).copy())
    expected = [_host(xp, clone.uniform(shape=shape, dtype=xp.float32)) for _ in range(3)]
    assert not np.array_equal(draws[0], draws[1]), "two replays drew the same numbers"
    for i, (got, want) in enumerate(zip(draws, expected, strict=True)):
        assert np.array_equal(got, want), f"replay {i + 1} is not eager's draw {i + 2}"
    return {"detail": "3 replays: new numbers each, equal to eager's draws 2-4"}


def _small_model(seed: int = 0) -> Any:
    import nnlayers.expr as ex
    from nnlayers.layers import Affine, Dropout, Sequential
    from nnlayers.models import Model
    from nnlayers.optim import AdamW
    from nnlayers.optim.schedules import CosineDecay, Warmup

    net = Sequential([Affine(64, activation="relu"), Dropout(0.2), Affine(10)], seed=seed)
    x = ex.placeholder((None, 32), name="x")
    y = ex.placeholder((None,), "int64", name="y")
    opt = AdamW(Warmup(CosineDecay(3e-3, total_steps=40), warmup_steps=5), weight_decay=0.01)
    return Model(ex.softmax_cross_entropy(net(x), y), inputs=[x, y], optimizer=opt)


def risk_scalars(xp: Any) -> dict[str, Any]:
    """Optimiser scalars are not frozen: AdamW on a warm-up + cosine, dropout, 30 steps
    captured against 30 eager steps (losses, weights, step counts)."""
    rng = np.random.default_rng(2)
    batches = [
        (rng.standard_normal((64, 32)).astype(np.float32), rng.integers(0, 10, 64))
        for _ in range(30)
    ]
    runs = []
    for capture in (False, True):
        model = _small_model()
        model.capture = capture
        losses = [model.train_step(b)[0] for b in batches]
        runs.append((np.array([float(xp.to_numpy(v)) for v in losses]), model))
    (eager, m0), (graphed, m1) = runs
    assert "captured" in m1.capture_status, m1.capture_status
    err = float(np.max(np.abs(graphed - eager) / np.abs(eager)))
    assert err <= REL_LOSS, f"losses differ by {err:.2e} relative"
    werr = max(_rel(_host(xp, a.value), _host(xp, b.value)) for a, b in zip(m1.params, m0.params))
    assert werr <= 1e-5, f"weights differ by {werr:.2e}"
    assert m1.optimizer.step_count == m0.optimizer.step_count == 30
    return {"detail": f"losses {err:.1e}, weights {werr:.1e}; {m1.capture_status}"}


def risk_alias(xp: Any) -> dict[str, Any]:
    """An eager allocation, filled and freed after a capture, does not reach what the replay
    reads or writes (the capture's private pool)."""
    x = xp.ones((1 << 20,), dtype=xp.float32)

    def step() -> Any:
        t = xp.multiply(x, 2.0)
        return xp.add(t, 1.0)

    step()
    captured = _capture(xp, step)
    big = (1 << 28) if xp.name == "cuda" else (1 << 24)  # 1 GiB on a GPU, 64 MiB elsewhere
    junk = xp.full((big,), 7.0, dtype=xp.float32)
    del junk
    xp.inplace.fill(3.0, out=x)
    captured.replay()
    got = _host(xp, captured.result)
    assert np.all(got == 7.0), f"replay gave {np.unique(got)[:4]}, not 2 * 3 + 1"
    return {"detail": f"{big * 4 >> 20} MiB allocated, filled and freed eagerly; replay intact"}


def risk_concat(xp: Any) -> dict[str, Any]:
    """``concat`` of more than eight arrays under capture (CuPy copies a pointer table from the
    host for them, which a capture refuses: the backend joins them eight at a time there)."""
    parts = [xp.full((64,), float(i), dtype=xp.float32) for i in range(13)]
    xp.concat(parts)
    captured = _capture(xp, lambda: xp.concat(parts))
    for i, part in enumerate(parts):
        xp.inplace.fill(float(i + 100), out=part)
    captured.replay()
    got = _host(xp, captured.result)
    want = np.repeat(np.arange(100, 113, dtype=np.float64), 64)
    assert np.array_equal(got, want), "the replayed concat differs"
    return {"detail": "13 arrays joined under capture, replayed on new values"}


RISKS = {
    "gemm": risk_gemm,
    "cupy-refuses-cublas": risk_cupy_refuses,
    "cudnn": risk_cudnn,
    "rng": risk_rng,
    "scalars": risk_scalars,
    "alias": risk_alias,
    "concat": risk_concat,
}


# -- networks ---------------------------------------------------------------------------------------
def _cases(benchmarks: Path) -> dict[str, tuple[Callable[[], Any], Callable[[int], Any], Any]]:
    """``key -> (build model, make host batches, build PyTorch step or None)``."""
    sys.path.insert(0, str(benchmarks))
    import bench_training  # type: ignore[import-not-found]
    import networks  # type: ignore[import-not-found]

    found: dict[str, Any] = {}
    for key, case in networks.BY_KEY.items():

        def build(case: Any = case) -> Any:
            model, layers = case.build()
            model._layers_for_torch = layers
            return model

        def torch_step(model: Any, case: Any = case) -> Any:
            return case.torch(model._layers_for_torch, device="cuda")

        found[key] = (build, case.batches, torch_step)
    for key, args in (
        ("big-mlp", ("MLP 784-1024-1024-10, batch 128", "mlp", 128, [784, 1024, 1024, 10])),
        ("lenet", ("LeNet CNN, batch 64", "lenet", 64)),
        ("small-mlp", ("MLP 64-64-10, batch 32", "mlp", 32, [64, 64, 10])),
    ):
        case = bench_training.Case(*args)

        def build_t(case: Any = case) -> Any:
            return bench_training.nnlayers_model(case)

        def torch_t(model: Any, case: Any = case) -> Any:
            import torch_steps  # type: ignore[import-not-found]

            params = [np.array(p.numpy()) for p in model.params]
            if case.kind == "lenet":
                return torch_steps.lenet(params, 0.01, 0.9, device="cuda")
            return torch_steps.mlp(case.sizes, params, 0.01, 0.9, device="cuda")

        found[key] = (build_t, lambda n, case=case: bench_training.make_batches(case, n), torch_t)
    return found


def _device_batches(xp: Any, model: Any, host: list[Any]) -> list[Any]:
    for batch in host:
        model.check_data(*batch)
    return [tuple(xp.asarray(a) for a in batch) for batch in host]


def _steps(model: Any, batches: list[Any], count: int) -> list[Any]:
    """``count`` training steps cycling through ``batches`` (device arrays, checked on the host:
    the benchmarks' way), their losses kept on the device."""
    graph = model.graph
    with arraycore.checks(False, only="labels"), graph.checked_feeds(model.inputs):
        return [model.train_step(batches[i % len(batches)])[0] for i in range(count)]


def network_agreement(xp: Any, build: Callable[[], Any], make: Any, steps: int) -> dict[str, Any]:
    """``steps`` captured steps against ``steps`` eager ones from the same weights and batches."""
    host = make(4)
    losses = []
    status = ""
    for capture in (False, True):
        model = build()
        model.capture = capture
        batches = _device_batches(xp, model, host)
        values = _steps(model, batches, steps)
        losses.append(np.array([float(v) for v in xp.to_numpy(xp.stack(values))]))
        status = model.capture_status
        del model
        gc.collect()
    eager, graphed = losses
    assert "captured" in status, status
    rel = np.abs(graphed - eager) / np.maximum(np.abs(eager), 1e-12)
    worst = int(np.argmax(rel))
    assert rel[worst] <= REL_LOSS, (
        f"step {worst}: captured loss {graphed[worst]:.7g}, eager {eager[worst]:.7g} "
        f"({rel[worst]:.1e} relative)"
    )
    return {
        "detail": f"{steps} steps, largest relative difference {float(rel.max()):.1e}",
        "max_rel": float(rel.max()),
        "status_line": status,
    }


# -- timing -----------------------------------------------------------------------------------------
def _median_step(run: Callable[[], Any], sync: Callable[[], None], steps: int, reps: int) -> float:
    """The median over ``reps`` blocks of ``steps`` back-to-back steps of one step's time."""
    times = []
    for _ in range(reps):
        sync()
        began = time.perf_counter()
        for _ in range(steps):
            run()
        sync()
        times.append((time.perf_counter() - began) / steps)
    return statistics.median(times)


def _nnlayers_timing(xp: Any, build: Any, make: Any, capture: bool, steps: int) -> dict[str, Any]:
    bk = xp._backend
    gc.collect()
    _sync(xp)
    bk.reset_memory_stats()
    before = (bk.memory_stats() or {}).get("used_bytes", 0)
    model = build()
    model.capture = capture
    batches = _device_batches(xp, model, make(2))
    counter = [0]
    graph = model.graph

    def run() -> None:
        with arraycore.checks(False, only="labels"), graph.checked_feeds(model.inputs):
            model.train_step(batches[counter[0] % 2])
        counter[0] += 1

    for _ in range(8):  # warm-up and capture
        run()
    median = _median_step(run, lambda: _sync(xp), steps, 5)
    stats = bk.memory_stats() or {}
    found = {
        "ms": median * 1e3,
        "status": model.capture_status,
        "peak_mb": (stats.get("peak_bytes", 0) - before) / 1e6 if stats else None,
    }
    if capture and "captured" in model.capture_status:
        entry = next(iter(model._captures["train"]._graphs.values()))
        found["replay_ms"] = _median_step(entry.captured.replay, lambda: _sync(xp), steps, 5) * 1e3
    return found


def _torch_timing(
    model: Any, make_torch: Any, make: Any, graphed: bool, steps: int
) -> dict[str, Any]:
    import torch

    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    tstep = make_torch(model)
    host = make(2)
    data = [(torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()) for x, y in host]
    torch.cuda.synchronize()
    base = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    if not graphed:
        counter = [0]

        def run() -> None:
            tstep.step(*data[counter[0] % 2])
            counter[0] += 1

        for _ in range(8):
            run()
        median = _median_step(run, torch.cuda.synchronize, steps, 5)
        return {"ms": median * 1e3, "peak_mb": (torch.cuda.max_memory_allocated() - base) / 1e6}
    opt = tstep.opt
    if isinstance(opt, torch.optim.Adam):  # a captured Adam keeps its step count on the device
        groups = opt.param_groups[0]
        opt = torch.optim.Adam(
            [p for g in opt.param_groups for p in g["params"]],
            lr=groups["lr"], betas=groups["betas"], eps=groups["eps"], capturable=True,
        )  # fmt: skip
    net, lossfn = tstep.net, getattr(tstep, "loss", None)
    if lossfn is None:
        from torch.nn import functional as F  # noqa: N812

        lossfn = F.cross_entropy
    sx, sy = data[0][0].clone(), data[0][1].clone()

    def body() -> Any:
        loss = lossfn(net(sx), sy)
        loss.backward()
        opt.step()
        return loss.detach()

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            opt.zero_grad(set_to_none=True)
            body()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    opt.zero_grad(set_to_none=True)
    with torch.cuda.graph(graph):
        body()
    counter = [0]

    def replay() -> None:
        x, y = data[counter[0] % 2]
        sx.copy_(x)
        sy.copy_(y)
        graph.replay()
        counter[0] += 1

    for _ in range(3):
        replay()
    median = _median_step(replay, torch.cuda.synchronize, steps, 5)
    busy = _median_step(graph.replay, torch.cuda.synchronize, steps, 5)
    return {
        "ms": median * 1e3,
        "replay_ms": busy * 1e3,
        "peak_mb": (torch.cuda.max_memory_allocated() - base) / 1e6,
    }


def network_timing(xp: Any, build: Any, make: Any, make_torch: Any, steps: int) -> dict[str, Any]:
    rows: dict[str, Any] = {
        "nnlayers eager": _nnlayers_timing(xp, build, make, False, steps),
        "nnlayers captured": _nnlayers_timing(xp, build, make, True, steps),
    }
    if xp.name == "cuda":
        try:
            import torch  # noqa: F401

            model = build()
            rows["PyTorch eager"] = _torch_timing(model, make_torch, make, False, steps)
            rows["PyTorch graphed"] = _torch_timing(model, make_torch, make, True, steps)
        except ImportError as exc:
            rows["PyTorch"] = {"error": f"not installed: {exc}"}
    ours = rows["nnlayers captured"]["ms"]
    ratios = {
        f"/ {name}": ours / row["ms"]
        for name, row in rows.items()
        if row.get("ms") and name != "nnlayers captured"
    }
    detail = ", ".join(f"{n} {r['ms']:.2f} ms" for n, r in rows.items() if r.get("ms"))
    return {"detail": detail, "rows": rows, "ratios": ratios}


def table(results: dict[str, Any]) -> str:
    """The timing group as one Markdown table."""
    lines = [
        "| network | nnlayers eager ms | nnlayers captured ms | its GPU time ms | PyTorch eager ms "
        "| PyTorch graphed ms | its GPU time ms | captured / PyTorch eager | captured / PyTorch "
        "graphed | peak MB (ours captured / PyTorch eager) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]

    def ms(row: Any, key: str = "ms") -> str:
        value = (row or {}).get(key)
        return f"{value:.2f}" if isinstance(value, float) else "-"

    for key, found in results["timing"].items():
        rows = found.get("rows")
        if not rows:
            lines.append(f"| {key} | {found['status']}: {found.get('detail', '')[:80]} |")
            continue
        ours = rows["nnlayers captured"]
        te, tg = rows.get("PyTorch eager"), rows.get("PyTorch graphed")
        ratio_e = f"{ours['ms'] / te['ms']:.2f}x" if te and te.get("ms") else "-"
        ratio_g = f"{ours['ms'] / tg['ms']:.2f}x" if tg and tg.get("ms") else "-"
        mem = f"{ours.get('peak_mb') or 0:.1f} / {(te or {}).get('peak_mb') or 0:.1f}"
        lines.append(
            f"| {key} | {ms(rows['nnlayers eager'])} | {ms(ours)} | {ms(ours, 'replay_ms')} | "
            f"{ms(te)} | {ms(tg)} | {ms(tg, 'replay_ms')} | {ratio_e} | {ratio_g} | {mem} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m arraycore_cuda.capture_check")
    parser.add_argument(
        "--benchmarks", type=Path, required=True, help="packages/nnlayers/benchmarks"
    )
    parser.add_argument("--json", type=Path, default=None, help="write the results here")
    parser.add_argument("--backend", default="cuda")
    parser.add_argument("--steps", type=int, default=200, help="steps per network compared")
    parser.add_argument("--quick", action="store_true", help="fewer steps and timed steps")
    parser.add_argument("--only", default="risks,networks,timing")
    parser.add_argument("--cases", default="", help="comma-separated networks (default: all)")
    args = parser.parse_args(argv)
    groups = [g for g in args.only.split(",") if g]
    steps = min(args.steps, 30) if args.quick else args.steps
    timed = 10 if args.quick else 40
    check = Check(args.json, args.backend)
    with arraycore.use(args.backend) as xp:
        check.results["device"] = str(xp.device)
        check.results["capture_support"] = xp.__array_namespace_info__().capture_support()
        if "risks" in groups:
            for name, test in RISKS.items():
                check.run("risks", name, functools.partial(test, xp))
        cases = _cases(args.benchmarks)
        chosen = [c for c in args.cases.split(",") if c] or list(cases)
        if "networks" in groups:
            for key in chosen:
                build, make, _ = cases[key]
                check.run(
                    "networks", key, functools.partial(network_agreement, xp, build, make, steps)
                )
        if "timing" in groups:
            for key in chosen:
                build, make, make_torch = cases[key]
                check.run(
                    "timing",
                    key,
                    functools.partial(network_timing, xp, build, make, make_torch, timed),
                )
            check.results["table"] = table(check.results)
            print(check.results["table"])
    check.write()
    bad = [
        f"{g}/{n}"
        for g in ("risks", "networks", "timing")
        for n, r in check.results[g].items()
        if r["status"] in ("failed", "error")
    ]
    print(f"capture check: {len(bad)} failed or errors" + (f": {', '.join(bad)}" if bad else ""))
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
