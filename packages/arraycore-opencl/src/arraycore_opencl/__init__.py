"""arraycore's OpenCL backend: pyopencl kernels and CLBlast, on any OpenCL device.

Selected with ``ARRAYCORE_BACKEND=opencl`` once installed (``pip install "arraycore[opencl]"``,
with CLBlast and an OpenCL driver from the system: ``apt-get install pocl-opencl-icd
ocl-icd-opencl-dev libclblast-dev`` on Debian/Ubuntu). ``ARRAYCORE_DEVICE`` picks the device by
flat index, ``"platform:device"`` pair or name substring.

>>> import arraycore
>>> xp = arraycore.namespace("opencl")  # doctest: +SKIP
>>> xp.sum(xp.ones((2, 3)), axis=1)  # doctest: +SKIP
array([3., 3.], dtype=float64, backend='opencl', device='0:0')
"""

from ._array import OpenCLArray
from ._backend import OpenCLBackend

__version__ = "0.1.0"

__all__ = ["OpenCLArray", "OpenCLBackend", "__version__"]
