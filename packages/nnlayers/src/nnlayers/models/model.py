"""``Model``: a compiled training graph plus what a user asks of it (gradients, evaluate, predict).

A model is built from expressions: the loss, the placeholders a batch fills (in the order a
:class:`nnlayers.Feed` yields them), named outputs for prediction and named metrics. It compiles
the training graph once, at construction, and the prediction graph once, at the first
``predict``; every later call reuses them.
"""

from __future__ import annotations

import contextlib
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np

from arraycore import ArrayNamespace

from ..errors import EmptyEpochError, GraphError, PrecisionWarning
from ..expr.node import Expr, Placeholder
from ..graph.graph import Graph, check_feed_dtype, check_indices, check_labels
from ..graph.topo import topological_order
from ..mixed_precision import LossScaler, Policy, as_policy, autocast
from ..ops.math.comparison import astype
from ..parameter import Parameter, trainable_version
from .capture import StepCapture, capture_enabled

Batch = Sequence[Any]
_T = TypeVar("_T")

#: Marks the rank in the seed words of a data-parallel run (see ``Model._rank_words``).
_RANK_SEED_TAG = 0x52414E4B


class Model:
    """A trainable graph: ``loss`` (first), ``metrics`` computed with it, ``outputs`` to predict.

    ``inputs`` are the placeholders a batch fills, in order (``(images, labels)``); ``outputs``
    and ``metrics`` map names to expressions. ``optimizer`` (see :mod:`nnlayers.optim`) updates
    the trainable parameters (:attr:`params`, or only ``wrt``) in :meth:`train_step`;
    :func:`nnlayers.train.fit` drives it.

    :attr:`params` lists every trainable :class:`nnlayers.Parameter` once (shared ones too) with
    names made unique; :attr:`buffers` the non-trainable state (batch-norm statistics).

    >>> import numpy as np, nnlayers, nnlayers.expr as ex
    >>> from nnlayers.layers import Affine
    >>> x = ex.placeholder((None, 3), name="x")
    >>> y = ex.placeholder((None, 1), name="y")
    >>> prediction = Affine(1, seed=0)(x)
    >>> model = Model(ex.squared_error(prediction, y), inputs=[x, y], outputs=prediction)
    >>> [p.name for p in model.params]
    ['affine/weight', 'affine/bias']
    >>> grads = model.gradients(np.ones((4, 3)), np.zeros((4, 1)))
    >>> [g.shape for g in grads.values()]
    [(3, 1), (1,)]
    >>> model.predict(np.ones((2, 3))).shape
    (2, 1)
    """

    #: The gradient synchronisation of data-parallel training
    #: (:func:`nnlayers.distributed.data_parallel` sets it; ``None``: one process).
    data_parallel: Any = None

    def __init__(
        self,
        loss: Expr,
        *,
        inputs: Sequence[Placeholder],
        outputs: Expr | Mapping[str, Expr] | None = None,
        metrics: Mapping[str, Expr] | None = None,
        optimizer: Any = None,
        wrt: Sequence[Parameter] | None = None,
        seed: int = 0,
        check_finite: bool = False,
        precision: Any = None,
        capture: bool | None = None,
    ) -> None:
        #: Whether steps are captured once and replayed where the backend can (CUDA graphs;
        #: see :mod:`nnlayers.models.capture`); default ``$NNLAYERS_CAPTURE``, on.
        self.capture = capture_enabled() if capture is None else bool(capture)
        self._captures: dict[str, StepCapture | None] = {}
        self.inputs = list(inputs)
        for p in self.inputs:
            if not isinstance(p, Placeholder):
                raise TypeError(f"Model: inputs must be placeholders, got {p!r}")
        self.loss = loss
        self.metrics = dict(metrics or {})
        if isinstance(outputs, Expr):
            outputs = {"output": outputs}
        self.outputs: dict[str, Expr] = dict(outputs or {})
        self.policy = as_policy(precision)
        self.loss_scaler: LossScaler | None = None
        if self.policy is not None:
            self._autocast(self.policy)
        self.seed = seed
        self.metric_names = ["loss", *self.metrics]
        nodes = topological_order([self.loss, *self.metrics.values(), *self.outputs.values()])
        self._check_inputs(nodes)
        everything = _unique(n for n in nodes if isinstance(n, Parameter))
        unique_names(everything)
        self._everything = everything
        self.params = [p for p in everything if p.trainable]
        self.buffers = [p for p in everything if not p.trainable]
        half = [p for p in self.params if p.dtype.kind == "f" and p.dtype.itemsize == 2]
        if half and self.policy is None:
            names = ", ".join(str(p.name) for p in half[:3]) + (" ..." if len(half) > 3 else "")
            warnings.warn(
                f"Model: parameters {names} are {half[0].dtype.name} and training them is "
                "unscaled: small gradients flush to zero and large ones overflow. Keep float32 "
                "parameters and pass precision='mixed_float16' (float32 master weights, "
                "half-precision compute, dynamic loss scaling)",
                PrecisionWarning,
                stacklevel=2,
            )
        self._chosen = None if wrt is None else list(wrt)
        self._check_finite = check_finite
        self._trainable_version = trainable_version()
        self.wrt = self.params if wrt is None else [p for p in wrt if p.trainable]
        self.graph = self._training_graph()
        self.xp = self.graph.xp
        # the training graph's own placeholders: an input only the outputs read is not fed to it
        used = {id(p) for p in self.graph.placeholders}
        self._feeds: dict[Any, Any] = dict.fromkeys(p for p in self.inputs if id(p) in used)
        self._predict_graph: Graph | None = None
        self._predict_inputs: list[Placeholder] = []
        self._phase_lock = threading.Lock()
        self._evaluating = 0
        self._resume_training = False
        self.epoch = 0
        #: True after a checkpoint restored the run (``restore``, ``Checkpoint(resume=True)``)
        #: until a ``fit`` trains: the next ``fit``'s ``epochs`` then counts from the start of
        #: training (the run resumes to its end) rather than from the current epoch
        self.resumed = False
        self.history: Any = None
        self.optimizer = optimizer

    def _training_graph(self) -> Graph:
        wrt_nodes: list[Expr] = list(self.wrt)
        return Graph(
            [self.loss, *self.metrics.values()],
            wrt_nodes,
            seed=self.seed,
            check_finite=self._check_finite,
            xp=self.__dict__.get("xp"),  # the model's backend once it has one (Model.to)
        )

    def _follow_freezing(self) -> None:
        """After parameters were frozen or unfrozen (:meth:`nnlayers.Parameter.freeze`,
        :meth:`nnlayers.layers.Layer.freeze`): re-split :attr:`params` and :attr:`buffers` and,
        if what is trained changed, rebuild the gradient graph (no backward through frozen
        parts that nothing trainable needs). The optimiser stays bound to frozen weights too
        (it skips them), so their state survives until they are unfrozen."""
        self._trainable_version = trainable_version()
        everything = self._everything
        params = [p for p in everything if p.trainable]
        chosen = self._chosen
        wrt = params if chosen is None else [p for p in chosen if p.trainable]
        self.params = params
        self.buffers = [p for p in everything if not p.trainable]
        if [id(p) for p in wrt] == [id(p) for p in self.wrt]:
            return
        kept = {id(p) for p in wrt}
        for p in self.wrt:
            if id(p) not in kept:
                p.grad = None  # a stale gradient must not reach an optimiser
        self.wrt = wrt
        old = self.graph
        self.graph = self._training_graph()
        self.graph.state.rng = old.state.rng
        if old.state.training:
            self.graph.train()
        else:
            self.graph.eval()

    def _check_inputs(self, nodes: list[Expr]) -> None:
        needed = [n for n in topological_order([self.loss, *self.metrics.values()])]
        missing = [
            n for n in needed if isinstance(n, Placeholder) and all(n is not p for p in self.inputs)
        ]
        if missing:
            names = ", ".join(n.describe() for n in missing)
            raise GraphError(f"Model: the loss needs placeholders missing from inputs: {names}")
        del nodes

    # -- optimiser ------------------------------------------------------------------------------
    @property
    def optimizer(self) -> Any:
        """The optimiser :meth:`train_step` calls (bound to :attr:`params` when set)."""
        return self._optimizer

    @optimizer.setter
    def optimizer(self, optimizer: Any) -> None:
        self._optimizer = optimizer
        if optimizer is not None:
            bind_optimizer(optimizer, self._weights())

    def _weights(self) -> list[Parameter]:
        """What the optimiser is bound to: the weights trained now and the frozen ones (which
        it skips), so that freezing and unfreezing keep every parameter's optimiser state."""
        chosen = self._everything if self._chosen is None else self._chosen
        return [p for p in chosen if p.trainable or p.frozen]

    def optimizers(self) -> dict[str, Any]:
        """Every optimiser by name (saved in checkpoints): ``{"optimizer": ...}`` here."""
        return {} if self._optimizer is None else {"optimizer": self._optimizer}

    # -- phases ---------------------------------------------------------------------------------
    def train(self) -> Model:
        """Train phase (dropout drops, batch norm uses batch statistics); returns ``self``."""
        self.graph.train()
        return self

    def eval(self) -> Model:
        """Eval phase; returns ``self``."""
        self.graph.eval()
        return self

    def start_epoch(self, epoch: int) -> None:
        """Restart the graph's random generator from ``(seed, epoch)``: dropout masks depend
        only on the seed, the epoch and the step (and the rank, in a data-parallel run), so a
        resumed run draws what an uninterrupted one would have."""
        words = [self.seed, epoch, *self._rank_words()]
        seed = int(np.random.SeedSequence(words).generate_state(1)[0])
        self.graph.state.rng = self.xp.random.default_rng(seed)

    def _rank_words(self) -> list[int]:
        """Seed words that give each rank of a data-parallel run its own random streams
        (dropout masks, noise); none outside one, so a single process draws as before."""
        sync = self.data_parallel
        if sync is None or sync.world_size == 1:
            return []
        return [_RANK_SEED_TAG, int(sync.rank)]

    def _sync_gradients(self, params: Sequence[Parameter], batch: Batch) -> None:
        """Average the gradients of ``params`` over the ranks of a data-parallel run (weighted
        by each rank's examples in ``batch``); nothing outside one."""
        sync = self.data_parallel
        if sync is not None:
            sync.reduce(params, int(batch[0].shape[0]))

    # -- steps ----------------------------------------------------------------------------------
    def _fill(self, batch: Batch) -> dict[Any, Any]:
        # a dict of this call's own: steps in other threads (evaluate, test_step) never see
        # one another's batches
        feeds = dict.fromkeys(self._feeds)
        if len(batch) != len(self.inputs):
            raise ValueError(
                f"Model: a batch of {len(batch)} arrays for {len(self.inputs)} inputs "
                f"({', '.join(p.describe() for p in self.inputs)}); give exactly one array per "
                "input, in that order"
            )
        for placeholder, value in zip(self.inputs, batch):
            if placeholder in feeds:
                feeds[placeholder] = value
        return feeds

    def check_data(self, *arrays: Any) -> None:
        """Check whole host arrays, in the order of :attr:`inputs`, before training on them:
        class labels and indices (the ids an embedding looks up) in range and of an integer
        dtype (``fit`` calls it on an in-memory feed's arrays, so a bad label or id is reported
        before any parameter changes, on every backend)."""
        graph = self.graph
        slots = {id(node): i for i, node in graph._placeholders}
        for placeholder, value in zip(self.inputs, arrays):
            i = slots.get(id(placeholder))
            if i is None or not isinstance(value, np.ndarray):
                continue
            if i in graph.label_checks or i in graph.index_checks:
                check_feed_dtype(placeholder, value)
            if i in graph.label_checks:
                check_labels(placeholder, value, *graph.label_checks[i])
            if i in graph.index_checks:
                check_indices(placeholder, value, *graph.index_checks[i])

    def forward(self, *batch: Any) -> list[Any]:
        """Loss and metrics (backend scalars) for one batch, keeping what backward needs."""
        if self._trainable_version != trainable_version():
            self._follow_freezing()
        return self.graph.forward(self._fill(batch))  # type: ignore[no-any-return]

    def backward(
        self, *, accumulate: bool = False, scale: float | None = None
    ) -> dict[Parameter, Any]:
        """Gradients of the loss of the last :meth:`forward` (in the train phase), stored in
        each parameter's ``grad`` and returned by parameter: PyTorch's ``loss.backward()``.

        Unlike PyTorch, a backward replaces the last one's gradients; ``accumulate=True`` adds
        to them instead (micro-batches: ``grad`` becomes the sum since :meth:`zero_grad`), and
        ``scale`` multiplies this backward's gradients (``scale=1/4`` for the mean of four
        micro-batches, PyTorch's ``(loss / 4).backward()``). Then ``model.optimizer.step()``
        applies them. A model with loss scaling (``precision="mixed_float16"``) gets unscaled
        gradients here; :meth:`train_step` is what scales.
        """
        if self._trainable_version != trainable_version():
            self._follow_freezing()
        seed = None
        if scale is not None:
            if isinstance(scale, bool) or not isinstance(scale, int | float):
                raise TypeError(f"backward: scale must be a number, got {scale!r}")
            seed = self.xp.asarray(float(scale), dtype=self.loss.dtype)
        return self.graph.backward(seed, accumulate=accumulate)  # type: ignore[return-value]

    def zero_grad(self) -> None:
        """Drop every gradient (each parameter's ``grad`` becomes ``None``), PyTorch's
        ``optimizer.zero_grad()``: the start of a run of ``backward(accumulate=True)``."""
        self.graph.clear_gradients()

    def gradients(
        self, *batch: Any, accumulate: bool = False, scale: float | None = None
    ) -> dict[Parameter, Any]:
        """Gradients of the loss for one batch (also stored in each parameter's ``grad``);
        ``accumulate`` and ``scale`` as for :meth:`backward`."""
        self.forward(*batch)
        return self.backward(accumulate=accumulate, scale=scale)

    def loss_and_gradients(
        self, *batch: Any, accumulate: bool = False, scale: float | None = None
    ) -> tuple[list[Any], dict[Parameter, Any]]:
        """The loss and metrics (backend scalars, as :meth:`forward` returns them) and the
        gradients (as :meth:`backward`) for one batch, from one call: JAX's
        ``value_and_grad``, PyTorch's ``loss = ...; loss.backward()``."""
        values = self.forward(*batch)
        return values, self.backward(accumulate=accumulate, scale=scale)

    def parameters(self) -> Iterator[Parameter]:
        """Every weight of the model, frozen ones too, as PyTorch's ``module.parameters()``
        (not state such as batch-norm statistics; :attr:`params` is what trains now)."""
        return (p for p in self._everything if p._trainable)

    def named_parameters(self) -> Iterator[tuple[str, Parameter]]:
        """``(name, parameter)`` for every weight, as PyTorch's ``named_parameters()``; the
        names are the state dict's (``res_block/conv1/weight``)."""
        return ((str(p.name), p) for p in self.parameters())

    def to(self, backend: Any, device: Any = None) -> Model:
        """Move the model to another backend or device: ``model.to("opencl")``,
        ``model.to("cuda", 1)`` (or PyTorch's ``"cuda:1"``; ``"cpu"`` is the NumPy backend)
        or ``model.to(xp)`` (a namespace), as PyTorch's ``module.to(device)``. Parameters, buffers and the optimisers' state (Adam's moments,
        step counts) move, through the host; the model's graphs are compiled again there. A
        graph elsewhere that still uses these parameters raises
        :class:`arraycore.BackendMismatchError` naming the parameter at its next run. Feed
        it host (NumPy) arrays or arrays of the new backend. Returns ``self``."""
        import arraycore

        if isinstance(backend, str):  # PyTorch's device strings: "cpu" is the host, "cuda:1"
            name, _, index = backend.partition(":")
            if index:
                if device is not None:
                    raise TypeError(f"Model.to: {backend!r} names the device; drop device=")
                try:
                    device = int(index)
                except ValueError:
                    raise TypeError(f"Model.to: no device index in {backend!r}") from None
            backend = "numpy" if name == "cpu" else name
        xp = arraycore.namespace(backend, device) if isinstance(backend, str) else backend
        if not hasattr(xp, "__array_namespace_info__") or not hasattr(xp, "asarray"):
            raise TypeError(
                f"Model.to: give a backend name ('numpy', 'opencl', 'cuda') or an arraycore "
                f"namespace, got {backend!r}"
            )
        if device is not None and not isinstance(backend, str):
            raise TypeError("Model.to: device= goes with a backend name, not a namespace")
        if xp is self.xp:
            return self
        if getattr(self, "data_parallel", None) is not None:
            raise GraphError("Model.to: a data-parallel model stays where its ranks put it")
        old = self.xp
        states = {}
        for name, opt in self.optimizers().items():
            state = opt.state_dict()
            state["arrays"] = {k: np.asarray(old.to_numpy(v)) for k, v in state["arrays"].items()}
            states[name] = state
        graphs = {k: v for k, v in vars(self).items() if isinstance(v, Graph)}
        moved: set[int] = set()
        held = (p for g in graphs.values() for _, p in g._parameters)
        for p in [*self._everything, *held]:
            if isinstance(p, Parameter) and id(p) not in moved:
                moved.add(id(p))
                p.move_to(xp)
        for attr, graph in graphs.items():
            setattr(self, attr, graph.moved_to(xp))
        generator = type(old.random.default_rng(0))
        for attr, value in list(vars(self).items()):
            if isinstance(value, generator) and value._xp is old:  # a VAE's, a GAN's noise
                setattr(self, attr, xp.random.default_rng(value.seed))
        self.xp = xp
        self._captures = {}
        for name, opt in self.optimizers().items():
            opt.load_state_dict(states[name])
            for scratch in ("_flat", "_tmp"):  # buffers of the old backend
                if isinstance(getattr(opt, scratch, None), dict):
                    getattr(opt, scratch).clear()
        return self

    def __call__(self, x: Any, *more: Any, batch_size: int = 256) -> np.ndarray:
        """``model(x)`` is :meth:`predict`: the (first) output for ``x`` as a host array, in
        the eval phase (Keras's ``model(x)``; PyTorch's ``model.eval(); model(x)``)."""
        if isinstance(x, Expr):
            raise TypeError(
                f"{type(self).__name__}(...) is called on arrays (it predicts); to build on "
                "its network's expressions, call the layers (the network) on the expression"
            )
        return self.predict(x, *more, batch_size=batch_size)

    def train_step(self, batch: Batch) -> list[Any]:
        """One update: forward, backward, optimiser step. Returns the loss and metrics as backend
        scalars (nothing is copied to the host)."""
        if self._optimizer is None:
            self._require_optimizer()
        if self._trainable_version != trainable_version():
            self._follow_freezing()
        if not self.wrt:
            raise GraphError(
                f"train_step: every parameter of this {type(self).__name__} is frozen or not "
                "trainable, so there is nothing to train; unfreeze a layer "
                "(layer.unfreeze() or layer.trainable = True)"
            )
        return self._step("train", batch)

    def _step(self, kind: str, batch: Batch) -> list[Any]:
        """A ``kind`` ("train" or "test") step on ``batch``: replayed where this backend
        captures and the step is captured, else eager."""
        captures = self._captures
        capture = captures[kind] if kind in captures else self._capture_for(kind)
        if capture is not None:
            return capture.step(batch)
        feeds = self._fill(batch)
        if kind == "train":
            return self._train_feeds(feeds, batch)
        return self._test_feeds(feeds)

    def _train_feeds(self, feeds: dict[Any, Any], batch: Batch = ()) -> list[Any]:
        """:meth:`train_step`'s work on the graph's ``feeds`` (of ``batch``, whose first array's
        rows weight a data-parallel all-reduce), call by call (what a captured step records)."""
        # the last step's gradients are not kept through this one's forward pass (PyTorch's
        # zero_grad): a step's peak holds one set of gradients, not two
        self.graph.clear_gradients()
        values = self.graph.forward(feeds)
        scaler = self.loss_scaler
        if scaler is None:
            self.graph.backward()
            self._sync_gradients(self.wrt, batch)
            self._optimizer.step()
        else:
            # an overflow in half precision is what the scaler looks for, not an error; NumPy's
            # errstate is per thread (a context variable), where warnings.catch_warnings would
            # change the filters of every thread
            with np.errstate(over="ignore", invalid="ignore"):
                self.graph.backward(scaler.seed(self.xp, self.loss.dtype))
                # still scaled: an overflow on any rank makes the sum non-finite on every
                # rank, so all of them skip the step and back off alike
                self._sync_gradients(self.wrt, batch)
            if scaler.unscale(self.xp, [p.grad for p in self.wrt]):
                self._optimizer.step()
        return values  # type: ignore[no-any-return]

    def _autocast(self, policy: Policy) -> None:
        """Rewrite the loss, metrics and outputs for ``policy`` (see
        :mod:`nnlayers.mixed_precision`); outputs come back as float32."""
        import arraycore

        xp = arraycore.namespace()
        info = xp.__array_namespace_info__()
        # float16 is listed only when asked for by name; bfloat16 where a backend has it
        found = info.dtypes(kind="float16") if policy.compute == "float16" else info.dtypes()
        if policy.compute not in found:
            raise TypeError(
                f"Model: precision {policy.name!r} needs {policy.compute}, which the "
                f"{xp.name} backend's device does not have; use a backend that has it (the NumPy "
                "backend and CUDA have float16) or precision=None"
            )
        names = list(self.metrics)
        keys = list(self.outputs)
        roots = autocast(
            [self.loss, *self.metrics.values(), *self.outputs.values()], policy.compute
        )
        self.loss = roots[0]
        self.metrics = dict(zip(names, roots[1 : 1 + len(names)], strict=True))
        outs = roots[1 + len(names) :]
        self.outputs = {
            k: astype(o, "float32") if o.dtype.kind == "f" and o.dtype.itemsize < 4 else o
            for k, o in zip(keys, outs, strict=True)
        }
        if policy.loss_scale is not None:
            self.loss_scaler = LossScaler(policy)

    def _require_optimizer(self) -> None:
        missing = [name for name, opt in self._optimizer_slots().items() if opt is None]
        if missing:
            raise GraphError(
                f"train_step: {type(self).__name__} has no {' or '.join(missing)}; set "
                f"model.{missing[0]} = nnlayers.optim.Adam(1e-3) (or pass optimizer= to the "
                "model or to fit)"
            )

    def _optimizer_slots(self) -> dict[str, Any]:
        """The optimisers a train step needs, by attribute name (None where unset)."""
        return {"optimizer": self._optimizer}

    def test_step(self, batch: Batch) -> list[Any]:
        """Loss and metrics for one batch without keeping anything for backward."""
        return self._step("test", batch)

    def _test_feeds(self, feeds: dict[Any, Any], batch: Batch = ()) -> list[Any]:
        return self.graph.forward(feeds, keep_for_backward=False)  # type: ignore[no-any-return]

    def _capture_for(self, kind: str) -> StepCapture | None:
        """The step capture of ``kind`` ("train" or "test"), or None where this backend
        captures nothing (decided once per model, in whichever thread steps first)."""
        with self._phase_lock:
            if kind in self._captures:
                return self._captures[kind]
            if self.xp.__array_namespace_info__().capture_support() is not None:
                found = None
            else:
                eager = self._train_feeds if kind == "train" else self._test_feeds
                found = StepCapture(self, kind, eager)
            self._captures[kind] = found
            return found

    @property
    def capture_status(self) -> str:
        """How this model's steps run, in a line or two: captured and replayed (how many
        graphs, replays), or eagerly and why (see :mod:`nnlayers.models.capture`)."""
        reason = self.xp.__array_namespace_info__().capture_support()
        if reason is not None:
            return f"steps run eagerly: {reason}"
        lines = []
        for kind in ("train", "test"):
            found = self._captures.get(kind)
            if found is not None:
                lines.append(found.status)
        if not lines:
            return (
                "steps will be captured after warm-up"
                if self.capture
                else "steps run eagerly: capture is off for this model"
            )
        return "; ".join(lines)

    # -- evaluation and prediction -------------------------------------------------------------
    def evaluate(self, data: Any, *more: Any, batch_size: int = 256) -> dict[str, float]:
        """Mean loss and metrics over ``data`` (a feed, or arrays ``x, y``) in the eval phase.

        The per-batch values stay on the device and come to the host once, at the end.
        """
        return self._evaluate(data, more, batch_size)

    def _evaluate(
        self, data: Any, more: Sequence[Any], batch_size: int, *, empty: str | None = None
    ) -> dict[str, float]:
        """:meth:`evaluate`; with ``empty`` (the caller, "fit: epoch 3"), data with no batch
        raises :class:`~nnlayers.errors.EmptyEpochError` rather than giving NaN."""
        means = Means(self.xp, self.metric_names)
        with self._eval_phase():
            for batch in batches(data, more, batch_size, "evaluate"):
                means.add(self.test_step(batch), int(batch[0].shape[0]))
        scores = means.result()  # NaN for every metric when there were no examples
        if empty is not None and not means.steps:
            raise EmptyEpochError(
                f"{empty}: the validation data ({type(data).__name__}) yielded no batch"
            )
        return scores

    @contextlib.contextmanager
    def _eval_phase(self) -> Iterator[None]:
        """The eval phase for the block, counted so that evaluations in several threads at
        once all run in it and the phase the model had comes back when the last one ends."""
        with self._phase_lock:
            if not self._evaluating:
                self._resume_training = self.graph.training
                self.graph.eval()
            self._evaluating += 1
        try:
            yield
        finally:
            with self._phase_lock:
                self._evaluating -= 1
                if not self._evaluating and self._resume_training:
                    self.graph.train()

    def predict_outputs(self, x: Any, *more: Any, batch_size: int = 256) -> dict[str, np.ndarray]:
        """Every named output for inputs ``x`` (host arrays), batch by batch, in the eval phase."""
        graph = self._prediction_graph()
        feeds: dict[Any, Any] = {}
        results: list[list[np.ndarray]] = [[] for _ in self.outputs]
        for batch in batches(x, more, batch_size, "predict"):
            for p, v in zip(self._predict_inputs, batch):
                feeds[p] = v
            values = graph.forward(feeds, keep_for_backward=False)
            for store, v in zip(results, values):
                store.append(np.asarray(self.xp.to_numpy(v)))
        return {
            name: np.concatenate(parts) if parts else self._empty(expr)
            for (name, expr), parts in zip(self.outputs.items(), results)
        }

    def _empty(self, expr: Expr) -> np.ndarray:
        """The prediction for no examples: zero rows of the output's trailing shape."""
        trailing = tuple(0 if d is None else d for d in expr.spec.shape[1:])
        return np.zeros((0, *trailing), dtype=expr.spec.dtype)

    def predict(self, x: Any, *more: Any, batch_size: int = 256) -> np.ndarray:
        """The (first) output for inputs ``x`` as a host array."""
        return next(iter(self.predict_outputs(x, *more, batch_size=batch_size).values()))

    def _prediction_graph(self) -> Graph:
        if self._predict_graph is None:
            if not self.outputs:
                raise GraphError("predict: this model has no outputs")
            outs = list(self.outputs.values())
            nodes = topological_order(outs)
            used = [n for n in nodes if isinstance(n, Placeholder)]
            self._predict_inputs = [p for p in self.inputs if any(p is u for u in used)]
            extra = [u for u in used if all(u is not p for p in self.inputs)]
            if extra:
                names = ", ".join(n.describe() for n in extra)
                raise GraphError(
                    f"predict: the outputs need placeholders missing from inputs: {names}"
                )
            self._predict_graph = Graph(outs, wrt=[], seed=self.seed, training=False, xp=self.xp)
        return self._predict_graph

    # -- state ----------------------------------------------------------------------------------
    def state_dict(self) -> dict[str, np.ndarray]:
        """Host copies of every parameter and buffer by name (for checkpoints)."""
        return {str(p.name): p.numpy() for p in [*self.params, *self.buffers]}

    def load_state_dict(self, state: Mapping[str, Any], *, strict: bool = True) -> Any:
        """Set every parameter and buffer from ``state``; all names and shapes are checked
        first, so a mismatch raises ``ValueError`` and changes nothing.

        ``strict=False`` loads the names both have and returns the rest as
        :class:`nnlayers.train.checkpoints.IncompatibleKeys` ``(missing, unexpected)``, as
        PyTorch does; a shape mismatch is still an error naming the parameter."""
        from ..train.checkpoints import IncompatibleKeys

        spec = self.state_dict_spec()
        missing = sorted(set(spec) - set(state))
        unexpected = sorted(set(state) - set(spec))
        if not strict:
            spec = {k: v for k, v in spec.items() if k in state}
            state = {k: v for k, v in state.items() if k in spec}
        check_state(spec, state)
        for p in [*self.params, *self.buffers]:
            if p.name in state:
                p.assign(np.asarray(state[p.name]))  # type: ignore[index]
        return IncompatibleKeys(missing, unexpected)

    def load_weights(self, path: Any, *, strict: bool = True) -> Any:
        """Load the parameters and buffers of a checkpoint (pretrained weights; no optimiser
        state, epoch or history): :func:`nnlayers.train.checkpoints.load_weights`, which with
        ``strict=False`` loads what fits by name and returns ``(missing, unexpected)``."""
        from ..train.checkpoints import load_weights

        return load_weights(self, path, strict=strict)

    def state_dict_spec(self) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """Name -> (shape, dtype) of every parameter and buffer."""
        return {
            str(p.name): (tuple(int(d or 0) for d in p.shape), p.dtype)
            for p in [*self.params, *self.buffers]
        }

    def save(self, path: Any) -> Any:
        """Write a checkpoint: parameters, buffers, optimiser state, epoch and history
        (:func:`nnlayers.train.save`). Returns the path."""
        from ..train.checkpoints import save

        return save(self, path)

    def restore(self, path: Any, *, weights_only: bool = False) -> Model:
        """Load a checkpoint written by :meth:`save` (:func:`nnlayers.train.restore`); a file
        that does not fit raises and changes nothing. Returns ``self``."""
        from ..train.checkpoints import restore

        return restore(self, path, weights_only=weights_only)  # type: ignore[no-any-return]

    def summary(self, *, depth: int = 3, print_fn: Any = print, **options: Any) -> None:
        """Print a table of the layers (output shape, parameter count) and the totals, as Keras's
        ``model.summary()``: :func:`nnlayers.summary`, which returns it (rows and totals as
        attributes) instead; ``print_fn`` receives the whole text (``logger.info``). ``options``
        as :func:`nnlayers.summary`: ``ops=True`` lists the graph op by op, ``batch_size=`` adds
        the planned memory of a step."""
        from ..summary import summary

        print_fn(str(summary(self, depth=depth, **options)))

    def __repr__(self) -> str:
        count = sum(p.size for p in self.params)
        return (
            f"<{type(self).__name__}: {len(self.params)} parameters ({count:,} values), "
            f"metrics {self.metric_names}, backend {self.xp.name!r}>"
        )


# -- helpers -----------------------------------------------------------------------------------
def _unique(items: Iterable[_T]) -> list[_T]:
    """``items`` in order, each object once (by identity: parameters, expressions)."""
    seen: set[int] = set()
    out = []
    for item in items:
        if id(item) not in seen:
            seen.add(id(item))
            out.append(item)
    return out


def unique_names(params: list[Parameter]) -> None:
    """Give every parameter a unique name, in graph order: unnamed ones become ``param``, and a
    second layer called ``affine`` becomes ``affine_1`` (its parameters ``affine_1/weight``...).
    Parts named under their parent (a block's ``self.conv1``: ``block/conv1/weight``) are
    renamed from the outermost such parent: a second ``block`` gives ``block_1/conv1/weight``.

    Names depend only on the model's structure, so rebuilding a model gives the same names and
    its checkpoints load.
    """
    taken: set[str] = set()
    renamed_owner: dict[int, str] = {}
    for p in params:
        name = p.name or "param"
        if p.owner is not None and "/" in name:
            owner = p.owner
            root = owner._naming_root() if hasattr(owner, "_naming_root") else owner
            if root is not owner and name.startswith(f"{owner.name}/"):
                prefix, leaf = root.name, name[len(root.name) + 1 :]
            else:
                root = owner
                prefix, _, leaf = name.rpartition("/")
            key = id(root)
            if key in renamed_owner:
                name = f"{renamed_owner[key]}/{leaf}"
            elif name in taken:
                k = 1
                while (
                    any(t.startswith(f"{prefix}_{k}/") for t in taken)
                    or f"{prefix}_{k}/{leaf}" in taken
                ):
                    k += 1
                renamed_owner[key] = f"{prefix}_{k}"
                name = f"{prefix}_{k}/{leaf}"
            else:
                renamed_owner.setdefault(key, prefix)
        base, k = name, 1
        while name in taken:
            name = f"{base}_{k}"
            k += 1
        taken.add(name)
        p.name = name


def check_state(
    spec: Mapping[str, tuple[tuple[int, ...], np.dtype]], state: Mapping[str, Any]
) -> None:
    """Raise ``ValueError`` listing every missing, unexpected or mis-shaped entry."""
    problems = []
    for name, (shape, _dtype) in spec.items():
        if name not in state:
            problems.append(f"missing {name!r} {shape}")
        elif tuple(np.shape(state[name])) != shape:
            problems.append(f"{name!r} has shape {tuple(np.shape(state[name]))}, expected {shape}")
    problems += [f"unexpected {name!r}" for name in state if name not in spec]
    if problems:
        raise ValueError("the saved state does not fit this model: " + "; ".join(problems))


class Means:
    """Example-weighted means of backend scalars, fetched to the host only when asked.

    ``add`` keeps the step's scalars on the device; :meth:`flush` (or :meth:`result`) stacks
    what is pending into one array per name and copies it to the host in one transfer.
    """

    def __init__(self, xp: ArrayNamespace, names: Sequence[str]) -> None:
        self.xp = xp
        self.names = list(names)
        self.totals = np.zeros(len(self.names))
        self.count = 0
        self._pending: list[list[Any]] = [[] for _ in self.names]
        self._sizes: list[int] = []
        self.last: dict[str, float] = {}
        self.steps = 0  # steps flushed so far
        #: (step, value) of the first step whose loss (the first name) was NaN or infinite
        self.first_nonfinite: tuple[int, float] | None = None

    def add(self, values: Sequence[Any], n: int) -> None:
        """Record one step's scalars for a batch of ``n`` examples (no host transfer)."""
        for store, value in zip(self._pending, values):
            store.append(value)
        self._sizes.append(n)

    def flush(self) -> None:
        """Bring the pending values to the host, all of them in one transfer."""
        if not self._sizes:
            return
        xp = self.xp
        sizes = np.asarray(self._sizes, dtype=np.float64)
        stacked = xp.stack([xp.stack(store) for store in self._pending])
        values = np.asarray(xp.to_numpy(stacked), dtype=np.float64).reshape(len(self.names), -1)
        if self.first_nonfinite is None and not np.isfinite(values[0]).all():
            k = int(np.argmin(np.isfinite(values[0])))
            self.first_nonfinite = (self.steps + k + 1, float(values[0, k]))
        self.steps += len(self._sizes)
        self.totals += values @ sizes
        self.last = dict(zip(self.names, values[:, -1].tolist()))
        for store in self._pending:
            store.clear()
        self.count += int(sizes.sum())
        self._sizes.clear()

    @property
    def pending(self) -> int:
        """Steps recorded since the last flush."""
        return len(self._sizes)

    def result(self) -> dict[str, float]:
        """The means so far, by name."""
        self.flush()
        if self.count == 0:
            return {name: float("nan") for name in self.names}
        return dict(zip(self.names, (self.totals / self.count).tolist()))


def bind_optimizer(optimizer: Any, params: list[Parameter]) -> None:
    """Give ``optimizer`` the model's parameters unless it was made with its own."""
    bind = getattr(optimizer, "bind", None)
    if bind is not None:
        bind(params)


def batches(
    data: Any, more: Sequence[Any], batch_size: int, who: str = "predict"
) -> Iterator[Batch]:
    """Batches from a feed (any iterable of array tuples, a list of batches), or from arrays
    sliced in order: ``data, *more``, a tuple ``(x, y)`` or a list of arrays. Python lists (of rows, of
    numbers) are converted to arrays, as Keras and scikit-learn do; what cannot be raises a
    ``TypeError`` naming ``who`` (the call)."""
    if more or hasattr(data, "shape"):
        arrays = [data, *more]
    elif isinstance(data, tuple) and data and not all(_is_batch(b) for b in data):
        arrays = list(data)  # (x, y): one array (or list of rows) per input
    elif isinstance(data, list) and data and all(hasattr(a, "shape") for a in data):
        arrays = list(data)  # [x, y]: one array per input
    elif isinstance(data, tuple | list) and data and all(_is_batch(b) for b in data):
        yield from (tuple(b) for b in data)  # a list of (x, y) batches, as fit takes
        return
    elif isinstance(data, tuple | list):
        arrays = [data]  # rows
    elif isinstance(data, str | bytes | Mapping) or not isinstance(data, Iterable):
        raise TypeError(
            f"{who}: cannot read examples from a {type(data).__name__}; give arrays (NumPy or "
            "the backend's), Python lists of rows, or a feed (nnlayers.Feed(x, y))"
        )
    else:
        yield from (b if isinstance(b, tuple | list) else (b,) for b in data)
        return
    arrays = [_as_examples(a, i, who) for i, a in enumerate(arrays)]
    n = int(arrays[0].shape[0])
    for i, a in enumerate(arrays[1:], 1):
        if int(a.shape[0]) != n:
            raise ValueError(
                f"{who}: argument {i} has {int(a.shape[0])} examples but argument 0 has {n}; "
                "every array needs the same length along its first axis"
            )
    for start in range(0, n, batch_size):
        yield [a[start : start + batch_size] for a in arrays]


def _is_batch(b: Any) -> bool:
    return isinstance(b, tuple | list) and bool(b) and all(hasattr(a, "shape") for a in b)


def _as_examples(a: Any, i: int, who: str) -> Any:
    """``a`` as an array with a first (example) axis: arrays as they are, Python lists of rows
    or numbers through ``np.asarray``; anything else a ``TypeError`` naming ``who``."""
    if not hasattr(a, "shape"):
        if not isinstance(a, list | tuple):
            raise TypeError(
                f"{who}: argument {i} is a {type(a).__name__}, not an array or a list of rows"
            )
        try:
            a = np.asarray(a)
        except ValueError as exc:
            raise TypeError(
                f"{who}: argument {i}, a Python {type(a).__name__}, is not rectangular "
                f"(rows of different lengths?): {exc}"
            ) from None
        if a.dtype.kind not in "biuf":
            raise TypeError(
                f"{who}: argument {i}, a Python list, holds {type(a.flat[0].item()).__name__} "
                "values, not numbers"
            )
    if len(a.shape) == 0:
        raise TypeError(f"{who}: argument {i} is a scalar; it needs a first (example) axis")
    return a
