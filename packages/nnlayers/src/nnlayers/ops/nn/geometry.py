"""Window geometry shared by convolution and pooling: pairs, padding forms, output sizes."""

from __future__ import annotations

from typing import Any

Pair = tuple[int, int]
Padding = tuple[Pair, Pair]


def pair(value: Any, what: str) -> Pair:
    """``3`` or ``(3, 3)`` as ``(3, 3)``; positive ints only."""
    a, b = (value, value) if isinstance(value, int) else tuple(value)
    if not (isinstance(a, int) and isinstance(b, int)) or a < 1 or b < 1:
        raise ValueError(f"{what} must be a positive int or a pair of them, got {value!r}")
    return a, b


def explicit_padding(padding: Any) -> Padding:
    """``1``, ``(ph, pw)`` or ``((top, bottom), (left, right))`` as the last form."""
    if isinstance(padding, int):
        return (padding, padding), (padding, padding)
    first, second = padding
    if isinstance(first, int) and isinstance(second, int):
        return (first, first), (second, second)
    return (int(first[0]), int(first[1])), (int(second[0]), int(second[1]))


def conv_padding(
    padding: Any, size: tuple[Any, Any], kernel: Pair, stride: Pair, dilation: Pair
) -> Padding:
    """``valid``, ``same`` (TensorFlow's rule: output ``ceil(size / stride)``) or explicit."""
    if padding == "valid":
        return (0, 0), (0, 0)
    if padding == "same":
        pads = []
        for n, k, s, d in zip(size, kernel, stride, dilation, strict=True):
            if n is None:
                raise ValueError("padding='same' needs known spatial sizes")
            out = -(-n // s)
            total = max((out - 1) * s + d * (k - 1) + 1 - n, 0)
            pads.append((total // 2, total - total // 2))
        return pads[0], pads[1]
    if isinstance(padding, str):
        raise ValueError(f"padding must be 'valid', 'same', an int or pairs, got {padding!r}")
    result = explicit_padding(padding)
    if min(result[0] + result[1]) < 0:
        raise ValueError(f"padding must not be negative, got {padding!r}")
    return result


def window_output(
    size: int | None, pad: Pair, kernel: int, stride: int, dilation: int = 1
) -> int | None:
    """Number of window positions along one axis (``None`` while the size is unknown)."""
    if size is None:
        return None
    return (size + pad[0] + pad[1] - dilation * (kernel - 1) - 1) // stride + 1
