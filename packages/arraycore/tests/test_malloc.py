"""The NumPy backend's allocator settings (``arraycore.backends._malloc``): freed large arrays
stay in the process, so a step's temporaries do not fault their pages in afresh."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="glibc's mallopt thresholds: Linux only"
)

# Makes the NumPy backend, then 30 times allocates and fills four arrays of 4-12 MiB and frees
# them together (as a training step does with its temporaries); reports the minor page faults
# of the last 20 rounds.
_PROBE = textwrap.dedent(
    """
    import json, resource
    import numpy as np
    import arraycore
    from arraycore.backends import _malloc

    xp = arraycore.namespace("numpy")
    def churn(times):
        for _ in range(times):
            step = [np.ones(n << 20, np.float32) for n in (1, 2, 1, 3)]  # 4, 8, 4, 12 MiB
            del step
    churn(10)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    churn(20)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    print(json.dumps({"faults": faults, "status": _malloc.status()}))
    """
)


def _probe(**env: str) -> dict[str, object]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUN"))}
    clean.pop("ARRAYCORE_MALLOC_TUNING", None)
    run = subprocess.run(
        [sys.executable, "-c", _PROBE],
        capture_output=True,
        text=True,
        timeout=120,
        env={**clean, **env},
        check=True,
    )
    result: dict[str, object] = json.loads(run.stdout.strip().splitlines()[-1])
    return result


def test_freed_large_arrays_are_reused_without_page_faults() -> None:
    tuned, default = _probe(), _probe(ARRAYCORE_MALLOC_TUNING="0")
    if "glibc" not in str(tuned["status"]):
        pytest.skip(f"not glibc here: {tuned['status']}")
    assert "32 MiB" in str(tuned["status"]) and "128 MiB" in str(tuned["status"])
    assert "ARRAYCORE_MALLOC_TUNING=0" in str(default["status"])
    # 20 rounds of 7168 pages: the defaults fault most of them in again, the tuning none
    assert int(default["faults"]) > 20000, default  # type: ignore[call-overload]
    assert int(tuned["faults"]) < 200, tuned  # type: ignore[call-overload]


@pytest.mark.parametrize(
    "env",
    [
        {"MALLOC_TRIM_THRESHOLD_": "1000000"},
        {"MALLOC_MMAP_THRESHOLD_": "1000000"},
        {"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=1000000"},
    ],
    ids=["trim", "mmap", "tunables"],
)
def test_glibc_settings_in_the_environment_are_left_alone(env: dict[str, str]) -> None:
    found = _probe(**env)
    assert str(found["status"]).startswith("left as set in the environment"), found
