"""arraycore's NVIDIA GPU backend: ``cupy.ndarray`` arrays, CuPy kernels and cuBLAS matmul.

Selected with ``ARRAYCORE_BACKEND=cuda`` (``ARRAYCORE_DEVICE`` picks the GPU) once installed with
``pip install "arraycore[cuda12]"`` or ``"arraycore[cuda13]"``. Importing this package never
imports CuPy: on a machine without CuPy, without an NVIDIA driver or without a GPU it still
imports, and ``arraycore info`` says why the backend cannot run there.

The ``nn`` kernels are arraycore's derived im2col + matmul versions (matmul runs on cuBLAS);
cuDNN is not used yet. This backend has not yet run on a GPU: see the README for the commands
that verify it.
"""

from .backend import INSTALL_HINT, CudaBackend

__version__ = "0.1.0"

__all__ = ["INSTALL_HINT", "CudaBackend", "__version__"]
