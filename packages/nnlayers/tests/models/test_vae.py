"""VAE: the ELBO decreases, noise is drawn on the device, encode/decode/sample shapes."""

from __future__ import annotations

import numpy as np
import pytest

from nnlayers.layers import Affine, Sequential
from nnlayers.models import VAE
from nnlayers.optim import Adam


def _patterns():
    rng = np.random.default_rng(0)
    prototypes = (rng.uniform(size=(2, 12)) > 0.5).astype(np.float32)
    pick = rng.integers(0, 2, size=64)
    flips = rng.uniform(size=(64, 12)) < 0.05
    return np.abs(prototypes[pick] - flips).astype(np.float32), pick


def test_vae_learns_to_reconstruct_two_patterns() -> None:
    data, pick = _patterns()
    vae = VAE(
        Sequential([Affine(16, activation="relu")], seed=0),
        Sequential([Affine(16, activation="relu"), Affine(12)], seed=1),
        (12,),
        latent_dim=2,
        optimizer=Adam(0.01),
    )
    start = vae.evaluate(data)
    for _ in range(150):
        vae.train_step((data,))
    end = vae.evaluate(data)
    assert end["loss"] < 0.6 * start["loss"]
    assert end["kl"] > 0.0 and end["loss"] == pytest.approx(
        end["reconstruction"] + end["kl"], rel=1e-4
    )
    codes = vae.encode(data)
    assert codes.shape == (64, 2)
    assert abs(codes[pick == 0].mean(0) - codes[pick == 1].mean(0)).max() > 0.5
    recon = vae.reconstruct(data)
    assert ((recon > 0.5) == (data > 0.5)).mean() > 0.9
    assert vae.sample(3, seed=1).shape == (3, 12)
    assert vae.bits_per_dim(data) == pytest.approx(end["loss"] / (np.log(2) * 12), rel=0.2)


def test_vae_noise_differs_per_step_and_the_decoder_shape_is_checked() -> None:
    vae = VAE(Affine(4, seed=0), Affine(3, seed=1), (3,), 2, likelihood="gaussian")
    x = np.ones((2, 3), np.float32)
    a = float(vae.xp.to_numpy(vae.test_step((x,))[0]))
    b = float(vae.xp.to_numpy(vae.test_step((x,))[0]))
    assert a != b
    with pytest.raises(ValueError, match="the decoder gives shape"):
        VAE(Affine(4), Affine(5), (3,), 2)
    with pytest.raises(ValueError, match="likelihood must be"):
        VAE(Affine(4), Affine(3), (3,), 2, likelihood="poisson")
