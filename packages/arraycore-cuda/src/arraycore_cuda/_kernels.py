"""Launching the ``nn`` kernels of :mod:`arraycore.device_kernels` with CuPy.

The kernel source is arraycore's (written once for CUDA and OpenCL; the OpenCL backend runs the
same bodies, so the conformance kit exercises them on PoCL in CI, and ``tests/test_kernels.py``
compiles the CUDA build with NVRTC). This module compiles the CUDA build per dtype through
``cupy.RawModule`` and launches kernels on CuPy's current stream.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from arraycore.device_kernels import DTYPES, KERNELS, geometry, source

__all__ = ["BLOCK", "DTYPES", "KERNELS", "NVRTC_OPTIONS", "CudaKernels", "geometry", "source"]

#: Threads per block of every launch.
BLOCK = 256

#: Options for NVRTC (CuPy adds ``-ftz=true`` and the architecture of the device itself). The
#: source is plain C in C++ clothing, so no language standard is asked for. ``--fmad=false``:
#: no multiply-add contraction, as in arraycore's reference (and the OpenCL build's
#: ``FP_CONTRACT OFF``): ``fma(a, b, -round(a * b))`` is a product's rounding error, not 0, and
#: layer norm's gradient over one element would be that times ``1 / sqrt(eps)``.
NVRTC_OPTIONS: tuple[str, ...] = ("--fmad=false",)


class CudaKernels:
    """The kernels of :func:`source` on one device, compiled by NVRTC on first use per dtype.

    ``cupy.RawModule`` caches the compiled binary on disk (``~/.cupy/kernel_cache``), so only the
    first run on a machine pays for NVRTC.
    """

    def __init__(self, cupy: Any) -> None:
        self._cp = cupy
        self._functions: dict[tuple[str, str], Any] = {}

    def function(self, dtype: np.dtype, name: str) -> Any:
        key = (np.dtype(dtype).name, name)
        fn = self._functions.get(key)
        if fn is None:
            module = self._cp.RawModule(code=source(key[0], "cuda"), options=NVRTC_OPTIONS)
            for kernel in KERNELS:
                self._functions[(key[0], kernel)] = module.get_function(kernel)
            fn = self._functions[key]
        return fn

    def launch(self, dtype: np.dtype, name: str, n: int, *args: Any) -> None:
        """Run kernel ``name`` over ``n`` threads on CuPy's current stream (no sync)."""
        if n <= 0:
            return
        grid = (n + BLOCK - 1) // BLOCK
        self.function(dtype, name)((grid,), (BLOCK,), args)
