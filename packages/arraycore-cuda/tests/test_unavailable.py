"""What this machine really says about the cuda backend: probe, ``arraycore info``, errors.

No device is mocked: each test asks the real CuPy, driver and GPU of the machine it runs on and
checks that the answer is the right one for that machine (CuPy missing; CuPy present but no
driver or GPU; or a usable GPU).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import arraycore
from arraycore.backend import BackendUnavailable
from arraycore_cuda import CudaBackend

HAS_CUPY = importlib.util.find_spec("cupy") is not None
INSTALL = 'pip install "arraycore[cuda12]"'


def probe_error() -> BackendUnavailable | None:
    try:
        CudaBackend.probe()
    except BackendUnavailable as exc:
        return exc
    return None


def test_probe_names_what_is_missing() -> None:
    exc = probe_error()
    if exc is None:  # a usable GPU: probe passes and lists it
        assert HAS_CUPY
        assert CudaBackend.devices()
        return
    message = str(exc)
    assert exc.__cause__ is not None, "probe() must chain the original error"
    if not HAS_CUPY:
        assert "CuPy is not installed" in message
        assert INSTALL in message and '"arraycore[cuda13]"' in message
        assert isinstance(exc.__cause__, ImportError)
    else:
        # CuPy imports but CUDA cannot list a device: the sentence names the CUDA error code.
        assert re.search(r"\bcudaError\w+", message) or "CuPy is installed but" in message, message
        assert "NVIDIA" in message or "CUDA" in message


def test_version_never_raises() -> None:
    text = CudaBackend.version()
    if HAS_CUPY:
        assert text.startswith("cupy ") and "CUDA runtime" in text, text
        assert "nn kernels: " in text and "cuDNN" in text, text  # the nn kernel path is stated
    else:
        assert text == "cupy not installed"


def test_namespace_raises_one_clear_error() -> None:
    exc = probe_error()
    if exc is None:
        assert arraycore.namespace("cuda").name == "cuda"
        return
    with pytest.raises(arraycore.BackendUnavailableError) as info:
        arraycore.namespace("cuda")
    message = str(info.value)
    assert "backend 'cuda' is installed but cannot run here" in message
    assert str(exc) in message
    assert INSTALL in message
    assert isinstance(info.value.__cause__, BackendUnavailable)


def test_arraycore_info_explains_the_cuda_backend() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "arraycore", "info"], capture_output=True, text=True, check=True
    )
    lines = result.stdout.splitlines()
    (start,) = [i for i, line in enumerate(lines) if line.startswith("  cuda: ")]
    section = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("    "):
            break
        section.append(line)
    text = "\n".join(section)
    exc = probe_error()
    if exc is None:
        assert section[0].startswith("  cuda: usable [arraycore-cuda ")
        assert "    device cuda:0 (" in text
        return
    assert section[0].startswith("  cuda: NOT USABLE [arraycore-cuda "), text
    (why,) = [line for line in section if line.startswith("    why: ")]
    assert str(exc) in why, text
    print(text)  # shown with -s: what a user sees on this machine


def test_a_broken_cupy_is_not_reported_as_missing(tmp_path: Path) -> None:
    """A CuPy whose import fails (here: a stand-in package that raises as a wheel with missing
    CUDA libraries does) is named as broken, with its error, not as "not installed"."""
    fake = tmp_path / "cupy"
    fake.mkdir()
    (fake / "__init__.py").write_text(
        'raise ImportError("libcudart.so.12: cannot open shared object file")\n'
    )
    code = (
        "from arraycore.backend import BackendUnavailable\n"
        "from arraycore_cuda import CudaBackend\n"
        "print(CudaBackend.version())\n"
        "try:\n"
        "    CudaBackend.probe()\n"
        "except BackendUnavailable as exc:\n"
        "    print(exc)\n"
    )
    # the stand-in goes first; what the node already had on its path (the verify script's
    # offline site-packages, say) stays reachable behind it
    path = os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    env = {**os.environ, "PYTHONPATH": path}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    version, reason = result.stdout.splitlines()
    assert version == "cupy failed to import"
    assert reason.startswith("CuPy is installed but failed to import (ImportError: libcudart")
    assert INSTALL in reason


def test_nn_path_says_which_kernels_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """``arraycore info`` names the convolution path: cuDNN (with its version) or im2col +
    cuBLAS and why, and the switches that change it."""
    from arraycore_cuda import backend

    monkeypatch.delenv(backend.ENV_CUDNN, raising=False)
    monkeypatch.delenv(backend.ENV_OVERRIDES, raising=False)
    module, description = backend.cudnn_probe()
    text = backend.nn_path()
    assert description in text, text
    if module is None:
        assert text.startswith("nn kernels: convolutions im2col + cuBLAS (cuDNN not available")
    else:
        assert text.startswith("nn kernels: convolutions and batch-norm through cuDNN ")
    assert "pooling, softmax, cross-entropy" in text
    monkeypatch.setenv(backend.ENV_CUDNN, "0")
    assert "cuDNN off: $ARRAYCORE_CUDNN=0" in backend.nn_path()
    monkeypatch.setenv(backend.ENV_CUDNN, "sometimes")
    with pytest.raises(ValueError, match=r"\$ARRAYCORE_CUDNN must be 1 or 0, got 'sometimes'"):
        backend.nn_path()
    monkeypatch.delenv(backend.ENV_CUDNN)
    monkeypatch.setenv(backend.ENV_OVERRIDES, "none")
    assert (
        backend.nn_path() == "nn kernels: arraycore's derived ones ($ARRAYCORE_CUDA_OVERRIDES=none)"
    )
