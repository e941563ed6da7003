"""Embedding: lookups, gradients accumulating on repeated ids, integer ids only."""

from __future__ import annotations

import numpy as np
import pytest

import nnlayers
import nnlayers.expr as ex
from nnlayers.layers import Embedding


def test_embedding_gradients_with_repeated_ids(gradcheck, tol) -> None:
    ids = np.array([[0, 2, 2], [1, 0, 3]])
    gradcheck(Embedding(4, 3, dtype=tol.dtype, seed=0), ids)


def test_embedding_looks_up_rows() -> None:
    emb = Embedding(5, 2, seed=0)
    ids = ex.placeholder((None, 3), "int64", name="ids")
    graph = nnlayers.compile(ex.sum(emb(ids)))
    data = np.array([[4, 0, 4]])
    out = graph.xp.to_numpy(graph.forward({ids: data}))
    table = emb.weight.numpy()
    assert out == pytest.approx(table[[4, 0, 4]].sum(), rel=1e-6)
    graph.backward()
    np.testing.assert_array_equal(graph.xp.to_numpy(emb.weight.grad)[:, 0], [1, 0, 0, 0, 2])


def test_embedding_needs_integer_ids() -> None:
    with pytest.raises(TypeError, match="Embedding 'embedding': needs integer ids"):
        Embedding(5, 2)(ex.placeholder((None, 3)))


@pytest.fixture
def bounds_checks(monkeypatch) -> list[int]:
    """The sizes of the index arrays arraycore checks (each one a wait for the queue on a
    device backend), in order."""
    from arraycore import _checks

    checked: list[int] = []
    real = _checks._bounds

    def bounds(xp, a):  # noqa: ANN001, ANN202 - counts the checks, not the host step inside one
        if not getattr(bounds, "inside", False):
            checked.append(a.size)
        bounds.inside = True
        try:
            return real(xp, a)
        finally:
            bounds.inside = False

    monkeypatch.setattr(_checks, "_bounds", bounds)
    return checked


def _lookup_graph() -> tuple[Embedding, ex.Expr, nnlayers.Graph]:
    emb = Embedding(5, 2, seed=0)
    ids = ex.placeholder((None, 3), "int64", name="ids")
    return emb, ids, nnlayers.compile(ex.sum(emb(ids)))


def test_ids_are_checked_once_a_step_and_bad_ones_still_raise(bounds_checks) -> None:
    """Ids already on the backend: the forward lookup checks them (on a device backend that
    waits for the queue); the gradient scatters by the very same ids without checking them
    again. An id out of range is still an IndexError, before any gradient."""
    emb, ids, graph = _lookup_graph()
    data = graph.xp.asarray(np.array([[4, 0, -1], [1, 1, 2]]))
    graph.forward({ids: data})
    graph.backward()
    # host arrays (the NumPy backend's) the graph checks itself, on the host (next test)
    assert bounds_checks == ([] if isinstance(data, np.ndarray) else [6])
    grad = graph.xp.to_numpy(emb.weight.grad)[:, 0]
    np.testing.assert_array_equal(grad, [1, 2, 1, 0, 2])  # -1 is the last row, as in forward
    with pytest.raises(IndexError, match=r"out of bounds|must be in"):
        graph.forward({ids: graph.xp.asarray(np.array([[5, 0, 0]]))})


def test_host_ids_are_checked_on_the_host_naming_the_placeholder(bounds_checks) -> None:
    """Ids fed from the host are checked there by the graph, on every backend, so the lookup
    does not check them again (on a device: no wait for the queue); a bad one is a FeedError
    (and an IndexError) naming the placeholder, the lookup and where the bad ids are."""
    emb, ids, graph = _lookup_graph()
    graph.forward({ids: np.array([[4, 0, -5], [1, 1, 2]])})
    graph.backward()
    assert bounds_checks == []
    np.testing.assert_array_equal(graph.xp.to_numpy(emb.weight.grad)[:, 0], [2, 2, 1, 0, 1])
    before = emb.weight.numpy().copy()
    with pytest.raises(nnlayers.FeedIndexError) as caught:
        graph.forward({ids: np.array([[1, 5, 0], [-6, 2, 7]])})
    message = str(caught.value)
    assert "'ids'" in message and "take" in message and "[-5, 5)" in message
    assert "5 at (0, 1), -6 at (1, 0), 7 at (1, 2)" in message
    assert isinstance(caught.value, IndexError) and isinstance(caught.value, nnlayers.FeedError)
    np.testing.assert_array_equal(emb.weight.numpy(), before)


def test_checked_feeds_skip_the_lookup_check_inside_the_block_only(bounds_checks) -> None:
    """``Graph.checked_feeds``: ids a caller checked beforehand (``fit``: the feed's host
    arrays) are not checked again by each step's lookup; outside the block they are."""
    emb, ids, graph = _lookup_graph()
    table = emb.weight.numpy()
    given = [[4, 0, 1]]  # not a NumPy array: the graph leaves the check to the lookup
    with graph.checked_feeds([ids]):
        out = graph.xp.to_numpy(graph.forward({ids: given}))
        graph.backward()
    assert bounds_checks == []
    assert out == pytest.approx(table[[4, 0, 1]].sum(), rel=1e-6)
    graph.forward({ids: given})
    assert bounds_checks == [3]
    with pytest.raises(IndexError, match="out of bounds"):
        graph.forward({ids: [[4, 0, 5]]})


def test_fit_checks_ids_once_before_training(bounds_checks) -> None:
    """``fit`` checks an in-memory feed's ids on the host before any step (a bad id is reported
    before anything changes), then its steps do not check them again."""
    from nnlayers.layers import Affine, Sequential
    from nnlayers.models import Classifier
    from nnlayers.optim import SGD

    rng = np.random.default_rng(0)
    x = rng.integers(0, 7, size=(32, 4))
    y = (x[:, 0] > 3).astype("int64")
    net = Sequential([Embedding(7, 3, seed=0), nnlayers.layers.Flatten(), Affine(2, seed=0)])
    model = Classifier(net, (4,), input_dtype="int64")
    bad = x.copy()
    bad[9, 2] = 7
    before = [p.numpy().copy() for p in model.params]
    with pytest.raises(nnlayers.FeedIndexError, match=r"7 at \(9, 2\)"):
        nnlayers.fit(
            model, nnlayers.Feed(bad, y, batch_size=8), epochs=1, optimizer=SGD(0.1), progress=False
        )
    for p, b in zip(model.params, before, strict=True):
        np.testing.assert_array_equal(p.numpy(), b)
    history = nnlayers.fit(
        model, nnlayers.Feed(x, y, batch_size=8), epochs=3, optimizer=SGD(0.5), progress=False
    )
    assert history["loss"][-1] < history["loss"][0]
    assert bounds_checks == []
