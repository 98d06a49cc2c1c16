"""`oar_lite.attribution.baselines`: entropy against full logits, Captum's peer."""
import pytest
import torch
import torch.nn.functional as F
from conftest import PAD, tiny_llama

import oar_lite as ol


def test_entropy_scores_match_full_logits(llama, sequence):
    ids, reasoning, answer = sequence
    with torch.no_grad():
        logp = F.log_softmax(llama(ids[None]).logits[0], -1)
    expected = -(logp.exp() * logp).sum(-1)[reasoning.start - 1 : reasoning.stop - 1]
    torch.testing.assert_close(ol.entropy_scores(llama, ids, reasoning, answer), expected.float(), rtol=1e-5, atol=1e-7)


def test_captum_peer_scores_every_reasoning_token(chars):
    model = tiny_llama(dtype=torch.float32)
    text = "12+34:2+4+0=06 1+3+0=04 A=46"  # one token per character
    ids = torch.tensor(chars(text).input_ids)
    assert len(ids) == len(text)
    reasoning, answer = slice(6, text.index("A=")), slice(len(text) - 2, len(text))
    scores = ol.token_scores("captum-ig:last", model, ids, reasoning, answer, pad_token_id=PAD, n_steps=4)
    assert scores.shape == (reasoning.stop - 6,) and torch.isfinite(scores).all() and scores.max() > 0
    with pytest.raises(ValueError, match="answer_mean"):
        ol.token_scores("captum-ig:answer_mean", model, ids, reasoning, answer, pad_token_id=PAD)
