"""Discovery, selection precedence and the errors of arraycore's backend registry."""

from __future__ import annotations

import threading
from importlib import metadata

import numpy as np
import pytest

import arraycore
from arraycore import _registry
from arraycore.errors import (
    BackendMismatchError,
    BackendNotFoundError,
    BackendNotInstalledError,
    BackendUnavailableError,
)

pytestmark = pytest.mark.usefixtures("clean_env")


def test_default_backend_is_numpy() -> None:
    xp = arraycore.namespace()
    assert xp.name == "numpy"
    assert isinstance(arraycore.zeros(3), np.ndarray)


def test_environment_selects_backend_and_device(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ARRAYCORE_BACKEND", "tiny")
    clean_env.setenv("ARRAYCORE_DEVICE", "0")
    xp = arraycore.namespace()
    assert xp.name == "tiny"
    assert xp.device.id == "tiny0"
    assert type(arraycore.ones(2)).__name__ == "TinyArray"


def test_resolution_happens_at_first_use_not_import(clean_env: pytest.MonkeyPatch) -> None:
    # The variable is read when a call needs a backend, so setting it after import works.
    clean_env.setenv("ARRAYCORE_BACKEND", "tiny")
    assert arraycore.namespace().name == "tiny"
    clean_env.setenv("ARRAYCORE_BACKEND", "numpy")
    assert arraycore.namespace().name == "numpy"


def test_use_overrides_environment_and_nests(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ARRAYCORE_BACKEND", "numpy")
    with arraycore.use("tiny") as xp:
        assert xp.name == "tiny"
        assert arraycore.namespace() is xp
        with arraycore.use("numpy"):
            assert arraycore.namespace().name == "numpy"
        assert arraycore.namespace() is xp
    assert arraycore.namespace().name == "numpy"


def test_use_is_per_thread() -> None:
    seen: dict[str, str] = {}
    ready = threading.Event()
    done = threading.Event()

    def other_thread() -> None:
        ready.wait()
        seen["other"] = arraycore.namespace().name
        done.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    with arraycore.use("tiny"):
        ready.set()
        done.wait(10)
        seen["main"] = arraycore.namespace().name
    thread.join()
    assert seen == {"main": "tiny", "other": "numpy"}


def test_arrays_take_precedence_over_context() -> None:
    a = np.ones(3)
    with arraycore.use("tiny"):
        result = arraycore.add(a, 1.0)
    assert isinstance(result, np.ndarray)
    np.testing.assert_array_equal(result, [2.0, 2.0, 2.0])


def test_mixing_backends_is_an_error() -> None:
    tiny = arraycore.namespace("tiny").ones(3)
    with pytest.raises(BackendMismatchError, match=r"two backends.*TinyArray.*ndarray"):
        arraycore.add(tiny, np.ones(3))
    with pytest.raises(BackendMismatchError, match="backend 'tiny'"):
        arraycore.namespace("tiny").add(tiny, np.ones(3))
    with pytest.raises(BackendMismatchError):
        arraycore.concat([np.ones(2), tiny])


def test_asarray_refuses_another_backends_array() -> None:
    tiny = arraycore.namespace("tiny").ones(3)
    with pytest.raises(BackendMismatchError, match="from_dlpack"):
        arraycore.namespace("numpy").asarray(tiny)


def test_unknown_backend_names_installed_ones() -> None:
    with pytest.raises(BackendNotFoundError) as info:
        arraycore.namespace("nosuchbackend")
    message = str(info.value)
    assert "'nosuchbackend'" in message
    assert "numpy" in message and "tiny" in message
    assert isinstance(info.value.__cause__, KeyError)


def test_unknown_backend_suggests_a_close_name_and_install_commands() -> None:
    with pytest.raises(BackendNotFoundError) as info:
        arraycore.namespace("opencll")
    message = str(info.value)
    assert "Did you mean 'opencl'?" in message
    assert 'pip install "arraycore[opencl]"' in message and "arraycore[cuda12]" in message
    assert "arraycore.backends" in message


@pytest.mark.parametrize(
    ("typed", "meant"),
    [("OpenCL", "opencl"), ("NUMPY", "numpy"), ("Tiny", "tiny"), ("numpi", "numpy")],
)
def test_unknown_backend_suggests_the_name_in_another_case(typed: str, meant: str) -> None:
    with pytest.raises(BackendNotFoundError, match=f"Did you mean '{meant}'\\?"):
        arraycore.namespace(typed)


def test_namespace_of_refuses_arrays_of_other_libraries() -> None:
    torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install torch)")
    tensor = torch.ones(3)
    with pytest.raises(BackendMismatchError, match=r"^namespace_of: got a torch\.Tensor, which"):
        arraycore.namespace_of(tensor)
    with pytest.raises(BackendMismatchError, match=r"^sum: got a torch\.Tensor.*asarray"):
        arraycore.sum(tensor)
    with arraycore.use("tiny"), pytest.raises(BackendMismatchError, match="namespace_of"):
        arraycore.namespace_of(tensor, arraycore.asarray(np.ones(3)))
    # what arraycore makes of it explicitly is an array of the active backend
    assert arraycore.namespace_of(arraycore.asarray(tensor)).name == "numpy"
    # Python data and NumPy arrays are not foreign
    assert arraycore.namespace_of([1.0, 2.0], 3, None).name == "numpy"
    assert arraycore.namespace_of(np.ones(2), np.float32).name == "numpy"


def test_from_dlpack_of_an_object_without_dlpack_says_what_to_do() -> None:
    for xp in (arraycore.namespace("numpy"), arraycore.namespace("tiny")):
        with pytest.raises(TypeError, match=r"from_dlpack: a builtins\.list does not support"):
            xp.from_dlpack([1.0, 2.0])
    # Arrays of a device backend do support DLPack, with a host copy only when asked for one.
    tiny = arraycore.namespace("tiny")
    with pytest.raises(BufferError, match=r"device='cpu', copy=True.*to_numpy"):
        arraycore.namespace("numpy").from_dlpack(tiny.ones(2))


def test_unknown_backend_from_environment(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ARRAYCORE_BACKEND", "nosuchbackend")
    with pytest.raises(BackendNotFoundError, match="ARRAYCORE_BACKEND"):
        arraycore.zeros(2)


@pytest.mark.parametrize(
    ("name", "command"),
    [("cuda", 'pip install "arraycore[cuda12]"'), ("opencl", 'pip install "arraycore[opencl]"')],
)
def test_first_party_backend_not_installed(name: str, command: str) -> None:
    try:
        metadata.distribution(f"arraycore-{name}")
    except metadata.PackageNotFoundError:
        pass
    else:
        pytest.skip(f"arraycore-{name} is installed in this environment")
    with pytest.raises(BackendNotInstalledError) as info:
        arraycore.namespace(name)
    assert f"backend {name!r} is not installed" in str(info.value)
    assert command in str(info.value)
    assert isinstance(info.value.__cause__, metadata.PackageNotFoundError)


def _register(monkeypatch: pytest.MonkeyPatch, name: str, target: str) -> None:
    """Add an entry point as an installed distribution would, for this test only."""
    real = _registry.entry_points

    def with_extra() -> dict[str, metadata.EntryPoint]:
        found = real()
        found[name] = metadata.EntryPoint(name, target, _registry.ENTRY_POINT_GROUP)
        return found

    monkeypatch.setattr(_registry, "entry_points", with_extra)
    monkeypatch.delitem(_registry._classes, name, raising=False)


def test_installed_backend_without_device(monkeypatch: pytest.MonkeyPatch) -> None:
    _register(monkeypatch, "nodevice", "_broken_backends:NoDeviceBackend")
    with pytest.raises(BackendUnavailableError) as info:
        arraycore.namespace("nodevice")
    message = str(info.value)
    assert "'nodevice'" in message and "no usable device" in message
    assert "pip install nodevice-backend" in message
    assert info.value.__cause__ is not None


def test_installed_backend_missing_its_library(monkeypatch: pytest.MonkeyPatch) -> None:
    _register(monkeypatch, "missinglib", "_broken_backends:MissingLibraryBackend")
    with pytest.raises(BackendUnavailableError) as info:
        arraycore.namespace("missinglib")
    assert "arraycore_library_that_does_not_exist" in str(info.value)
    assert "pip install missinglib-backend" in str(info.value)
    assert isinstance(info.value.__cause__.__cause__, ImportError)


def test_entry_point_that_fails_to_import(monkeypatch: pytest.MonkeyPatch) -> None:
    _register(monkeypatch, "brokenimport", "no_such_module_anywhere:Backend")
    with pytest.raises(BackendUnavailableError, match="failed to import") as info:
        arraycore.namespace("brokenimport")
    assert isinstance(info.value.__cause__, ModuleNotFoundError)


def test_entry_point_that_is_not_a_backend(monkeypatch: pytest.MonkeyPatch) -> None:
    _register(monkeypatch, "notabackend", "_broken_backends:NotABackend")
    with pytest.raises(BackendUnavailableError, match=r"is not an arraycore\.backend\.Backend"):
        arraycore.namespace("notabackend")


def test_no_silent_fallback_to_numpy(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("ARRAYCORE_BACKEND", "cuda")
    try:
        xp = arraycore.namespace()
    except arraycore.BackendError:
        return
    assert xp.name == "cuda"  # a machine with a GPU and arraycore-cuda: really CUDA


def test_bad_device_selector_lists_devices() -> None:
    with pytest.raises(
        BackendUnavailableError, match=r"no device matching 7; devices are: 0: host CPU"
    ):
        arraycore.namespace("numpy", device=7)


def test_namespaces_are_cached_per_backend_and_device() -> None:
    assert arraycore.namespace("numpy") is arraycore.namespace("numpy", device="cpu")
    assert arraycore.namespace("numpy") is arraycore.namespace("numpy", device=0)


def test_arrays_of_two_devices_of_one_backend_do_not_mix() -> None:
    on0 = arraycore.namespace("tiny", device="tiny0").ones(3)
    on1 = arraycore.namespace("tiny", device=1).ones(3)
    assert (on0.device, on1.device) == ("tiny0", "tiny1")
    with pytest.raises(BackendMismatchError, match="two backends or devices"):
        arraycore.add(on0, on1)
    with pytest.raises(BackendMismatchError, match="device 'tiny1'"):
        arraycore.namespace("tiny", device=0).add(on0, on1)
    assert arraycore.namespace_of(on1).device.id == "tiny1"


def test_a_device_without_float64_says_so() -> None:
    xp = arraycore.namespace("tiny", device="tiny1")
    info = xp.__array_namespace_info__()
    assert "float64" not in info.dtypes() and "float32" in info.dtypes()
    assert info.default_dtypes()["real floating"] == np.dtype("float32")
    assert xp.ones(2).dtype == np.dtype("float32")
    with pytest.raises(TypeError, match=r"zeros: device tiny:tiny1 .* has no float64"):
        xp.zeros(2, dtype=xp.float64)


def test_a_numpy_scalar_result_stays_on_numpy() -> None:
    # NumPy's full reductions give NumPy scalars, not 0-d arrays.
    total = arraycore.namespace("numpy").sum(np.ones(3))
    tiny = arraycore.namespace("tiny")
    with arraycore.use("tiny"):
        assert float(arraycore.exp(total)) == pytest.approx(np.exp(3.0))
        with pytest.raises(BackendMismatchError, match=r"add: got a numpy\.float32"):
            arraycore.add(tiny.ones(2), np.float32(2.0))


def test_install_hints_from_a_checkout_are_the_commands_that_work_there() -> None:
    """Run from this repository's source tree (an editable install), the hint for a
    first-party backend is ``pip install -e`` of its folder beside arraycore's, a folder that
    is there and holds that distribution; installed from a wheel, the released command."""
    from pathlib import Path

    import arraycore
    from arraycore import _registry

    source = Path(arraycore.__file__).resolve()
    from_checkout = source.parents[1].name == "src" and source.parents[3].name == "packages"
    for name, known in _registry.KNOWN_BACKENDS.items():
        hint = _registry.install_hint(name) if name not in _registry._classes else None
        if hint is None:
            continue
        if not from_checkout:
            assert hint == known.install
            continue
        assert hint.startswith("pip install -e "), hint
        target = hint.split()[3].strip('"').split("[")[0]
        folder = Path(target)
        assert (folder / "pyproject.toml").is_file(), hint
        assert f'name = "{known.distribution}"' in (folder / "pyproject.toml").read_text()
