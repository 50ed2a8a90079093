"""The n-gram drafter's corpus prior (engine/samplers/ngram_prior.py): the followers it counts, the
rows it gives, the file it is read from, and that the drafter uses it only as its fallback row."""

from __future__ import annotations

import numpy as np
import torch

from engine.samplers.drafters import NgramDrafter
from engine.samplers.ngram_prior import FILE, CorpusBigram, count, count_pairs, int_dtype, load_prior, save

V, SPECIAL = 6, [0, 1]


def test_count_keeps_each_tokens_top_followers_with_their_shares_of_all_its_followers():
    # 2 is followed by 3 three times, by 4 once, by the special 1 once (not counted); 5 by nothing
    stream = torch.tensor([2, 3, 2, 3, 2, 4, 2, 3, 2, 1, 4, 5])
    ids, probs = count(stream, V, SPECIAL, top=2)
    assert ids.shape == probs.shape == (V, 2)
    assert ids[2].tolist() == [3, 4] and probs[2].tolist() == [0.75, 0.25]
    assert ids[3].tolist()[0] == 2 and probs[3, 0] == 1.0  # 3 -> 2 three times of three
    assert probs[5].sum() == 0 and probs[1].sum() == 0  # no follower counted: a special id, the last token
    ids3, probs3 = count(stream, V, SPECIAL, top=1)
    assert ids3[2].tolist() == [3] and probs3[2].tolist() == [0.75]  # the share left by a cut: 0.25


def test_a_row_is_the_followers_shares_plus_what_they_leave_spread_as_the_fallback():
    ids = torch.tensor([[2, 3]] * V)
    probs = torch.zeros(V, 2)
    probs[4] = torch.tensor([0.5, 0.25])
    prior = CorpusBigram(ids, probs)
    rest = np.array([0, 0, 0.25, 0.25, 0.25, 0.25])
    row = prior.row(4, rest)
    assert np.allclose(row, [0, 0, 0.5625, 0.3125, 0.0625, 0.0625], rtol=0, atol=1e-15)
    assert np.array_equal(prior.row(5, rest), rest)  # no followers stored: the fallback itself


def test_the_file_round_trips_and_a_folder_without_one_or_of_another_vocabulary_gives_none(tmp_path):
    ids, probs = count(torch.tensor([2, 3, 4, 2, 3, 5]), V, SPECIAL)
    assert load_prior(tmp_path, V) is None and load_prior(None, V) is None
    save(tmp_path, ids, probs, {"domain": "test"})
    assert (tmp_path / FILE).is_file()
    prior = load_prior(tmp_path, V)
    assert prior is not None and np.array_equal(prior.ids, ids.long().numpy())
    assert load_prior(tmp_path, V + 1) is None  # counted over another tokenizer's ids: not used


def _rows(drafter, known, positions, seed=0):
    drafts, rows, _ = drafter.propose(known, positions, torch.Generator().manual_seed(seed))
    return drafts, rows


def test_the_drafter_reads_the_prior_where_the_context_has_no_bigram_and_mixes_it_where_it_has():
    ids = torch.tensor([[5, 4]] * V)
    probs = torch.zeros(V, 2)
    probs[2] = torch.tensor([0.9, 0.1])  # the corpus: 2 is followed by 5
    probs[3] = torch.tensor([0.9, 0.1])
    prior = CorpusBigram(ids, probs)
    plain = NgramDrafter(vocab_size=V, special_ids=SPECIAL)
    with_prior = NgramDrafter(vocab_size=V, special_ids=SPECIAL, prior=prior)
    known = [2, 3, None, None, 2, 4]  # the context: 2 -> 3 seen once; 3 -> ? never
    _, (p_plain,) = _rows(plain, known, [2])
    _, (p_prior,) = _rows(with_prior, known, [2])
    uni = torch.from_numpy(plain.uni_row)
    assert torch.allclose(p_plain, uni)  # no bigram for 3 in the context: the unigram
    corpus3 = torch.from_numpy(prior.row(3, plain.uni_row))
    assert torch.allclose(p_prior, corpus3) and p_prior[5] > 0.89  # ... or the corpus's followers of 3
    known2 = [2, 3, 2, None, None, 4]  # the context's own bigram 2 -> 3 leads, the prior fills the rest
    _, (row,) = _rows(with_prior, known2, [3])
    corpus2 = torch.from_numpy(prior.row(2, with_prior.uni_row))
    want = 0.8 * torch.nn.functional.one_hot(torch.tensor(3), V).double() + 0.2 * corpus2
    assert torch.allclose(row, want) and abs(float(row.sum()) - 1) < 1e-12


def test_count_pairs_keeps_the_most_frequent_pairs_with_their_top_followers():
    # pairs (2,3): followers 4, 4, 5; (3,4): 2, 2, 2; (4,2): 3, 3; the triple through the special 1 is not counted
    stream = torch.tensor([2, 3, 4, 2, 3, 4, 2, 3, 5, 3, 4, 2, 1, 2, 3])
    pairs = count_pairs(stream, V, SPECIAL, contexts=2, top=2)
    assert pairs["pair_keys"].tolist() == [2 * V + 3, 3 * V + 4]  # the two most frequent, in key order
    assert pairs["pair_ids"].tolist() == [[4, 5], [2, 0]]
    assert torch.allclose(pairs["pair_probs"].float(), torch.tensor([[2 / 3, 1 / 3], [1.0, 0.0]]), atol=1e-3)
    assert count_pairs(stream, V, SPECIAL, contexts=3)["pair_keys"].tolist() == [2 * V + 3, 3 * V + 4, 4 * V + 2]


def test_a_stored_pair_refines_its_tokens_row_and_an_unstored_one_leaves_it():
    stream = torch.tensor([2, 3, 4, 2, 3, 4, 2, 3, 5, 3, 4, 2, 1, 2, 3])
    prior = CorpusBigram(*count(stream, V, SPECIAL), count_pairs(stream, V, SPECIAL, contexts=2, top=2))
    rest = np.full(V, 1 / V)
    assert np.allclose(prior.row(3, rest), [0, 0, 0, 0, 0.75, 0.25])
    assert np.allclose(prior.row(3, rest, before=2), [0, 0, 0, 0, 2 / 3, 1 / 3], atol=1e-3)
    assert np.array_equal(prior.row(3, rest, before=5), prior.row(3, rest))  # (5, 3) is not stored
    assert abs(float(prior.row(3, rest, before=2).sum()) - 1) < 1e-12


def test_the_drafter_reads_the_pair_before_each_position_its_own_drafts_included():
    stream = torch.tensor([2, 3, 4] * 10 + [5, 3, 2] * 10)  # after (2, 3): 4; after (5, 3): 2
    prior = CorpusBigram(*count(stream, V, SPECIAL), count_pairs(stream, V, SPECIAL))
    drafter = NgramDrafter(vocab_size=V, special_ids=SPECIAL, prior=prior)
    _, (row,) = _rows(drafter, [2, 3, None, 4], [2])
    assert row[4] > 0.9  # (2, 3) before position 2
    _, (row,) = _rows(drafter, [5, 3, None, 4], [2])
    assert row[2] > 0.9  # (5, 3) before it


def _sure_prior(share: float) -> CorpusBigram:
    """Every token followed by 4 with `share` (the rest spread as the fallback row)."""
    return CorpusBigram(torch.full((V, 1), 4), torch.full((V, 1), share))


def test_confidence_is_the_product_of_the_rows_top_probabilities_at_its_edge():
    """The drafter drafts position j while prod(max row_1..j) >= confidence (>=: at the edge it drafts)."""
    known = [2, None, None, None, None, 5]
    free = NgramDrafter(vocab_size=V, special_ids=SPECIAL, prior=_sure_prior(0.7))
    drafts, rows = _rows(free, known, [1, 2, 3, 4])
    assert len(drafts) == 4  # confidence 0: every position
    tops = [float(r.max()) for r in rows]
    assert all(0.6 < t < 0.9 for t in tops)
    for c, n in ((tops[0], 1), (tops[0] * tops[1], 2), (tops[0] * tops[1] * tops[2], 3), (tops[0] + 1e-9, 0)):
        d = NgramDrafter(vocab_size=V, special_ids=SPECIAL, prior=_sure_prior(0.7), confidence=c)
        got, got_rows = _rows(d, known, [1, 2, 3, 4])
        assert len(got) == n, (c, n)  # the product, not the last row alone, and equality drafts
        assert got == drafts[:n] and all(torch.equal(a, b) for a, b in zip(got_rows, rows))


def test_the_first_position_of_a_window_reads_no_pair():
    """Position 1 has one token before it: its row is the prior's row of that token alone (position
    -1 is not the window's last token)."""
    stream = torch.tensor([5, 2, 3] * 20)  # the pair (5, 2) is followed by 3; 2 alone by 3 too
    pairs = count_pairs(torch.tensor([5, 2, 4] * 20), V, SPECIAL)  # ... but this pair table says (5, 2) -> 4
    prior = CorpusBigram(*count(stream, V, SPECIAL), pairs)
    d = NgramDrafter(vocab_size=V, special_ids=SPECIAL, prior=prior)
    _, (row,) = _rows(d, [2, None, 3, 5], [1])  # the window ends in 5: known[-1] would make the pair (5, 2)
    assert torch.allclose(row, torch.from_numpy(prior.row(2, d.uni_row)))


def test_a_round_reads_its_own_drafts_as_the_pair_before_a_position():
    """The third position of a round follows two drafts of the same round: its pair is theirs."""
    stream = torch.tensor([2, 3, 4, 5, 3] * 20)  # (2, 3) -> 4, (3, 4) -> 5, (4, 5) -> 3
    bigrams = count(torch.tensor([5, 2, 4, 2] * 40), V, SPECIAL)  # alone, 5 and 4 are followed by 2
    prior = CorpusBigram(*bigrams, count_pairs(stream, V, SPECIAL))
    d = NgramDrafter(vocab_size=V, special_ids=SPECIAL, prior=prior)
    known = [2, 3, None, None, None, 2]
    drafts, rows = _rows(d, known, [2, 3, 4])
    assert drafts[:2] == [4, 5] and rows[1][5] > 0.9  # position 3 after the pair (3, d_2 = 4): 5, not 4's 2
    assert rows[2][3] > 0.9  # position 4 after the pair of drafts (d_2, d_3) = (4, 5): 3, not 5's 2


def test_the_run_builds_its_ngram_drafter_with_the_models_prior(tmp_path):
    """`assd-ngram` reads bigram.safetensors from the run's AS-ARM folder (and none elsewhere)."""
    import types

    from engine.samplers.drafters import build_drafter

    save(tmp_path, *count(torch.tensor([2, 3] * 10), V, SPECIAL), {}, count_pairs(torch.tensor([2, 3, 4] * 10), V, SPECIAL))
    codec = types.SimpleNamespace(vocab_size=V, special_ids=SPECIAL)
    with_file = build_drafter("ngram", types.SimpleNamespace(lm=types.SimpleNamespace(codec=codec, path=tmp_path)),
                              {"confidence": 0.25})
    assert with_file.prior is not None and with_file.prior.ids[2, 0] == 3 and len(with_file.prior.pairs[0]) == 3
    assert with_file.confidence == 0.25
    without = build_drafter("ngram", types.SimpleNamespace(lm=types.SimpleNamespace(codec=codec, path=tmp_path / "x")),
                            {"confidence": 0.25})
    assert without.prior is None


def test_the_files_integers_take_the_smallest_dtype_that_holds_them():
    assert [int_dtype(n) for n in (6, 2**15, 2**15 + 1, 2**31, 2**31 + 1)] == \
        [torch.int16, torch.int16, torch.int32, torch.int32, torch.int64]
    ids, probs = count(torch.tensor([2, 5]), V, SPECIAL)
    pairs = count_pairs(torch.tensor([2, 3, 4]), V, SPECIAL)
    assert ids.dtype == pairs["pair_ids"].dtype == torch.int16 and pairs["pair_keys"].dtype == torch.int16  # 36 < 2**15
    assert probs.dtype == torch.float32 and pairs["pair_probs"].dtype == torch.float16
    assert probs[2, 0] == 1.0  # a token with one follower: all its share


def test_no_triple_through_a_special_id_is_counted_wherever_the_special_id_stands():
    pairs = count_pairs(torch.tensor([2, 3, 1, 2, 3, 4, 1, 2, 5, 0, 3, 2, 3, 4]), V, SPECIAL)
    keys = pairs["pair_keys"].tolist()
    assert 2 * V + 3 in keys and all(k // V not in SPECIAL and k % V not in SPECIAL for k in keys), keys
    at = keys.index(2 * V + 3)
    assert pairs["pair_ids"][at, 0] == 4 and float(pairs["pair_probs"][at, 0]) == 1.0  # (2, 3, 1) not counted
    assert count_pairs(torch.tensor([2, 3]), V, SPECIAL)["pair_keys"].numel() == 0  # no triple at all


def test_a_pair_keeps_its_top_followers_and_ties_go_to_the_lower_key_and_id():
    # (2, 3) -> 5, 5, 4, 2: three followers, two kept (5, then the tie of 2 and 4 goes to 2); (5, 9) and
    # (9, 2) are seen three times each: the tie for the second place goes to the lower key, (5, 9)
    stream = torch.tensor([2, 3, 5, 9, 2, 3, 5, 9, 2, 3, 4, 9, 2, 3, 2, 9, 4, 4, 5, 9, 3, 2, 5])
    w = 10
    pairs = count_pairs(stream, w, [0, 1], contexts=2, top=2)
    keys = pairs["pair_keys"].tolist()
    assert keys == sorted(keys) and 2 * w + 3 in keys and len(keys) == 2
    at = keys.index(2 * w + 3)
    assert pairs["pair_ids"][at].tolist() == [5, 2]
    assert torch.allclose(pairs["pair_probs"][at].float(), torch.tensor([0.5, 0.25]), atol=1e-3)
    assert keys == [2 * w + 3, 5 * w + 9]


def test_a_row_is_a_distribution_even_when_stored_shares_overshoot():
    """float16 shares may sum past 1: the row still sums to 1 and leaves nothing to the fallback."""
    prior = CorpusBigram(torch.tensor([[2, 3]] * V), torch.full((V, 2), 0.6),
                         {"pair_keys": torch.tensor([4 * V + 5]), "pair_ids": torch.tensor([[2, 3]]),
                          "pair_probs": torch.tensor([[0.7, 0.5]])})
    rest = np.full(V, 1 / V)
    for row, want in ((prior.row(5, rest), [0, 0, 0.5, 0.5, 0, 0]),
                      (prior.row(5, rest, before=4), [0, 0, 0.7 / 1.2, 0.5 / 1.2, 0, 0])):
        assert np.allclose(row, want), row


def test_the_file_keeps_its_header_and_a_rewritten_file_is_read_again(tmp_path):
    import os

    from safetensors import safe_open

    save(tmp_path, *count(torch.tensor([2, 3]), V, SPECIAL), {"domain": "test", "tokens": "2"})
    with safe_open(str(tmp_path / FILE), "pt") as f:
        assert f.metadata() == {"domain": "test", "tokens": "2"}
    assert load_prior(tmp_path, V).ids[2, 0] == 3
    save(tmp_path, *count(torch.tensor([2, 4]), V, SPECIAL), {})
    os.utime(tmp_path / FILE, (1e9, 1e9))  # another modification time: not the cached prior
    assert load_prior(tmp_path, V).ids[2, 0] == 4


def test_pair_keys_beyond_int16_keep_their_values():
    w = 200  # keys up to 200 * 200: past int16
    pairs = count_pairs(torch.tensor([190, 191, 192] * 3), w, [0, 1])
    assert pairs["pair_keys"].dtype == torch.int32 and 190 * w + 191 in pairs["pair_keys"].tolist()


def test_a_pair_row_scales_its_tokens_row_to_the_share_the_pair_leaves():
    """The token's row (normalised first, even when its stored shares overshoot) takes what the pair's
    followers leave: here 0.5 of it, spread as the token's own row."""
    prior = CorpusBigram(torch.tensor([[2, 3]] * V), torch.full((V, 2), 0.6),
                         {"pair_keys": torch.tensor([4 * V + 5]), "pair_ids": torch.tensor([[2, 3]]),
                          "pair_probs": torch.tensor([[0.3, 0.2]])})
    row = prior.row(5, np.full(V, 1 / V), before=4)
    assert np.allclose(row, [0, 0, 0.55, 0.45, 0, 0]), row
