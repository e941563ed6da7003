"""``GAN``: a generative adversarial network, generator and discriminator trained in turn."""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .. import expr as ex
from ..expr.node import Expr
from ..graph.graph import Graph
from ..graph.topo import topological_order
from ..ops.loss.regression import per_example_mean
from ..parameter import Parameter
from .model import Batch, Model, bind_optimizer


def _params_of(output: Expr) -> list[Parameter]:
    seen: set[int] = set()
    found = []
    for node in topological_order([output]):
        if isinstance(node, Parameter) and node.trainable and id(node) not in seen:
            seen.add(id(node))
            found.append(node)
    return found


class GAN(Model):
    """A GAN (Goodfellow et al., 2014) with the non-saturating generator loss.

    ``generator(z)`` maps noise of ``noise_dim`` to examples of ``input_shape``;
    ``discriminator(x)`` gives one logit per example ((N, 1) or (N,)), "real" when positive.
    Each :meth:`train_step` first updates the discriminator on a real batch and a generated one
    (``softplus(-D(x)) + softplus(D(G(z)))``), then the generator on fresh noise
    (``softplus(-D(G(z)))``). Metrics: ``discriminator_loss``, ``generator_loss`` and
    ``discriminator_accuracy`` (real and generated examples told apart, in the first half).

    ``optimizer`` updates the discriminator and a copy of it the generator, unless
    ``generator_optimizer`` is given.

    >>> import numpy as np
    >>> from nnlayers.layers import Affine
    >>> gan = GAN(Affine(2, seed=0), Affine(1, seed=1), (2,), noise_dim=3)
    >>> gan.generate(4, seed=0).shape, gan.metric_names[:2]
    ((4, 2), ['discriminator_loss', 'generator_loss'])
    """

    def __init__(
        self,
        generator: Callable[[Expr], Expr],
        discriminator: Callable[[Expr], Expr],
        input_shape: Sequence[int],
        noise_dim: int,
        *,
        optimizer: Any = None,
        generator_optimizer: Any = None,
        seed: int = 0,
        check_finite: bool = False,
    ) -> None:
        x = ex.placeholder((None, *input_shape), name="inputs")
        z = ex.placeholder((None, noise_dim), name="noise")
        fake = generator(z).named("generated")
        if tuple(fake.shape[1:]) != tuple(input_shape):
            raise ValueError(
                f"GAN: the generator gives shape {fake.shape}, expected (None, *{tuple(input_shape)})"
            )
        real_logit, fake_logit = discriminator(x), discriminator(fake)
        for logit in (real_logit, fake_logit):
            if logit.ndim not in (1, 2) or (logit.ndim == 2 and logit.shape[1] != 1):
                raise ValueError(
                    f"GAN: the discriminator must give one logit per example, got {logit.shape}"
                )
        d_loss = per_example_mean(ex.softplus(-real_logit)) + per_example_mean(
            ex.softplus(fake_logit)
        )
        g_loss = per_example_mean(ex.softplus(-fake_logit))
        told_apart = ex.mean(ex.astype(real_logit > 0.0, real_logit.dtype)) + ex.mean(
            ex.astype(fake_logit < 0.0, fake_logit.dtype)
        )
        self.generator_params = _params_of(fake)
        generator_ids = {id(p) for p in self.generator_params}
        self.discriminator_params = [
            p for p in _params_of(real_logit) if id(p) not in generator_ids
        ]
        self.noise_dim = int(noise_dim)
        self._z = z
        super().__init__(
            d_loss,
            inputs=[x, z],
            outputs={"generated": fake},
            metrics={"generator_loss": g_loss, "discriminator_accuracy": told_apart * 0.5},
            wrt=self.discriminator_params,
            seed=seed,
            check_finite=check_finite,
        )
        self.metric_names = ["discriminator_loss", "generator_loss", "discriminator_accuracy"]
        generator_nodes: list[Expr] = list(self.generator_params)
        self.generator_graph = Graph(
            g_loss, generator_nodes, seed=seed + 1, check_finite=check_finite
        )
        self._g_feeds: dict[Any, Any] = {z: None}
        self._noise = self.xp.random.default_rng(seed)
        self.generator_optimizer = generator_optimizer
        self.optimizer = optimizer

    @property
    def optimizer(self) -> Any:
        """The discriminator's optimiser (setting it also sets the generator's, as a copy,
        unless that one was given)."""
        return self._optimizer

    @optimizer.setter
    def optimizer(self, optimizer: Any) -> None:
        self._optimizer = optimizer
        if optimizer is None:
            return
        bind_optimizer(optimizer, self.discriminator_params)
        if getattr(self, "generator_optimizer", None) is None:
            self.generator_optimizer = copy.deepcopy(optimizer)

    @property
    def generator_optimizer(self) -> Any:
        """The generator's optimiser."""
        return self._generator_optimizer

    @generator_optimizer.setter
    def generator_optimizer(self, optimizer: Any) -> None:
        self._generator_optimizer = optimizer
        if optimizer is not None:
            bind_optimizer(optimizer, self.generator_params)

    def optimizers(self) -> dict[str, Any]:
        found = {"discriminator": self._optimizer, "generator": self._generator_optimizer}
        return {k: v for k, v in found.items() if v is not None}

    def train(self) -> GAN:
        super().train()
        self.generator_graph.train()
        return self

    def eval(self) -> GAN:
        super().eval()
        self.generator_graph.eval()
        return self

    def start_epoch(self, epoch: int) -> None:
        super().start_epoch(epoch)
        seeds = np.random.SeedSequence([self.seed, epoch, 2, *self._rank_words()]).generate_state(2)
        self.generator_graph.state.rng = self.xp.random.default_rng(int(seeds[0]))
        self._noise = self.xp.random.default_rng(int(seeds[1]))

    def _draw(self, n: int) -> Any:
        return self._noise.normal(shape=(n, self.noise_dim))

    def _fill(self, batch: Batch) -> dict[Any, Any]:
        if len(batch) != 1:
            raise ValueError(
                f"GAN: a batch of {len(batch)} arrays; a GAN trains on real examples alone, "
                "give batches of one array (the noise is drawn for you)"
            )
        x = batch[0]
        return super()._fill((x, self._draw(int(x.shape[0]))))

    def _optimizer_slots(self) -> dict[str, Any]:
        return {"optimizer": self._optimizer, "generator_optimizer": self._generator_optimizer}

    def train_step(self, batch: Batch) -> list[Any]:
        """A discriminator update, then a generator update on fresh noise."""
        if self._optimizer is None or self._generator_optimizer is None:
            self._require_optimizer()
        values = self.graph.forward(self._fill(batch))
        self.graph.backward()
        self._sync_gradients(self.wrt, batch)
        self._optimizer.step()
        self._g_feeds[self._z] = self._draw(int(batch[0].shape[0]))
        self.generator_graph.forward(self._g_feeds)
        self.generator_graph.backward()
        self._sync_gradients(self.generator_params, batch)
        self._generator_optimizer.step()
        return values  # type: ignore[no-any-return]

    def generate(self, n: int, seed: int = 0, batch_size: int = 256) -> np.ndarray:
        """``n`` generated examples from noise drawn with ``seed``."""
        z = np.random.default_rng(seed).normal(size=(n, self.noise_dim)).astype(np.float32)
        return self.predict(z, batch_size=batch_size)
