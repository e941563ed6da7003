"""The same training steps in PyTorch, idiomatic: ``nn.Sequential``, ``F.cross_entropy``,
``torch.optim.SGD(momentum=...)``, gradients set to ``None`` between steps.

Imported only when torch is installed. Parameters are copied from nnlayers' initial values
(affine weights transposed to PyTorch's ``(units, inputs)``). The steps run on the CPU unless
``device="cuda"`` is given; the ``cuda_*`` helpers are called by ``bench_training.py`` only when
``ARRAYCORE_BACKEND=cuda`` and :func:`cuda_available` is true.
"""

from __future__ import annotations

from itertools import pairwise
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812


def _load(module: nn.Module, params: list[np.ndarray]) -> None:
    with torch.no_grad():
        for p, value in zip(module.parameters(), params, strict=True):
            v = value.T if p.ndim == 2 else value
            p.copy_(torch.from_numpy(np.ascontiguousarray(v)))


class TorchStep:
    """One network, its optimiser, and ``step(x, labels) -> loss`` (a 0-d tensor)."""

    def __init__(
        self,
        net: nn.Module,
        params: list[np.ndarray],
        lr: float,
        momentum: float,
        device: str = "cpu",
    ):
        _load(net, params)
        self.net = net.to(device)  # the optimiser is built on the moved parameters
        self.opt = torch.optim.SGD(net.parameters(), lr=lr, momentum=momentum)

    def step(self, x: Any, labels: Any) -> Any:
        """Forward, backward and update for one batch."""
        self.opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(self.net(x), labels)
        loss.backward()
        self.opt.step()
        return loss.detach()


def mlp(
    sizes: list[int],
    params: list[np.ndarray],
    lr: float = 0.01,
    momentum: float = 0.9,
    device: str = "cpu",
) -> TorchStep:
    """An MLP with ReLU between the affine layers."""
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(pairwise(sizes)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return TorchStep(nn.Sequential(*layers), params, lr, momentum, device)


def lenet(
    params: list[np.ndarray], lr: float = 0.01, momentum: float = 0.9, device: str = "cpu"
) -> TorchStep:
    """The LeNet-style CNN of the benchmark."""
    net = nn.Sequential(
        nn.Conv2d(1, 20, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(20, 50, 5),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Linear(800, 500),
        nn.ReLU(),
        nn.Linear(500, 10),
    )
    return TorchStep(net, params, lr, momentum, device)


def to_torch(x: np.ndarray) -> Any:
    """A tensor sharing ``x``'s memory."""
    return torch.from_numpy(x)


def set_threads(n: int) -> None:
    """Intra-op threads for torch (and one inter-op thread)."""
    torch.set_num_threads(n)


def version() -> str:
    """``torch 2.x`` with its build's BLAS."""
    return f"torch {torch.__version__}"


# -- CUDA (used only when ARRAYCORE_BACKEND=cuda and cuda_available()) -----------------------------
def cuda_available() -> bool:
    """Whether this torch build has CUDA and sees a GPU."""
    return bool(torch.cuda.is_available())


def cuda_setup() -> None:
    """Full float32 on the GPU (TF32 off for matmuls and cuDNN convolutions), cuDNN autotuning
    on (the shapes are fixed; the benchmark warms up before timing)."""
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.benchmark = True


def to_cuda(x: np.ndarray) -> Any:
    """A copy of ``x`` on the current GPU."""
    return torch.from_numpy(x).to("cuda")


def cuda_sync() -> None:
    """Wait for every kernel queued on the current GPU."""
    torch.cuda.synchronize()


def cuda_allocated() -> int:
    """Bytes held by live tensors on the current GPU."""
    return int(torch.cuda.memory_allocated())


def cuda_reset_peak() -> None:
    """Restart torch's peak-allocation counter."""
    torch.cuda.reset_peak_memory_stats()


def cuda_peak() -> int:
    """Peak bytes held by live tensors since :func:`cuda_reset_peak`."""
    return int(torch.cuda.max_memory_allocated())


def cuda_info() -> str:
    """The GPU's name and torch's CUDA and cuDNN versions."""
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return (
        f"{torch.cuda.get_device_name()} (torch CUDA {torch.version.cuda}, cuDNN {cudnn}, "
        f"TF32 off: matmul allow_tf32={torch.backends.cuda.matmul.allow_tf32}, "
        f"cudnn allow_tf32={torch.backends.cudnn.allow_tf32})"
    )
