"""Attention (SLP 9.4, eqs. 9.20-9.21): ours equals PyTorch's, and the KV cache equals the full pass."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from seqlab.errors import SeqlabError
from seqlab.nn.attention import KVCache, MultiHeadAttention, causal_mask, scaled_dot_product_attention

B, NH, T, HS = 3, 2, 7, 4
D = NH * HS


def qkv(queries: int = T, keys: int = T, seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(B, NH, queries, HS, dtype=torch.float64, generator=g)
    k = torch.randn(B, NH, keys, HS, dtype=torch.float64, generator=g)
    v = torch.randn(B, NH, keys, HS, dtype=torch.float64, generator=g)
    return q, k, v


def padding(lengths, keys: int) -> torch.Tensor:
    """(B, keys) True at padding positions: row b has lengths[b] real keys."""
    return torch.arange(keys)[None, :] >= torch.tensor(lengths)[:, None]


def test_attention_causal_mask_pattern():
    expected = torch.tensor([[1, 1, 1, 0, 0],
                             [1, 1, 1, 1, 0],
                             [1, 1, 1, 1, 1]], dtype=torch.bool)
    assert torch.equal(causal_mask(3, 5), expected)
    assert torch.equal(causal_mask(4, 4), torch.ones(4, 4, dtype=torch.bool).tril())
    assert torch.equal(causal_mask(1, 6), torch.ones(1, 6, dtype=torch.bool))


def test_attention_sdpa_equals_torch_without_mask():
    q, k, v = qkv()
    mine, weights = scaled_dot_product_attention(q, k, v)
    torch.testing.assert_close(mine, F.scaled_dot_product_attention(q, k, v), rtol=0, atol=1e-12)
    assert weights.shape == (B, NH, T, T)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, NH, T, dtype=torch.float64))
    assert (weights > 0).all()


def test_attention_sdpa_equals_torch_causal():
    q, k, v = qkv()
    mine, weights = scaled_dot_product_attention(q, k, v, causal_mask(T, T))
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    torch.testing.assert_close(mine, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, NH, T, dtype=torch.float64))
    above = ~torch.ones(T, T, dtype=torch.bool).tril()
    assert (weights[..., above] == 0).all()
    assert (weights[..., ~above] > 0).all()


def test_attention_sdpa_equals_torch_offset_causal():
    """3 new queries after 2 cached keys: the queries are the last 3 of 5 positions."""
    q, k, v = qkv(queries=3, keys=5)
    mask = causal_mask(3, 5)
    mine, weights = scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(mine, expected, rtol=0, atol=1e-12)
    assert (weights[..., ~mask] == 0).all()


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_sdpa_equals_torch_with_padding_mask(causal):
    q, k, v = qkv()
    keep = ~padding([7, 4, 2], T)[:, None, None, :]                       # (B, 1, 1, S)
    mask = keep & causal_mask(T, T) if causal else keep
    mine, weights = scaled_dot_product_attention(q, k, v, mask)
    expected = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(mine, expected, rtol=0, atol=1e-12)
    assert (weights[1, :, :, 4:] == 0).all() and (weights[2, :, :, 2:] == 0).all()
    torch.testing.assert_close(weights.sum(-1), torch.ones(B, NH, T, dtype=torch.float64))
    # padding keys change nothing: the same as attending over the real keys alone
    alone, _ = scaled_dot_product_attention(q[2:], k[2:, :, :2], v[2:, :, :2],
                                            causal_mask(T, T)[:, :2] if causal else None)
    torch.testing.assert_close(mine[2:], alone, rtol=0, atol=1e-12)


def attention_pair(causal: bool = True):
    torch.manual_seed(0)
    textbook = MultiHeadAttention(D, NH, causal=causal, impl="textbook").double().eval()
    sdpa = MultiHeadAttention(D, NH, causal=causal, impl="sdpa").double().eval()
    sdpa.load_state_dict(textbook.state_dict())
    return textbook, sdpa


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_attention_multihead_textbook_equals_sdpa(causal):
    textbook, sdpa = attention_pair(causal)
    x = torch.randn(B, T, D, dtype=torch.float64)
    with torch.no_grad():
        torch.testing.assert_close(textbook(x), sdpa(x), rtol=0, atol=1e-12)
        pad = padding([7, 5, 3], T)
        torch.testing.assert_close(textbook(x, key_padding_mask=pad), sdpa(x, key_padding_mask=pad),
                                   rtol=0, atol=1e-12)
    assert textbook.last_weights.shape == (B, NH, T, T)


def test_attention_multihead_causal_ignores_the_future():
    textbook, _ = attention_pair()
    x = torch.randn(B, T, D, dtype=torch.float64)
    changed = x.clone()
    changed[:, 4:] = torch.randn(B, T - 4, D, dtype=torch.float64)
    with torch.no_grad():
        y, y_changed = textbook(x), textbook(changed)
    torch.testing.assert_close(y[:, :4], y_changed[:, :4], rtol=0, atol=0)
    assert (y[:, 4:] - y_changed[:, 4:]).abs().min() > 0


def run_cached(attention: MultiHeadAttention, x: torch.Tensor, chunks: list[int]) -> torch.Tensor:
    cache = KVCache(num_layers=2, batch_size=B, num_heads=NH, head_size=HS, capacity=T,
                    dtype=torch.float64)
    outputs, start = [], 0
    for size in chunks:
        outputs.append(attention(x[:, start:start + size], cache, layer=1))
        cache.advance(size)
        start += size
    assert cache.length == T
    assert (cache.keys[0] == 0).all()                                   # layer 0 never written
    return torch.cat(outputs, dim=1)


@pytest.mark.parametrize("impl", ["textbook", "sdpa"])
@pytest.mark.parametrize("chunks", [[1] * T, [3, 4], [2, 1, 4], [T]], ids=["tokens", "3+4", "2+1+4", "all"])
def test_attention_kv_cache_equals_full_causal_pass(impl, chunks):
    textbook, sdpa = attention_pair()
    attention = textbook if impl == "textbook" else sdpa
    x = torch.randn(B, T, D, dtype=torch.float64)
    with torch.no_grad():
        full = attention(x)
        cached = run_cached(attention, x, chunks)
    torch.testing.assert_close(cached, full, rtol=0, atol=1e-12)


def test_attention_kv_cache_reorder_keeps_rows():
    """After reorder(index) decoding goes on as if the batch had been rows `index` all along."""
    _, attention = attention_pair()
    x = torch.randn(B, T, D, dtype=torch.float64)
    index = torch.tensor([2, 2, 0])
    cache = KVCache(1, B, NH, HS, capacity=T, dtype=torch.float64)
    with torch.no_grad():
        attention(x[:, :4], cache)
        cache.advance(4)
        cache.reorder(index)
        continued = attention(x[index, 4:], cache)
        full = attention(torch.cat([x[index, :4], x[index, 4:]], dim=1))
    torch.testing.assert_close(continued, full[:, 4:], rtol=0, atol=1e-12)


def test_attention_kv_cache_refuses_past_capacity():
    cache = KVCache(1, B, NH, HS, capacity=5)
    k = torch.randn(B, NH, 3, HS)
    cache.append(0, k, k)
    cache.advance(3)
    keys, _ = cache.append(0, k[:, :, :2], k[:, :, :2])                 # exactly full is fine
    assert keys.shape == (B, NH, 5, HS)
    cache.advance(2)
    with pytest.raises(SeqlabError, match="holds 5 positions; 6"):
        cache.append(0, k[:, :, :1], k[:, :, :1])


def test_attention_multihead_rejects_bad_options():
    with pytest.raises(SeqlabError, match="multiple of the number of heads"):
        MultiHeadAttention(10, 3)
    with pytest.raises(SeqlabError, match="unknown attention implementation"):
        MultiHeadAttention(8, 2, impl="flash")
