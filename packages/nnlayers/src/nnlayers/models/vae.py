"""``VAE``: a variational autoencoder (Kingma & Welling, 2014)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import expr as ex
from ..expr.node import Expr
from ..graph.graph import Graph
from ..layers.affine import Affine
from .model import Batch, Model


class VAE(Model):
    """A variational autoencoder with a diagonal Gaussian posterior.

    ``encoder(x)`` gives features from which two :class:`~nnlayers.layers.Affine` heads make the
    posterior mean and log-variance of a ``latent_dim`` code; ``z = mean + exp(log_var / 2) * e``
    with ``e ~ N(0, 1)`` drawn on the device every step; ``decoder(z)`` gives the parameters of
    the likelihood, with the inputs' shape: logits of a Bernoulli (``likelihood="bernoulli"``,
    data in [0, 1]) or the mean of a unit Gaussian (``"gaussian"``). The loss is the negative
    evidence lower bound per example, ``reconstruction + beta * kl``; both parts are metrics.

    >>> import numpy as np
    >>> from nnlayers.layers import Affine, Sequential
    >>> vae = VAE(Affine(16, activation="relu", seed=0), Affine(8, seed=1), (8,), 2)
    >>> sorted(vae.evaluate(np.random.default_rng(0).uniform(size=(4, 8))))
    ['kl', 'loss', 'reconstruction']
    >>> vae.encode(np.zeros((3, 8))).shape, vae.sample(5, seed=0).shape
    ((3, 2), (5, 8))
    """

    def __init__(
        self,
        encoder: Callable[[Expr], Expr],
        decoder: Callable[[Expr], Expr],
        input_shape: Sequence[int],
        latent_dim: int,
        *,
        likelihood: str = "bernoulli",
        beta: float = 1.0,
        optimizer: Any = None,
        seed: int = 0,
        check_finite: bool = False,
    ) -> None:
        if likelihood not in ("bernoulli", "gaussian"):
            raise ValueError(
                f"VAE: likelihood must be 'bernoulli' or 'gaussian', got {likelihood!r}"
            )
        x = ex.placeholder((None, *input_shape), name="inputs")
        noise = ex.placeholder((None, latent_dim), name="noise")
        features = encoder(x)
        if features.ndim != 2:
            features = ex.flatten(features)
        mean = Affine(latent_dim, name="latent_mean", seed=seed)(features).named("mean")
        log_var = Affine(latent_dim, name="latent_log_var", seed=seed + 1, init="zeros")(features)
        log_var = log_var.named("log_var")
        z = mean + ex.exp(log_var * 0.5) * noise
        out = decoder(z)
        if tuple(out.shape[1:]) != tuple(input_shape):
            raise ValueError(
                f"VAE: the decoder gives shape {out.shape}, expected (None, *{tuple(input_shape)})"
            )
        if likelihood == "bernoulli":
            reconstruction = ex.sigmoid_cross_entropy(out, x)
        else:
            reconstruction = ex.squared_error(out, x) * 0.5
        kl = ex.kl_standard_normal(mean, log_var)
        self.latent_dim = int(latent_dim)
        self.likelihood = likelihood
        self.decoder = decoder
        self.input_shape = tuple(input_shape)
        super().__init__(
            reconstruction + kl * beta,
            inputs=[x, noise],
            outputs={"mean": mean, "log_var": log_var},
            metrics={"reconstruction": reconstruction, "kl": kl},
            optimizer=optimizer,
            seed=seed,
            check_finite=check_finite,
        )
        self._noise = self.xp.random.default_rng(seed)
        self._decode_graph: Graph | None = None
        self._code = ex.placeholder((None, latent_dim), name="code")
        self._decoded = decoder(self._code)

    def start_epoch(self, epoch: int) -> None:
        super().start_epoch(epoch)
        seed = int(np.random.SeedSequence([self.seed, epoch, 1]).generate_state(1)[0])
        self._noise = self.xp.random.default_rng(seed)

    def _fill(self, batch: Batch) -> dict[Any, Any]:
        if len(batch) != 1:
            raise ValueError(
                f"VAE: a batch of {len(batch)} arrays; a VAE trains on examples alone, give "
                "batches of one array (the noise is drawn for you)"
            )
        x = batch[0]
        noise = self._noise.normal(shape=(int(x.shape[0]), self.latent_dim))
        return super()._fill((x, noise))

    def predict_outputs(self, x: Any, *more: Any, batch_size: int = 256) -> dict[str, np.ndarray]:
        return super().predict_outputs(x, batch_size=batch_size)

    def encode(self, x: Any, batch_size: int = 256) -> np.ndarray:
        """The posterior mean of each input's code."""
        return self.predict_outputs(x, batch_size=batch_size)["mean"]

    def decode(self, z: Any, batch_size: int = 256) -> np.ndarray:
        """The decoded inputs for codes ``z``: probabilities (Bernoulli) or means (Gaussian)."""
        if self._decode_graph is None:
            out = self._decoded
            if self.likelihood == "bernoulli":
                out = ex.sigmoid(out)
            self._decode_graph = Graph(out, wrt=[], seed=self.seed, training=False, xp=self.xp)
        graph, parts = self._decode_graph, []
        z = np.asarray(z)
        for start in range(0, z.shape[0], batch_size):
            value = graph.forward({self._code: z[start : start + batch_size]})
            parts.append(np.asarray(self.xp.to_numpy(value)))
        return np.concatenate(parts) if parts else np.zeros((0, *self.input_shape))

    def reconstruct(self, x: Any, batch_size: int = 256) -> np.ndarray:
        """Inputs passed through the posterior mean and decoded."""
        return self.decode(self.encode(x, batch_size), batch_size)

    def sample(self, n: int, seed: int = 0) -> np.ndarray:
        """``n`` new examples decoded from codes drawn from the prior ``N(0, 1)``."""
        z = np.random.default_rng(seed).normal(size=(n, self.latent_dim)).astype(np.float32)
        return self.decode(z)

    def bits_per_dim(self, x: Any, *more: Any, batch_size: int = 256) -> float:
        """The negative ELBO in bits per input dimension (lower is better)."""
        loss = self.evaluate(x, *more, batch_size=batch_size)["loss"]
        return loss / (math.log(2.0) * math.prod(self.input_shape))
