"""Errors that nnlayers raises, each naming the op, the user's name for the node and the shapes."""

from __future__ import annotations


class NNLayersError(Exception):
    """Base class of the errors nnlayers raises on purpose."""


class ShapeError(NNLayersError, ValueError):
    """Shapes or dtypes that an op cannot accept, found by shape inference before anything runs."""


class FeedError(NNLayersError, ValueError):
    """A missing, unknown or mis-shaped value fed to a placeholder."""


class FeedIndexError(FeedError, IndexError):
    """Indices fed to a placeholder (an embedding's ids) outside the axis they index; an
    ``IndexError`` too, as arraycore's own check of them raises."""


class GraphError(NNLayersError, RuntimeError):
    """A graph used in a way it cannot support (backward without forward, nothing to run, ...)."""


class EmptyEpochError(NNLayersError, RuntimeError):
    """An epoch of ``fit`` that read no batch from its feed (a source that yields nothing, a
    generator used up by an earlier epoch, an empty list): raised before the epoch is counted,
    so ``model.epoch`` and the history stay as they were (Keras: "Your input ran out of
    data")."""


class NonFiniteError(NNLayersError, FloatingPointError):
    """The NaN/Inf guard found a NaN or an infinity; the message names the op that made it."""


class DistributedError(NNLayersError, RuntimeError):
    """A data-parallel run that cannot go on: ranks that disagree (models of other shapes,
    feeds of other lengths), a launcher and an MPI library that do not match, mpi4py missing."""


class FileFaultError(NNLayersError, OSError):
    """The operating system refused to read or write one of the user's files: a read-only or
    full file system, no free inodes, a file-size limit, no permission, a symbolic-link loop,
    an I/O error, a file or folder that is not there.

    An ``OSError`` like the one the OS raised, with its ``errno`` and ``strerror``, and with
    ``filename`` the path the user gave (never the temporary nnlayers wrote to); the message
    names that path, what nnlayers was doing and the OS's reason. It is also the ``OSError``
    subclass Python has for its ``errno`` (``FileNotFoundError``, ``PermissionError``,
    ``IsADirectoryError``, ``NotADirectoryError``, ...), so ``except OSError``, ``except
    FileNotFoundError`` and checks of ``errno`` work as they do for the OS's own errors.
    """

    #: The class :meth:`of` derives its per-errno classes from (itself, for a class written out)
    _fault_base: type[FileFaultError]

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if "_fault_base" not in cls.__dict__:
            cls._fault_base = cls

    def __init__(
        self, errno: int | None, strerror: str | None, filename: str | None, message: str
    ) -> None:
        super().__init__(errno, strerror, filename)
        # set again: a base before OSError in the method order (CheckpointError's ValueError)
        # would otherwise leave them unset
        self.errno, self.strerror, self.filename = errno, strerror, filename
        self.message = message

    def __str__(self) -> str:
        return self.message

    def __reduce__(self) -> tuple[object, ...]:
        return (
            _rebuild_fault,
            (self._fault_base, self.errno, self.strerror, self.filename, self.message),
        )

    @classmethod
    def of(cls, errno: int | None) -> type[FileFaultError]:
        """This class, joined with the ``OSError`` subclass Python raises for ``errno`` when
        there is one (``of(errno.ENOENT)`` is also a ``FileNotFoundError``)."""
        base = cls._fault_base
        builtin = type(OSError(errno, "")) if errno is not None else OSError
        if builtin is OSError:
            return base
        key = (base, builtin)
        if key not in _JOINED:
            names = {"__module__": base.__module__, "__qualname__": base.__qualname__}
            _JOINED[key] = type(base.__name__, (base, builtin), {**names, "_fault_base": base})
        return _JOINED[key]


FileFaultError._fault_base = FileFaultError
_JOINED: dict[tuple[type[FileFaultError], type[OSError]], type[FileFaultError]] = {}


def _rebuild_fault(
    base: type[FileFaultError],
    errno: int | None,
    strerror: str | None,
    filename: str | None,
    message: str,
) -> FileFaultError:
    return base.of(errno)(errno, strerror, filename, message)


class PrecisionWarning(UserWarning):
    """Half-precision parameters trained without a mixed-precision policy: small gradients
    flush to zero and large ones overflow (use ``Model(..., precision="mixed_float16")``)."""
