"""The cudnn-frontend API that ``arraycore_cuda._cudnn`` relies on, checked without a GPU.

``import cudnn`` (nvidia-cudnn-frontend) works on a machine with neither libcudnn nor an NVIDIA
driver, so these tests guard against API drift (renamed functions, enums, keyword arguments) on
any CI runner that has the frontend installed. Nothing here stands in for a device: graphs are
only described (the frontend's Python IR), never validated, built or run.
"""

from __future__ import annotations

import inspect
import subprocess
import sys
from typing import Any

import pytest

from arraycore.nn_shapes import conv_window
from arraycore_cuda import _cudnn
from arraycore_cuda._cudnn import USED_API, USED_KWARGS, Cudnn, probe


def _resolve(root: Any, dotted: str) -> Any:
    obj = root
    for part in dotted.split(".")[1:]:
        obj = getattr(obj, part)
    return obj


def test_probe_never_raises() -> None:
    module, text = probe()
    assert isinstance(text, str) and text and "\n" not in text
    if module is None:
        assert text.startswith("cuDNN not available: "), text
    else:
        assert text.startswith("cuDNN ") and "nvidia-cudnn-frontend" in text, text


def test_probe_without_frontend() -> None:
    """With ``cudnn`` unimportable, probe() names the package and the install command."""
    code = (
        "import sys; sys.modules['cudnn'] = None\n"
        "from arraycore_cuda._cudnn import probe\n"
        "module, text = probe()\n"
        "assert module is None, module\n"
        "print(text)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    text = done.stdout.strip()
    assert text.startswith("cuDNN not available: nvidia-cudnn-frontend is not installed"), text
    assert _cudnn.INSTALL_HINT in text


def test_module_imports_without_cupy_or_cudnn() -> None:
    code = (
        "import sys; sys.modules['cudnn'] = None; sys.modules['cupy'] = None\n"
        "import arraycore_cuda._cudnn as m\n"
        "assert m.USED_API\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


# -- the real frontend ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cudnn() -> Any:
    return pytest.importorskip(
        "cudnn",
        reason="nvidia-cudnn-frontend is not installed (pip install nvidia-cudnn-frontend); "
        "the cuDNN API drift checks need it, but no GPU",
    )


@pytest.mark.parametrize(
    ("owner", "name"), [(owner, name) for owner, names in USED_API.items() for name in names]
)
def test_used_api_exists(cudnn: Any, owner: str, name: str) -> None:
    target = _resolve(cudnn, owner)
    assert hasattr(target, name), f"{owner}.{name} is missing from nvidia-cudnn-frontend"


# conv_* and batchnorm* are generated builders taking **kwargs; they reject unknown keywords,
# which test_graphs_describe_with_real_builders exercises.
_GENERATED = (
    "conv_fprop", "conv_dgrad", "conv_wgrad", "batchnorm", "batchnorm_backward", "sdpa",
    "sdpa_backward",
)  # fmt: skip


@pytest.mark.parametrize(
    "owner", [owner for owner in USED_KWARGS if owner.rsplit(".", 1)[-1] not in _GENERATED]
)
def test_used_kwargs_in_signatures(cudnn: Any, owner: str) -> None:
    """Keyword arguments of the frontend's plain Python functions."""
    target = _resolve(cudnn, owner)
    params = inspect.signature(target.__init__ if inspect.isclass(target) else target).parameters
    for kw in USED_KWARGS[owner]:
        assert kw in params, f"{owner}() has no keyword {kw!r}: {list(params)}"


@pytest.mark.parametrize(
    "owner",
    [
        "cudnn.pygraph.execute_plan_at_index",
        "cudnn.pygraph.tensor_scalar",
        "cudnn.set_stream",
    ],
)
def test_signature_shapes(cudnn: Any, owner: str) -> None:
    params = inspect.signature(_resolve(cudnn, owner)).parameters
    expected = {
        "cudnn.pygraph.execute_plan_at_index": ("tensor_dict", "workspace", "index", "handle"),
        "cudnn.pygraph.tensor_scalar": ("value", "scalar_type", "name"),
        "cudnn.set_stream": ("handle", "stream"),
    }[owner]
    for kw in expected:
        assert kw in params, f"{owner}() has no parameter {kw!r}: {list(params)}"


def test_graphs_describe_with_real_builders(cudnn: Any) -> None:
    """Every op builder takes the keywords the module passes, and outputs get the shapes and
    dtypes it declares. Only the frontend's Python IR is touched: no validate, no device."""
    cd = Cudnn(cudnn, None, 0)
    win = conv_window("conv2d", (2, 3, 8, 8), (4, 3, 3, 3), (2, 1), ((1, 0), (1, 2)), (1, 2))
    x_shape, w_shape = (2, 3, 8, 8), (4, 3, 3, 3)
    y_shape = (2, 4, win.out_h, win.out_w)
    half = cudnn.data_type.HALF
    for kind, out, shape in (
        ("fprop", "y", y_shape),
        ("dgrad", "x", x_shape),
        ("wgrad", "w", w_shape),
    ):
        graph = cd._new_graph(half)
        tensors = cd._conv_graph(graph, kind, win, x_shape, w_shape, y_shape, "float16")
        assert set(tensors) == {"x", "w", "y"}
        assert list(tensors[out].dim) == list(shape), kind
        assert list(tensors[out].stride) == list(_cudnn._packed_strides(shape)), kind
        assert tensors[out].data_type == half
        node = graph.nodes[0]
        assert list(node.params["pre_padding"]) == [1, 1]
        assert list(node.params["post_padding"]) == [0, 2]
        assert list(node.params["stride"]) == [2, 1]
        assert list(node.params["dilation"]) == [1, 2]
        assert "convolution_mode" not in node.params  # the default: CROSS_CORRELATION
    f32 = cudnn.data_type.FLOAT
    graph = cd._new_graph(half)
    fwd = cd._bn_graph(graph, (4, 3, 5, 5), half, eps=1e-5)
    assert list(fwd["y"].dim) == [4, 3, 5, 5] and fwd["y"].data_type == half
    assert list(fwd["mean"].dim) == [1, 3, 1, 1] and fwd["inv_var"].data_type == f32
    assert list(fwd["x"].stride) == [75, 25, 5, 1]
    graph = cd._new_graph(half)
    cl = cd._bn_graph(graph, (4, 3, 5, 5), half, eps=1e-5, nhwc=True)
    assert list(cl["x"].stride) == [75, 1, 15, 3] and list(cl["y"].stride) == [75, 1, 15, 3]
    graph = cd._new_graph(half)
    bwd = cd._bn_graph(graph, (4, 3, 1, 1), half, eps=None, nhwc=True)
    assert set(bwd) == {"dy", "x", "scale", "mean", "inv_var", "dx", "dscale", "dbias"}
    assert list(bwd["dscale"].dim) == [1, 3, 1, 1] and bwd["dbias"].data_type == f32
    assert list(bwd["dx"].stride) == [3, 1, 3, 3]


def test_attention_graphs_describe_with_real_builders(cudnn: Any) -> None:
    """The SDPA forward and backward graphs: the keywords the module passes are taken, O and
    the float32 stats (b, h, sq, 1) come out with the declared shapes, the backward's gradients
    have their inputs' shapes; an additive bias and the causal flag reach the node."""
    cd = Cudnn(cudnn, None, 0)
    half, f32 = cudnn.data_type.HALF, cudnn.data_type.FLOAT
    shapes = ((2, 4, 16, 64), (2, 4, 24, 64), (2, 4, 24, 32))
    graph = cd._new_graph(half)
    fwd = cd._sdpa_graph(graph, "forward", shapes, (2, 1, 16, 24), True, 0.125, "float16")
    assert set(fwd) == {"q", "k", "v", "bias", "o", "stats"}
    assert list(fwd["o"].dim) == [2, 4, 16, 32] and fwd["o"].data_type == half
    assert list(fwd["stats"].dim) == [2, 4, 16, 1] and fwd["stats"].data_type == f32
    node = graph.nodes[0]
    assert node.params["use_causal_mask"] is True
    assert node.params["attn_scale"] == 0.125
    graph = cd._new_graph(half)
    bwd = cd._sdpa_graph(graph, "backward", shapes, None, False, 0.125, "float16")
    assert set(bwd) == {"q", "k", "v", "o", "dO", "stats", "dq", "dk", "dv"}
    for grad, shape in zip(("dq", "dk", "dv"), shapes, strict=True):
        assert list(bwd[grad].dim) == list(shape) and bwd[grad].data_type == half


def test_exception_classes(cudnn: Any) -> None:
    assert issubclass(cudnn.cudnnGraphNotSupportedError, Exception)


def test_disabled_reason_without_a_usable_gpu(cudnn: Any) -> None:
    """On a machine where CuPy is installed but CUDA cannot run (no driver or no device), the
    first handle creation fails for real: the reason is kept and cuDNN is off from then on.
    Machines with a usable GPU skip this (the GPU tests cover them); nothing is faked."""
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed")
    try:
        usable = cupy.cuda.runtime.getDeviceCount() > 0
    except Exception:  # no driver, or a driver too old for this CuPy
        usable = False
    if usable:
        pytest.skip("a CUDA device is usable here; handle creation would succeed")
    cd = Cudnn(cudnn, cupy, 0)
    assert cd.disabled_reason is None  # lazy: nothing is created at construction
    assert cd._ensure_handle() is False
    assert cd.disabled_reason and "cuDNN handle" in cd.disabled_reason
    assert cd._ensure_handle() is False  # remembered, not retried
    assert cd.describe().startswith("cuDNN disabled on device 0: ")
