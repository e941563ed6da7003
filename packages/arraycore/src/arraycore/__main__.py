"""``python -m arraycore`` / ``arraycore``: inspect backends and run the conformance kit.

arraycore info                 backends, whether each is usable and why not, devices, versions,
                               and the BLAS/OpenMP thread pools with their thread counts
arraycore conformance NAME     run the conformance kit against backend NAME (pytest)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from importlib import metadata
from typing import Any

from . import _registry, _threads
from .errors import BackendError


def _distribution_of(ep: metadata.EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    if dist is not None:
        return f"{dist.metadata['Name']} {dist.version}"
    return "arraycore (built in)"


def backend_report() -> list[dict[str, Any]]:
    """One entry per discovered or first-party backend: name, usable, reason, devices, versions."""
    rows: list[dict[str, Any]] = []
    eps = _registry.entry_points()
    names = list(eps) + [n for n in _registry.KNOWN_BACKENDS if n not in eps]
    for name in names:
        row: dict[str, Any] = {"name": name, "usable": False, "devices": [], "version": ""}
        if name not in eps:
            row["distribution"] = "not installed"
            row["reason"] = f"not installed; install with: {_registry.install_hint(name)}"
            rows.append(row)
            continue
        row["distribution"] = _distribution_of(eps[name])
        try:
            cls = _registry.backend_class(name)
            row.update(protocol_report(cls))
            try:  # a backend may not know its versions where it cannot run: never the reason
                row["version"] = cls.version()
            except Exception as exc:
                row["version"] = f"unknown ({type(exc).__name__}: {exc})"
            cls.probe()
            devices = cls.devices()
            row["devices"] = [str(d) for d in devices]
            row["usable"] = bool(devices)
            row["reason"] = "" if devices else "no usable device"
            if devices:
                xp = _registry.namespace(name)
                row["host_functions"] = xp.__array_namespace_info__().host_functions()
                row["capture"] = _capture_line(xp)
        except BackendError as exc:
            row["reason"] = str(exc)
        except Exception as exc:  # a broken third-party backend must not break `info`
            cause = exc.__cause__ or exc
            row["reason"] = f"{type(exc).__name__}: {exc}" + (
                f" (caused by {type(cause).__name__}: {cause})" if cause is not exc else ""
            )
        rows.append(row)
    return rows


def protocol_report(cls: Any) -> dict[str, Any]:
    """The protocol version a backend class declares, the optional primitives it implements and
    those arraycore derives for it (docs/backends.md, "Protocol versions")."""
    from .backend import OPTIONAL_OPS

    declared = set(cls.optional_primitives)
    return {
        "protocol": ".".join(map(str, cls.protocol_version)),
        "optional": sorted(declared & set(OPTIONAL_OPS)),
        "derived": sorted(set(OPTIONAL_OPS) - declared),
    }


def _primitives_lines(row: dict[str, Any]) -> list[str]:
    if "protocol" not in row:
        return []
    from .backend import PROTOCOL_VERSION

    ours = ".".join(map(str, PROTOCOL_VERSION))
    total = len(row["optional"]) + len(row["derived"])
    optional = "all" if not row["derived"] else ", ".join(row["optional"]) or "none"
    lines = [
        f"protocol: {row['protocol']} (arraycore's: {ours}); optional primitives it implements "
        f"({len(row['optional'])} of {total}): {optional}"
    ]
    if row["derived"]:
        lines.append(f"derived by arraycore from the required ones: {', '.join(row['derived'])}")
    return lines


def _capture_line(xp: Any) -> str:
    """Whether training steps on ``xp`` are captured and replayed (docs/capture.md), in words."""
    try:
        reason = xp.__array_namespace_info__().capture_support()
    except Exception as exc:  # a broken third-party backend must not break `info`
        return f"unknown ({type(exc).__name__}: {exc})"
    if reason is None:
        return "steps are captured once and replayed (nnlayers: NNLAYERS_CAPTURE=0 turns it off)"
    return f"none, steps run call by call: {reason}"


def info(stream: Any = None) -> int:
    """Print what ``arraycore info`` shows; returns the exit status."""
    out = stream or sys.stdout
    import arraycore

    print(
        f"arraycore {arraycore.__version__} (Array API {arraycore.__array_api_version__})", file=out
    )
    backend, device = _registry._env_selection()
    current = _registry._current.get()
    usable = True
    try:
        active = str(current or _registry.namespace())
    except BackendError as exc:
        usable = False
        active = f"{backend!r} (device {device!r}) -- NOT USABLE: {exc}"
    print(f"active: {active}", file=out)
    print(
        f"  ({_describe_env(_registry.ENV_BACKEND, _registry.DEFAULT_BACKEND)}, "
        f"{_describe_env(_registry.ENV_DEVICE, 'its default device')})",
        file=out,
    )
    print("backends:", file=out)
    for row in backend_report():
        status = "usable" if row["usable"] else "NOT USABLE"
        print(f"  {row['name']}: {status} [{row['distribution']}]", file=out)
        if row["version"]:
            print(f"    versions: {row['version']}", file=out)
        for dev in row["devices"]:
            print(f"    device {dev}", file=out)
        for line in _primitives_lines(row):
            print(f"    {line}", file=out)
        if row.get("capture"):
            print(f"    capture: {row['capture']}", file=out)
        if row.get("host_functions"):
            names = ", ".join(row["host_functions"])
            print(f"    runs on the host (docs/host-path.md): {names}", file=out)
        if not row["usable"]:
            print(f"    why: {row['reason']}", file=out)
    thread_report(out)
    from .backends import _malloc, _numba, _onednn

    print(
        f"numpy oneDNN kernels (float32 conv, matmul, pool, LSTM, GELU): {_onednn.status()} (docs/onednn.md)",
        file=out,
    )
    print(
        f"numpy numba kernels (float32 batch and layer norm, softmax, small cross-entropy, GRU steps, scatter-add, max-pool, ReLU and softmax backward, fused updates): {_numba.status()} (docs/onednn.md)",
        file=out,
    )
    print(f"numpy allocator (docs/threads.md): {_malloc.status()}", file=out)
    from . import _cpu_extra

    advice = _cpu_extra.advice()
    if advice is not None:
        print(f"numpy: {advice}", file=out)
    if not usable:
        print(f"the selected backend {backend!r} cannot run here (see above)", file=out)
    return 0 if usable else 1


def thread_report(out: Any) -> None:
    """Print the BLAS and OpenMP thread pools, their thread counts and what decides them."""
    print(
        f"threads: {_threads.thread_setting()} "
        f"(${_threads.ENV_THREADS}=N or arraycore.set_threads(N) sets them; docs/threads.md)",
        file=out,
    )
    try:
        load = f"{os.getloadavg()[0]:.2f}"
    except (AttributeError, OSError):  # no load average on this platform
        load = "unknown"
    print(f"  usable cores {_threads.usable_cores()}, 1-minute load average {load}", file=out)
    pools = _threads.thread_info()
    if not pools:
        print("  no BLAS or OpenMP thread pool is loaded", file=out)
    for pool in pools:
        layer = f", {pool['threading_layer']}" if pool["threading_layer"] else ""
        print(
            f"  {pool['internal_api']} {pool['version']} ({pool['user_api']}{layer}): "
            f"{pool['num_threads']} thread{'' if pool['num_threads'] == 1 else 's'}",
            file=out,
        )
        print(f"    {pool['filepath']}", file=out)


def _describe_env(variable: str, default: str) -> str:
    value = os.environ.get(variable, "").strip()
    return f"${variable}={value!r}" if value else f"${variable} not set: {default}"


def conformance(name: str, extra: list[str]) -> int:
    """Run the conformance kit against backend ``name``; returns pytest's exit status.

    pytest runs in a fresh interpreter: this one has imported arraycore already, which pytest
    could no longer rewrite for its assertion messages (a warning that a project's
    ``filterwarnings = error`` turns into a failure).
    """
    args = ["--pyargs", "arraycore.testing.conformance", f"--arraycore-backend={name}", *extra]
    return subprocess.call([sys.executable, "-m", "pytest", *args])


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``arraycore`` console script (``arraycore info | head`` ends quietly)."""
    try:
        return _main(argv)
    except BrokenPipeError:
        # the reader went away: stop writing, and keep Python from complaining at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="arraycore", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command")
    sub.add_parser(
        "info", help="list backends, devices, versions, the active one and the thread pools"
    )
    conf = sub.add_parser("conformance", help="run the conformance kit against a backend")
    conf.add_argument("backend", help="entry-point name of the backend, e.g. numpy, cuda, opencl")
    args, extra = parser.parse_known_args(argv)
    if args.command == "conformance":
        return conformance(args.backend, extra)
    if args.command in (None, "info"):
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
        return info()
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
