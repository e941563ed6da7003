"""Advanced indexing: integer arrays and boolean masks in ``x[key]`` and ``x[key] = value``.

Built from the backend primitives, so every backend has it on its device:

- an integer-array index gathers with one ``take`` on the indexed axes flattened together: the
  index arrays (and ints beside them) broadcast to one shape, as the standard and NumPy say, and
  the result's gathered axes stand where the first index array stood when the index arrays are
  adjacent, or first otherwise (NumPy's rule; the standard leaves slices beside index arrays
  to the implementation);
- a boolean mask becomes the integer arrays of its ``True`` coordinates, in row-major order
  (:func:`flat_nonzero`: a cumulative sum and a ``scatter_add`` on the device, and one read of
  the count, which a data-dependent shape needs);
- ``x[key] = value`` scatters into the flat positions that ``x[key]`` would gather. Where index
  arrays repeat a position, the last value written wins, as in NumPy: arraycore counts the
  writes per position on the device, and only a key that does repeat one is resolved on the
  host (a copy of ``x`` there and back; a boolean mask never repeats).

Out-of-range indices are an ``IndexError`` naming the axis and its size (checked on the device
with :func:`arraycore.checks` on, as for ``take``).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from . import _checks
from .backend import Array

if TYPE_CHECKING:
    from ._base import NamespaceBase

_INT64 = np.dtype("int64")


def is_advanced(xp: NamespaceBase, key: Any) -> bool:
    """Whether ``key`` holds an array, a list or a bool: an advanced (not a basic) index."""
    parts = key if isinstance(key, tuple) else (key,)
    return any(xp._is_array(k) or isinstance(k, list | np.ndarray | bool | np.bool_) for k in parts)


def _component(xp: NamespaceBase, k: Any, op: str) -> Any:
    """An index component with host data (lists, NumPy arrays, bools) as arrays of ``xp``."""
    if isinstance(k, bool | np.bool_):
        return xp._backend.full((), bool(k), np.dtype("bool"))
    if isinstance(k, list | np.ndarray):
        host = np.asarray(k)
        if host.size == 0 and not isinstance(k, np.ndarray):
            host = host.astype(_INT64)  # [] is float64 to NumPy
        if host.dtype.kind not in "biu":
            raise IndexError(f"{op}: index arrays must be integers or bools, got {k!r}")
        return xp._backend.from_numpy(host)
    if xp._is_array(k):
        xp._check(op, k)
        if k.dtype.kind not in "biu":
            raise IndexError(
                f"{op}: index arrays must be integers or bools, got {k.dtype} "
                f"(shape {tuple(k.shape)})"
            )
    return k


def flat_nonzero(xp: NamespaceBase, mask: Array) -> Array:
    """The flat (row-major) positions of the ``True`` elements of a bool array, as 1-D int64."""
    bk = xp._backend
    size = math.prod(mask.shape)
    if size == 0:
        return bk.full((0,), 0, _INT64)
    flat = bk.reshape(bk.astype(mask, _INT64), (size,))
    ends = xp.cumulative_sum(flat)  # ends[i]: the Trues up to and including i
    count = int(bk.to_numpy(bk.getitem(ends, (size - 1,))))
    # each True goes to its slot; every False to one spare slot past the end, dropped after
    slot = bk.where(
        bk.astype(flat, np.dtype("bool")),
        bk.binary("subtract", ends, bk.full((), 1, _INT64)),
        bk.full((), count, _INT64),
    )
    out = bk.full((count + 1,), 0, _INT64)
    bk.scatter_add(out, slot, xp.arange(size, dtype=_INT64), 0)
    return bk.getitem(out, (slice(0, count),))


def nonzero_coordinates(xp: NamespaceBase, mask: Array) -> list[Array]:
    """The coordinates (one int64 array per axis, row-major order) of the ``True`` elements."""
    positions = flat_nonzero(xp, mask)
    dims = tuple(mask.shape)
    coords = []
    for j, size in enumerate(dims):
        inner = math.prod(dims[j + 1 :])
        coord = xp.floor_divide(positions, inner) if inner != 1 else positions
        coords.append(xp.remainder(coord, size) if j else coord)
    return coords


def _expand(xp: NamespaceBase, x: Array, key: tuple[Any, ...], op: str) -> tuple[Array, list[Any]]:
    """``x`` with the new axes of ``None`` inserted and a key of one entry per axis (ints,
    slices, integer arrays), boolean masks replaced by their coordinate arrays."""
    if sum(k is Ellipsis for k in key) > 1:
        raise IndexError(f"{op}: an index can only have a single ellipsis")
    used = sum(
        len(k.shape) if xp._is_array(k) and k.dtype.kind == "b" else 1
        for k in key
        if k is not None and k is not Ellipsis
    )
    ndim = len(x.shape)
    if used > ndim:
        raise IndexError(f"{op}: too many indices ({used}) for an array of shape {tuple(x.shape)}")
    entries: list[Any] = []
    new_shape: list[int] = []
    axis = 0
    for k in key:
        if k is Ellipsis or k is None:
            count = ndim - used if k is Ellipsis else 0
            entries.extend([slice(None)] * count)
            new_shape.extend(x.shape[axis : axis + count])
            axis += count
            if k is None:
                entries.append(slice(None))
                new_shape.append(1)
        elif xp._is_array(k) and k.dtype.kind == "b":
            dims = tuple(x.shape[axis : axis + len(k.shape)])
            if tuple(k.shape) != dims:
                raise IndexError(
                    f"{op}: a boolean index of shape {tuple(k.shape)} does not match the "
                    f"indexed axes {dims} of an array of shape {tuple(x.shape)} (from axis {axis})"
                )
            entries.extend(nonzero_coordinates(xp, k))
            new_shape.extend(dims)
            axis += len(dims)
        else:
            entries.append(k)
            new_shape.append(x.shape[axis])
            axis += 1
    entries.extend([slice(None)] * (ndim - axis))
    new_shape.extend(x.shape[axis:])
    if len(new_shape) != ndim:
        x = xp._backend.reshape(x, tuple(new_shape))
    return x, entries


def getitem(xp: NamespaceBase, x: Array, key: Any, op: str = "getitem") -> Array:
    """``x[key]`` for a key with integer arrays or boolean masks (see the module docstring)."""
    parts = tuple(_component(xp, k, op) for k in (key if isinstance(key, tuple) else (key,)))
    bk = xp._backend
    scalar_masks = [k for k in parts if xp._is_array(k) and k.dtype.kind == "b" and not k.shape]
    if scalar_masks:
        if len(parts) != 1:
            raise IndexError(f"{op}: a 0-d boolean index must be the only index")
        keep = bool(bk.to_numpy(parts[0]))
        grown = bk.reshape(x, (1, *x.shape))
        return bk.getitem(grown, (slice(0, 1 if keep else 0),) + (slice(None),) * len(x.shape))
    x, entries = _expand(xp, x, parts, op)
    advanced = [i for i, k in enumerate(entries) if not isinstance(k, slice)]
    if not any(xp._is_array(entries[i]) for i in advanced):
        return xp.getitem(x, tuple(entries))
    # the slices first (the advanced axes kept whole), then one gather on the advanced axes
    basic = tuple(k if isinstance(k, slice) else slice(None) for k in entries)
    y = bk.getitem(x, basic)
    indices = [_checks.index_array(xp, op, entries[i], y.shape[i], i, flat=False) for i in advanced]
    try:
        shape = np.broadcast_shapes(*(tuple(ix.shape) for ix in indices))
    except ValueError:
        shapes = ", ".join(str(tuple(ix.shape)) for ix in indices)
        raise IndexError(
            f"{op}: index arrays of shapes {shapes} do not broadcast together"
        ) from None
    rest = [i for i in range(len(entries)) if i not in advanced]
    moved = bk.permute_dims(y, (*advanced, *rest)) if advanced != list(range(len(advanced))) else y
    sizes = [y.shape[i] for i in advanced]
    flat = None
    for ix, stride in zip(indices, [math.prod(sizes[j + 1 :]) for j in range(len(sizes))]):
        term = xp.multiply(ix, stride) if stride != 1 else ix
        flat = term if flat is None else xp.add(flat, term)
    assert flat is not None
    flat = bk.reshape(bk.broadcast_to(flat, shape), (math.prod(shape),))
    rest_shape = tuple(y.shape[i] for i in rest)
    table = bk.reshape(moved, (math.prod(sizes), *rest_shape))
    result = bk.reshape(bk.take(table, flat, 0), (*shape, *rest_shape))
    adjacent = advanced == list(range(advanced[0], advanced[0] + len(advanced)))
    if adjacent and advanced[0] > 0 and shape:
        # NumPy: adjacent index arrays leave their result axes where the first one stood
        n, start = len(shape), advanced[0]
        order = (*range(n, n + start), *range(n), *range(n + start, len(result.shape)))
        result = bk.permute_dims(result, order)
    return result


def setitem(xp: NamespaceBase, x: Array, key: Any, value: Any, op: str = "setitem") -> None:
    """``x[key] = value`` for a key with integer arrays or boolean masks; the last write wins
    where the key repeats a position."""
    bk = xp._backend
    size = math.prod(x.shape)
    positions = bk.reshape(xp.arange(size, dtype=_INT64), tuple(x.shape))
    targets = getitem(xp, positions, key, op)
    v = xp._as_operand(value, x.dtype, op)
    shape, vshape = tuple(targets.shape), tuple(v.shape)
    while len(vshape) > len(shape) and vshape[0] == 1:
        vshape = vshape[1:]
    try:
        if np.broadcast_shapes(vshape, shape) != shape:
            raise ValueError
    except ValueError:
        raise ValueError(
            f"{op}: a value of shape {tuple(v.shape)} does not broadcast to the shape {shape} "
            f"of the target (an array of shape {tuple(x.shape)} indexed with an advanced index)"
        ) from None
    count = math.prod(shape)
    if count == 0:
        return
    flat_targets = bk.reshape(targets, (count,))
    flat_values = bk.reshape(bk.broadcast_to(bk.reshape(v, vshape), shape), (count,))
    writes = bk.full((size,), 0, _INT64)
    bk.scatter_add(writes, flat_targets, bk.full((count,), 1, _INT64), 0)
    everything = (slice(None),) * len(x.shape)
    if int(bk.to_numpy(bk.reduce("max", writes, (0,), False))) > 1:
        # a repeated position: NumPy's "last write wins" on the host
        host = bk.to_numpy(x).copy()
        host.reshape(-1)[bk.to_numpy(flat_targets)] = bk.to_numpy(flat_values)
        bk.setitem(x, everything, bk.from_numpy(host))
        return
    carrier = x.dtype if x.dtype.kind != "b" else np.dtype("uint8")
    scattered = bk.full((size,), 0, carrier)
    bk.scatter_add(scattered, flat_targets, xp._cast(flat_values, carrier), 0)
    hit = bk.binary("greater", writes, bk.full((), 0, _INT64))
    old = bk.reshape(x, (size,))
    new = bk.where(hit, xp._cast(scattered, x.dtype), old)
    bk.setitem(x, everything, bk.reshape(new, tuple(x.shape)))
