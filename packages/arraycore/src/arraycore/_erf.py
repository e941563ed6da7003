"""The error function and its complement, from element-wise arithmetic and ``exp`` alone.

The Array API has no ``erf``; exact GELU needs ``erfc`` (``Phi(x) = 0.5 erfc(-x / sqrt 2)``,
no cancellation in the lower tail). This module evaluates both with the rational
approximations of Sun's fdlibm (``s_erf.c``, 1993, the ones glibc's, FreeBSD's, musl's and
Go's ``erf`` use; W. J. Cody's method: rational functions fitted on four intervals of ``|x|``):

- ``|x| < 0.84375``: ``erf(x) = x + x R(x**2) / S(x**2)``; ``erfc(x) = 0.5 - (x y + (x - 0.5))``
  with that ratio ``y`` (no cancellation);
- ``0.84375 <= |x| < 1.25``: ``erf(x) = c + P(s) / Q(s)``, ``s = |x| - 1``, ``c = erf(1)``
  rounded to single precision;
- ``1.25 <= |x| < 1/0.35`` and ``1/0.35 <= |x| < 28``: ``erfc(x) = exp(-x**2 - 0.5625 +
  R(1/x**2) / S(1/x**2)) / x``, two fits. ``exp(-x**2)`` is taken as ``exp(-z**2 - 0.5625)
  exp((z - x)(z + x) + R/S)`` with ``z`` the high half of ``x`` (Dekker's split), so that
  ``z**2`` is exact: the rounding of ``x**2`` would otherwise cost ``2 x**2`` ulps (1,400 at
  ``x = 26``).

Accuracy against glibc's ``erfc`` (``math.erfc``) on a grid of 3 million points from -7 to the
underflow (float64) and the same points rounded to float32: float64 within 4 ulp (mean 0.3),
float32 within 5 ulp, down to ``erfc(26.5) = 1e-307``; SciPy's (Cephes') is within 12 ulp up to
``x = 2.86`` and 511 ulp on the far tail (see ``benchmarks/bench_erf.py``). Special values:
``erfc(+inf) = 0``, ``erfc(-inf) = 2``, ``erf(+-inf) = +-1``, ``erf(-0) = -0``, NaN gives NaN.
float16 (and any other real floating dtype) is evaluated in float32 and rounded back.

Two evaluations of the same formulas: :func:`erfc` and :func:`erf` on any namespace (each
interval's formula over the whole array, one ``where`` picks: about 130 passes, the reference
for backends without a kernel of their own), and :func:`erfc_numpy` / :func:`erf_numpy` for
NumPy arrays (blocks of :data:`BLOCK` elements, each interval's formula only on its own
elements: about 35 passes, in cache, within 2x of ``scipy.special.erfc``'s time).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

Array = Any

# -- fdlibm's coefficients (s_erf.c; lowest degree first, each checked against its bit pattern
# in tests/test_erf.py) ---------------------------------------------------------------------------
#: ``erf(1)`` rounded to single precision (the constant of the second interval).
ERX = 8.45062911510467529297e-01
#: ``|x| < 0.84375``: numerator and denominator in ``x**2``.
PP = (
    1.28379167095512558561e-01,
    -3.25042107247001499370e-01,
    -2.84817495755985104766e-02,
    -5.77027029648944159157e-03,
    -2.37630166566501626084e-05,
)
QQ = (
    1.0,
    3.97917223959155352819e-01,
    6.50222499887672944485e-02,
    5.08130628187576562776e-03,
    1.32494738004321644526e-04,
    -3.96022827877536812320e-06,
)
#: ``0.84375 <= |x| < 1.25``: in ``|x| - 1``.
PA = (
    -2.36211856075265944077e-03,
    4.14856118683748331666e-01,
    -3.72207876035701323847e-01,
    3.18346619901161753674e-01,
    -1.10894694282396677476e-01,
    3.54783043256182359371e-02,
    -2.16637559486879084300e-03,
)
QA = (
    1.0,
    1.06420880400844228286e-01,
    5.40397917702171048937e-01,
    7.18286544141962662868e-02,
    1.26171219808761642112e-01,
    1.36370839120290507362e-02,
    1.19844998467991074170e-02,
)
#: ``1.25 <= |x| < 1/0.35``: in ``1/x**2``.
RA = (
    -9.86494403484714822705e-03,
    -6.93858572707181764372e-01,
    -1.05586262253232909814e01,
    -6.23753324503260060396e01,
    -1.62396669462573470355e02,
    -1.84605092906711035994e02,
    -8.12874355063065934246e01,
    -9.81432934416914548592e00,
)
SA = (
    1.0,
    1.96512716674392571292e01,
    1.37657754143519042600e02,
    4.34565877475229228821e02,
    6.45387271733267880336e02,
    4.29008140027567833386e02,
    1.08635005541779435134e02,
    6.57024977031928170135e00,
    -6.04244152148580987438e-02,
)
#: ``1/0.35 <= |x| < 28``: in ``1/x**2``.
RB = (
    -9.86494292470009928597e-03,
    -7.99283237680523006574e-01,
    -1.77579549177547519889e01,
    -1.60636384855821916062e02,
    -6.37566443368389627722e02,
    -1.02509513161107724954e03,
    -4.83519191608651397019e02,
)
SB = (
    1.0,
    3.03380607434824582924e01,
    3.25792512996573918826e02,
    1.53672958608443695994e03,
    3.19985821950859553908e03,
    2.55305040643316442583e03,
    4.74528541206955367215e02,
    -2.24409524465858183362e01,
)

#: The interval bounds in ``|x|``; past :data:`CLIP` erfc is 0 in float64 (``erfc(27.3)`` is
#: under the smallest subnormal), and ``|x|`` is clipped there so that ``inf`` gives 0, not NaN.
SMALL, NEAR_ONE, MIDDLE, CLIP = 0.84375, 1.25, 1.0 / 0.35, 30.0
#: Dekker's splitting constants ``2**k + 1``: the high part keeps 26 bits of float64 (its
#: square exact, and with 0.5625 added still within 53 bits up to ``|x| = 30``) and 11 of
#: float32 (21 bits up to float32's underflow at ``|x| = 10.1``).
_SPLIT = {np.dtype(np.float64): 134217729.0, np.dtype(np.float32): 8193.0}

#: Elements per block in :func:`erfc_numpy`: a block's temporaries stay in the CPU's caches.
BLOCK = 32768


def _poly(c: Sequence[float], t: Array) -> Array:
    """``c[0] + c[1] t + ... + c[n] t**n`` by Horner's rule."""
    acc = c[-1] * t
    for k in c[-2:0:-1]:
        acc = (acc + k) * t
    return acc + c[0]


def _small_ratio(a: Array) -> Array:
    """``y`` with ``erf(a) = a + a y`` for ``|a| < 0.84375``."""
    z = a * a
    return _poly(PP, z) / _poly(QQ, z)


def _near_one(a: Array) -> Array:
    """``P/Q`` with ``erf(a) = ERX + P/Q`` for ``0.84375 <= a < 1.25``."""
    s = a - 1.0
    return _poly(PA, s) / _poly(QA, s)


def _tail(xp: Any, a: Array, split: float, r: Sequence[float], s: Sequence[float]) -> Array:
    """``erfc(a)`` for ``1.25 <= a <= CLIP`` with the fit ``(r, s)``."""
    w = 1.0 / (a * a)
    c = a * split
    z = c - (c - a)  # the high half of a: z * z is exact
    return xp.exp(-z * z - 0.5625) * xp.exp((z - a) * (z + a) + _poly(r, w) / _poly(s, w)) / a


def _erfc_small(a: Array) -> Array:
    return 0.5 - (a * _small_ratio(a) + (a - 0.5))


def _erfc_near_one(a: Array) -> Array:
    return (1.0 - ERX) - _near_one(a)


def _compute_dtype(xp: Any, dtype: Any) -> Any:
    """float32 and float64 are evaluated in themselves, every other floating dtype in float32."""
    return dtype if dtype in (xp.float32, xp.float64) else xp.float32


def _split(dtype: Any) -> float:
    """Dekker's constant for a namespace's float32 or float64 dtype."""
    return _SPLIT[np.dtype(np.float64 if str(dtype) == "float64" else np.float32)]


def _clip(xp: Any, a: Array, lo: float, hi: float) -> Array:
    """``a`` clipped to ``[lo, hi]``, NaN kept."""
    return xp.minimum(xp.maximum(a, lo), hi)


def _upper(xp: Any, a: Array) -> Array:
    """``erfc(a)`` for ``a = |x| >= 0`` (or NaN), every interval over the whole array."""
    split = _split(a.dtype)
    tail = xp.where(
        a < MIDDLE,
        _tail(xp, _clip(xp, a, NEAR_ONE, MIDDLE), split, RA, SA),
        _tail(xp, _clip(xp, a, MIDDLE, CLIP), split, RB, SB),
    )
    near = _erfc_near_one(_clip(xp, a, SMALL, NEAR_ONE))
    return xp.where(
        a < SMALL, _erfc_small(xp.minimum(a, SMALL)), xp.where(a < NEAR_ONE, near, tail)
    )


def erfc(xp: Any, x: Array) -> Array:
    """The complementary error function of a real floating array of the namespace ``xp``
    (element-wise functions and ``where`` only)."""
    work = _compute_dtype(xp, x.dtype)
    xw = x if work == x.dtype else xp.astype(x, work)
    upper = _upper(xp, xp.abs(xw))
    # 2 - erfc(|x|) below 0, written as erfc_numpy's branch-free form computes it (same bits)
    out = xp.where(xw < 0.0, upper + 2.0 * (1.0 - upper), upper)
    return out if work == x.dtype else xp.astype(out, x.dtype)


def erf(xp: Any, x: Array) -> Array:
    """The error function of a real floating array of the namespace ``xp`` (``x + x y`` near 0,
    so small arguments keep their relative accuracy)."""
    work = _compute_dtype(xp, x.dtype)
    xw = x if work == x.dtype else xp.astype(x, work)
    a = xp.abs(xw)
    small = xp.minimum(a, SMALL)
    magnitude = xp.where(a < SMALL, small + small * _small_ratio(small), 1.0 - _upper(xp, a))
    out = xp.copysign(magnitude, xw)  # -0 kept
    return out if work == x.dtype else xp.astype(out, x.dtype)


# -- NumPy: blocks, each interval on its own elements, no temporaries ---------------------------
def _poly_into(c: Sequence[float], t: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """:func:`_poly` into ``acc`` (in place: no array allocated)."""
    np.multiply(t, c[-1], out=acc)
    for k in c[-2:0:-1]:
        acc += k
        acc *= t
    acc += c[0]
    return acc


class _Scratch:
    """The buffers one block's evaluation works in (allocated once per call)."""

    def __init__(self, size: int, dtype: np.dtype) -> None:
        self.a, self.sub, self.w, self.p, self.q, self.e = (np.empty(size, dtype) for _ in range(6))
        self.lo, self.hi = np.empty(size, bool), np.empty(size, bool)
        self.split = _SPLIT[dtype]

    def gather(self, a: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """``(index, a[index])`` of the elements where ``mask`` holds, or None if none."""
        index = np.flatnonzero(mask)
        if not index.size:
            return None
        sub = self.sub[: index.size]
        np.take(a, index, out=sub)
        return index, sub

    def small_ratio(self, a: np.ndarray) -> np.ndarray:
        """:func:`_small_ratio` (in ``p``)."""
        n = a.size
        z, p, q = self.w[:n], self.p[:n], self.q[:n]
        np.multiply(a, a, out=z)
        _poly_into(PP, z, p)
        p /= _poly_into(QQ, z, q)
        return p

    def erfc_small(self, a: np.ndarray) -> np.ndarray:
        """:func:`_erfc_small`."""
        p = self.small_ratio(a)
        p *= a
        q = np.subtract(a, 0.5, out=self.q[: a.size])
        p += q
        np.subtract(0.5, p, out=p)
        return p

    def erfc_near_one(self, a: np.ndarray) -> np.ndarray:
        """:func:`_erfc_near_one`."""
        n = a.size
        s, p, q = self.w[:n], self.p[:n], self.q[:n]
        np.subtract(a, 1.0, out=s)
        _poly_into(PA, s, p)
        p /= _poly_into(QA, s, q)
        return np.subtract(1.0 - ERX, p, out=p)

    def tail(self, a: np.ndarray, r: Sequence[float], s: Sequence[float]) -> np.ndarray:
        """:func:`_tail`."""
        n = a.size
        w, p, q, z = self.w[:n], self.p[:n], self.q[:n], self.e[:n]
        np.multiply(a, a, out=w)
        np.divide(1.0, w, out=w)
        np.multiply(a, self.split, out=z)
        np.subtract(z, a, out=q)
        z -= q  # the high half of a
        _poly_into(r, w, p)
        p /= _poly_into(s, w, q)
        np.subtract(z, a, out=q)
        np.add(z, a, out=w)
        q *= w
        p += q
        np.exp(p, out=p)
        z *= z
        z += 0.5625
        np.negative(z, out=z)
        np.exp(z, out=z)
        p *= z
        p /= a
        return p

    def upper(self, a: np.ndarray, out: np.ndarray) -> None:
        """``out = erfc(a)`` for ``a = |x|`` (NaN kept) past :data:`SMALL`; the elements below
        it are the caller's (their mask is left in ``lo``)."""
        n = a.size
        lo, hi = self.lo[:n], self.hi[:n]
        np.less(a, NEAR_ONE, out=hi)
        np.greater_equal(a, SMALL, out=lo)
        hi &= lo  # [SMALL, NEAR_ONE)
        found = self.gather(a, hi)
        if found is not None:
            out[found[0]] = self.erfc_near_one(found[1])
        np.greater_equal(a, NEAR_ONE, out=lo)
        np.less(a, MIDDLE, out=hi)
        hi &= lo  # [NEAR_ONE, MIDDLE)
        found = self.gather(a, hi)
        if found is not None:
            out[found[0]] = self.tail(found[1], RA, SA)
        np.less(a, MIDDLE, out=hi)
        np.logical_not(hi, out=hi)  # [MIDDLE, inf] and NaN
        found = self.gather(a, hi)
        if found is not None:
            index, sub = found
            np.minimum(sub, CLIP, out=sub)
            out[index] = self.tail(sub, RB, SB)
        np.less(a, SMALL, out=lo)


def _blocks_numpy(x: np.ndarray, erf_form: bool) -> Any:
    """:func:`erfc_numpy` (``erf_form`` False) or :func:`erf_numpy`, block by block."""
    dtype = x.dtype
    work = dtype if dtype in (np.float32, np.float64) else np.dtype(np.float32)
    flat = np.ascontiguousarray(x, dtype=work).reshape(-1)
    out = np.empty_like(flat)
    scratch = _Scratch(min(BLOCK, flat.size), work)
    with np.errstate(all="ignore"):
        for start in range(0, flat.size, BLOCK):
            xb, ob = flat[start : start + BLOCK], out[start : start + BLOCK]
            a = np.abs(xb, out=scratch.a[: xb.size])
            scratch.upper(a, ob)
            if erf_form:
                np.subtract(1.0, ob, out=ob)  # erf(|x|) = 1 - erfc(|x|) from SMALL on
            found = scratch.gather(a, scratch.lo[: xb.size])
            if found is not None:
                index, sub = found
                if erf_form:
                    ratio = scratch.small_ratio(sub)
                    ratio *= sub
                    ratio += sub
                    ob[index] = ratio
                else:
                    ob[index] = scratch.erfc_small(sub)
            if erf_form:
                np.copysign(ob, xb, out=ob)
            else:  # erfc(x) = 2 - erfc(|x|) below 0, without a masked (branching) pass:
                # ob + 2 (1 - ob) [x < 0] is ob exactly at x >= 0, and 2 - ob within an ulp
                neg = np.less(xb, 0.0, out=scratch.hi[: xb.size])
                flip = np.subtract(1.0, ob, out=scratch.w[: xb.size])
                flip *= 2.0
                flip *= neg
                ob += flip
    result = out.reshape(x.shape)
    return result if work == dtype else result.astype(dtype)


def erfc_numpy(x: np.ndarray) -> Any:
    """:func:`erfc` on a NumPy array: blocks of :data:`BLOCK` elements, each interval's formula
    only on its own elements, in place in a few block-sized buffers."""
    return _blocks_numpy(np.asarray(x), erf_form=False)


def erf_numpy(x: np.ndarray) -> Any:
    """:func:`erf` on a NumPy array (as :func:`erfc_numpy`)."""
    return _blocks_numpy(np.asarray(x), erf_form=True)


__all__ = ["erf", "erf_numpy", "erfc", "erfc_numpy"]
