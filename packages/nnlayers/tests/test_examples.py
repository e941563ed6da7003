"""The examples: each runs as a script with --help, --epochs and --backend, and achieves what
it says on small settings. MNIST is replaced by small generated IDX files (it cannot be
downloaded here); without its files an MNIST example names them and where to get them."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from nnlayers.datasets import MNIST, write_idx

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
SCRIPTS = [
    "spiral_mlp",
    "mnist_mlp",
    "mnist_cnn",
    "char_lstm",
    "char_transformer",
    "resnet",
    "vae",
    "gan",
]


def example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", SCRIPTS)
def test_every_example_runs_as_a_script_with_help(name: str) -> None:
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / f"{name}.py"), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    for option in ("--epochs", "--backend", "--device", "--seed"):
        assert option in done.stdout


def test_spiral_mlp(capsys) -> None:
    result = example("spiral_mlp").main(["--epochs", "40", "--quiet", "--backend", "numpy"])
    assert result["accuracy"] >= 0.95
    assert "held-out accuracy" in capsys.readouterr().out


def test_char_lstm_learns_the_zen_of_python(capsys) -> None:
    result = example("char_lstm").main(["--epochs", "8", "--quiet", "--generate", "20"])
    assert result["bits_per_character"] < 3.5  # uniform over the Zen's characters: 5.5
    assert result["sample"].startswith("Beautiful is") and len(result["sample"]) == 32
    assert "bits per character" in capsys.readouterr().out


def test_char_lstm_on_a_module_source() -> None:
    module = example("char_lstm")
    assert "def dedent" in module.load_text("textwrap")
    assert module.load_text("zen").startswith("The Zen of Python")


def test_char_transformer_beats_the_unigram_entropy_and_generates(capsys) -> None:
    tiny = ["--text", "zen", "--epochs", "6", "--length", "32", "--width", "48", "--layers", "1"]
    result = example("char_transformer").main(
        [
            *tiny,
            "--stride",
            "1",
            "--dropout",
            "0",
            "--quiet",
            "--generate",
            "30",
            "--prompt",
            "Beau",
        ]
    )
    # the Zen's unigram entropy is 4.49 bits per character, uniform over its 45 characters 5.49
    assert result["bits_per_character"] < 0.75 * result["unigram_bits"]
    sample = result["sample"]
    assert sample.startswith("Beau") and len(sample) == 34
    assert set(sample) <= set(example("char_lstm").load_text("zen"))
    assert "unigram entropy" in capsys.readouterr().out


def test_resnet_learns_the_digits(capsys) -> None:
    result = example("resnet").main(["--epochs", "3", "--width", "8", "--quiet"])
    assert result["accuracy"] > 0.9
    assert "held-out accuracy" in capsys.readouterr().out


def test_resnet_in_mixed_precision_learns_the_digits(xp) -> None:
    if not xp.__array_namespace_info__().dtypes(kind="float16"):
        pytest.skip(f"the {xp.name} device has no float16")
    tiny = ["--epochs", "3", "--width", "8", "--quiet", "--precision", "mixed_float16"]
    result = example("resnet").main(tiny)
    assert result["accuracy"] > 0.9
    assert result["skipped_steps"] is not None


def test_resnet_reads_cifar_batches_and_names_missing_files(tmp_path) -> None:
    import pickle

    module = example("resnet")
    rng = np.random.default_rng(0)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        batch = {
            b"data": rng.integers(0, 256, (4, 3072), dtype=np.uint8),
            b"labels": list(rng.integers(0, 10, 4)),
        }
        with open(tmp_path / name, "wb") as f:
            pickle.dump(batch, f)
    x_train, y_train, x_test, y_test = module.load_cifar(tmp_path)
    assert x_train.shape == (20, 3, 32, 32) and x_test.shape == (4, 3, 32, 32)
    assert y_train.dtype == np.int64 and len(y_test) == 4
    np.testing.assert_allclose(x_train.mean(axis=(0, 2, 3)), 0, atol=1e-6)
    (tmp_path / "test_batch").unlink()
    with pytest.raises(SystemExit, match="lacks test_batch"):
        module.load_cifar(tmp_path)


def test_bilstm_classifies_variable_length_sequences(capsys) -> None:
    result = example("bilstm_lengths").main(["--quiet", "--examples", "2000", "--epochs", "12"])
    assert result["with_lengths"] > 0.9  # the label needs each sequence's own last digit
    assert "with lengths on" in capsys.readouterr().out


def test_vae_beats_its_untrained_self(capsys) -> None:
    result = example("vae").main(["--epochs", "5", "--quiet"])
    assert result["loss"] < 0.8 * result["untrained"]
    assert "nats per image" in capsys.readouterr().out


def test_gan_trains_and_reports_its_modes(tmp_path, capsys) -> None:
    out = tmp_path / "gan.png"
    result = example("gan").main(
        ["--epochs", "3", "--examples", "2048", "--quiet", "--out", str(out)]
    )
    assert 0 <= result["modes"] <= 8 and len(result["history"]) == 3
    assert out.read_bytes()[:4] == b"\x89PNG"
    assert "modes" in capsys.readouterr().out


@pytest.fixture(scope="module")
def small_mnist(tmp_path_factory) -> Path:
    """MNIST-shaped IDX files whose classes are easy: a bright bar at a class-given height."""
    folder = tmp_path_factory.mktemp("mnist")
    rng = np.random.default_rng(0)
    for prefix, n in (("train", 512), ("t10k", 50)):
        labels = rng.integers(0, 10, n).astype(np.uint8)
        images = rng.integers(0, 60, (n, 28, 28)).astype(np.uint8)
        for i, label in enumerate(labels):
            images[i, 3 + 2 * label : 5 + 2 * label, 4:24] = 255
        write_idx(folder / f"{prefix}-images-idx3-ubyte", images)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte", labels)
    return folder


@pytest.mark.parametrize(("name", "epochs"), [("mnist_mlp", "3"), ("mnist_cnn", "3")])
def test_mnist_examples_on_small_generated_files(small_mnist, name, epochs, capsys) -> None:
    result = example(name).main(["--data", str(small_mnist), "--epochs", epochs, "--quiet"])
    assert result["accuracy"] >= 0.9
    assert "test accuracy" in capsys.readouterr().out


@pytest.mark.parametrize("name", ["mnist_mlp", "mnist_cnn"])
def test_mnist_examples_without_the_files_say_what_to_get(tmp_path, name) -> None:
    with pytest.raises(SystemExit) as stop:
        example(name).main(["--data", str(tmp_path)])
    message = str(stop.value)
    assert str(tmp_path) in message and MNIST.mirrors[0] in message
    for file in MNIST.files:
        assert file in message
