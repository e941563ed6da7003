"""arraycore's NVIDIA GPU backend: ``cupy.ndarray`` arrays, CuPy kernels and cuBLAS matmul.

Selected with ``ARRAYCORE_BACKEND=cuda`` (``ARRAYCORE_DEVICE`` picks the GPU) once installed with
``pip install "arraycore[cuda12]"`` or ``"arraycore[cuda13]"``. Importing this package never
imports CuPy: on a machine without CuPy, without an NVIDIA driver or without a GPU it still
imports, and ``arraycore info`` says why the backend cannot run there.

Convolutions and batch-norm run on cuDNN graphs (nvidia-cudnn-frontend) where installed, else
im2col + cuBLAS; pooling and the softmax family are arraycore's shared kernels compiled by NVRTC.
This backend has not yet run on a GPU: ``arraycore_cuda.verify`` is the one command that checks
it on a GPU node without network (see the README).
"""

from .backend import INSTALL_HINT, CudaBackend

__version__ = "0.1.0"

__all__ = ["INSTALL_HINT", "CudaBackend", "__version__"]
