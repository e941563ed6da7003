"""arraycore's OpenCL backend: pyopencl kernels and CLBlast, on any OpenCL device.

Selected with ``ARRAYCORE_BACKEND=opencl`` once installed (``pip install "arraycore[opencl]"``).
This is a placeholder: the OpenCL backend issue fills it in.
"""

__version__ = "0.1.0"


class OpenCLBackend:
    """Placeholder for the OpenCL backend (the ``opencl`` entry point); not implemented yet."""
