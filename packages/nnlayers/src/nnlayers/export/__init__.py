"""Exporting models to other formats: :func:`onnx` writes the inference graph as an ONNX file.

>>> import numpy as np, nnlayers
>>> from nnlayers.layers import Affine, Sequential
>>> net = Sequential([Affine(8, activation="relu"), Affine(3)], seed=0)
>>> model = nnlayers.Classifier(net, input_shape=(4,))
>>> proto = nnlayers.export.onnx_model(model, np.zeros((2, 4)), check=True)
>>> [i.name for i in proto.graph.input], [o.name for o in proto.graph.output]
(['inputs'], ['probabilities'])
>>> nnlayers.export.onnx(model, "classifier.onnx", np.zeros((2, 4)))  # doctest: +SKIP
PosixPath('classifier.onnx')

The ``onnx`` and ``onnxruntime`` packages come with ``pip install "nnlayers[onnx]"``.
:data:`CONVERTERS` maps each op name to its converter; an op missing there raises
:class:`ExportError` naming it.
"""

from .onnx import (
    CONVERTERS,
    DEFAULT_OPSET,
    MAX_OPSET,
    MIN_OPSET,
    NOT_EXPORTED,
    ExportError,
    converter,
    onnx,
    onnx_model,
)

__all__ = [
    "CONVERTERS", "DEFAULT_OPSET", "MAX_OPSET", "MIN_OPSET", "NOT_EXPORTED", "ExportError", "converter", "onnx",
    "onnx_model",
]  # fmt: skip
