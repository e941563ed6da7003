"""arraycore's NVIDIA GPU backend: CuPy arrays, cuBLAS matmul and cuDNN ``nn`` kernels.

Selected with ``ARRAYCORE_BACKEND=cuda`` once installed (``pip install "arraycore[cuda12]"`` or
``"arraycore[cuda13]"``). This is a placeholder: the CUDA backend issue fills it in.
"""

__version__ = "0.1.0"


class CudaBackend:
    """Placeholder for the CUDA backend (the ``cuda`` entry point); not implemented yet."""
