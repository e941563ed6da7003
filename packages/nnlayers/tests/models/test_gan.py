"""GAN: the two networks' parameters, alternating updates, and learning a 1-D distribution."""

from __future__ import annotations

import numpy as np
import pytest

from nnlayers.layers import Affine, Sequential
from nnlayers.models import GAN
from nnlayers.optim import Adam


def _gan(**options):
    generator = Sequential([Affine(8, activation="tanh"), Affine(1)], seed=0)
    discriminator = Sequential([Affine(16, activation="leaky_relu"), Affine(1)], seed=1)
    return GAN(generator, discriminator, (1,), noise_dim=2, **options), generator, discriminator


def test_generator_and_discriminator_parameters_are_apart() -> None:
    gan, generator, discriminator = _gan(optimizer=Adam(1e-3))
    assert gan.generator_params == generator.params
    assert gan.discriminator_params == discriminator.params
    assert len(gan.params) == 8
    optimizers = gan.optimizers()
    assert set(optimizers) == {"discriminator", "generator"}
    assert optimizers["generator"] is not optimizers["discriminator"]
    assert optimizers["generator"].params == generator.params


def test_each_step_updates_both_networks_in_turn() -> None:
    gan, _, _ = _gan(optimizer=Adam(1e-2))
    real = np.random.default_rng(0).normal(3.0, 0.5, size=(32, 1)).astype(np.float32)
    before = [p.numpy() for p in gan.params]
    values = gan.train_step((real,))
    assert len(values) == 3
    assert all(not np.array_equal(b, p.numpy()) for b, p in zip(before, gan.params))


def test_gan_moves_its_samples_to_the_data() -> None:
    gan, _, _ = _gan(optimizer=Adam(5e-3, beta1=0.5))
    rng = np.random.default_rng(0)
    start = abs(gan.generate(256, seed=0).mean() - 3.0)
    for _ in range(300):
        gan.train_step((rng.normal(3.0, 0.5, size=(64, 1)).astype(np.float32),))
    samples = gan.generate(512, seed=1)
    assert samples.shape == (512, 1)
    assert abs(samples.mean() - 3.0) < 0.3 < start
    scores = gan.evaluate(rng.normal(3.0, 0.5, size=(64, 1)).astype(np.float32))
    assert set(scores) == {"discriminator_loss", "generator_loss", "discriminator_accuracy"}


def test_gan_shape_checks() -> None:
    with pytest.raises(ValueError, match="the generator gives shape"):
        GAN(Affine(2), Affine(1), (1,), noise_dim=2)
    with pytest.raises(ValueError, match="one logit per example"):
        GAN(Affine(1), Affine(3), (1,), noise_dim=2)
