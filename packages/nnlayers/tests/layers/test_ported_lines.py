"""A line ported from PyTorch must not silently mean something else: TransformerEncoderLayer(
d_model, nhead) pasted as is (nnlayers reads d_model from the input and takes the heads first)
is refused naming both readings; MultiHeadAttention(embed_dim, num_heads) is a TypeError."""

from __future__ import annotations

import pytest

import nnlayers.expr as ex
from nnlayers.layers import MultiHeadAttention, TransformerDecoderLayer, TransformerEncoderLayer


@pytest.mark.parametrize("block", [TransformerEncoderLayer, TransformerDecoderLayer])
def test_pytorchs_positional_order_is_refused_with_the_line_to_write(block) -> None:
    x = ex.placeholder((None, 10, 128))
    layer = block(128, 4)
    with pytest.raises(ValueError, match=r"d_model=128, nhead=4.*num_heads=4"):
        layer(x) if block is TransformerEncoderLayer else layer(x, x)


def test_nnlayers_order_builds() -> None:
    x = ex.placeholder((None, 10, 128))
    assert TransformerEncoderLayer(4, 256)(x).shape == (None, 10, 128)
    assert TransformerEncoderLayer(num_heads=8)(x).shape == (None, 10, 128)


def test_multi_head_attention_takes_one_positional_size() -> None:
    with pytest.raises(TypeError):
        MultiHeadAttention(128, 4)  # type: ignore[misc]
