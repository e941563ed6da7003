"""The PyTorch oracle: every op-table row with a PyTorch version, forward values and gradients in
float64 (to ~1e-10) and float32, on the active backend (``nox -s oracle`` runs NumPy and OpenCL).

PyTorch is a test-only dependency: without it these tests are skipped with the reason; the rule
that every differentiable op has an oracle row is checked without it (tests/ops/test_op_table.py).
"""

from __future__ import annotations

import numpy as np
import pytest
from test_op_table import CASES

import nnlayers
import nnlayers.expr as ex
from nnlayers import Parameter
from nnlayers.testing.oracle import ORACLE_TOLERANCES, check_against_torch

torch = pytest.importorskip("torch", reason="the PyTorch oracle needs torch (nox -s oracle)")

ORACLE_CASES = [c for c in CASES if c.torch is not None]
DTYPES = ["float64", "float32"]


@pytest.fixture(params=DTYPES)
def dtype(request, xp) -> np.dtype:
    if request.param not in xp.__array_namespace_info__().dtypes():
        pytest.skip(f"the {xp.name} device has no {request.param}")
    return np.dtype(request.param)


@pytest.mark.parametrize("case", ORACLE_CASES, ids=lambda c: c.id)
def test_values_and_gradients_equal_pytorch(case, dtype) -> None:
    check_against_torch(case.build, case.torch, case.inputs(), dtype, training=case.training)


def _torch_grads(params: list[np.ndarray], loss_fn) -> list[np.ndarray]:
    tensors = [torch.tensor(p, requires_grad=True) for p in params]
    loss_fn(*tensors).backward()
    return [t.grad.numpy() for t in tensors]


def _graph_grads(values: list[np.ndarray], loss_fn, dtype) -> list[np.ndarray]:
    params = [Parameter(v, dtype=dtype, name=f"p{i}") for i, v in enumerate(values)]
    graph = nnlayers.compile(loss_fn(*params))
    graph.forward()
    graph.backward()
    return [np.asarray(graph.xp.to_numpy(p.grad), dtype=np.float64) for p in params]


STRUCTURES = {
    # the same parameter used twice (weight sharing)
    "shared": (
        lambda w, x: ex.sum(ex.tanh(x @ w) @ w),
        lambda w, x: (torch.tanh(x @ w) @ w).sum(),
    ),
    # fan-out: h feeds two branches that meet again
    "fan-out": (
        lambda a, b: ex.sum(ex.tanh(a + b) * (a + b) + ex.exp(a + b)),
        lambda a, b: (torch.tanh(a + b) * (a + b) + torch.exp(a + b)).sum(),
    ),
    # two parameters through identity ops into one add (the gradients once aliased)
    "identity-add": (
        lambda a, b: ex.sum((ex.broadcast_to(a, a.shape) + ex.reshape(b, b.shape)) ** 2),
        lambda a, b: ((a + b) ** 2).sum(),
    ),
}


@pytest.mark.parametrize("structure", list(STRUCTURES), ids=list(STRUCTURES))
def test_graph_structures_match_pytorch(structure: str, dtype) -> None:
    ours, theirs = STRUCTURES[structure]
    rng = np.random.default_rng(7)
    values = [rng.uniform(-1, 1, (3, 3)), rng.uniform(-1, 1, (3, 3))]
    got = _graph_grads(values, ours, dtype)
    want = _torch_grads([v.astype(dtype) for v in values], theirs)
    tol = ORACLE_TOLERANCES[dtype]
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=tol.rtol, atol=tol.atol)
