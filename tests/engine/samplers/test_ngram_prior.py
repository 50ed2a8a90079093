"""The n-gram drafter's corpus prior (engine/samplers/ngram_prior.py): the followers it counts, the
rows it gives, the file it is read from, and that the drafter uses it only as its fallback row."""

from __future__ import annotations

import torch

from engine.samplers.drafters import NgramDrafter
from engine.samplers.ngram_prior import FILE, CorpusBigram, count, count_pairs, load_prior, save

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
    rest = torch.tensor([0, 0, 0.25, 0.25, 0.25, 0.25], dtype=torch.float64)
    row = prior.row(4, rest)
    assert torch.allclose(row, torch.tensor([0, 0, 0.5625, 0.3125, 0.0625, 0.0625], dtype=torch.float64))
    assert torch.equal(prior.row(5, rest), rest)  # no followers stored: the fallback itself


def test_the_file_round_trips_and_a_folder_without_one_or_of_another_vocabulary_gives_none(tmp_path):
    ids, probs = count(torch.tensor([2, 3, 4, 2, 3, 5]), V, SPECIAL)
    assert load_prior(tmp_path, V) is None and load_prior(None, V) is None
    save(tmp_path, ids, probs, {"domain": "test"})
    assert (tmp_path / FILE).is_file()
    prior = load_prior(tmp_path, V)
    assert prior is not None and torch.equal(prior.ids, ids.long())
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
    uni = plain.uni_row
    assert torch.allclose(p_plain, uni)  # no bigram for 3 in the context: the unigram
    assert torch.allclose(p_prior, prior.row(3, uni)) and p_prior[5] > 0.89  # ... or the corpus's followers of 3
    known2 = [2, 3, 2, None, None, 4]  # the context's own bigram 2 -> 3 leads, the prior fills the rest
    _, (row,) = _rows(with_prior, known2, [3])
    want = 0.8 * torch.nn.functional.one_hot(torch.tensor(3), V).double() + 0.2 * prior.row(2, with_prior.uni_row)
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
    rest = torch.full((V,), 1 / V, dtype=torch.float64)
    assert torch.allclose(prior.row(3, rest), torch.tensor([0, 0, 0, 0, 0.75, 0.25], dtype=torch.float64))
    assert torch.allclose(prior.row(3, rest, before=2), torch.tensor([0, 0, 0, 0, 2 / 3, 1 / 3], dtype=torch.float64),
                          atol=1e-3)
    assert torch.equal(prior.row(3, rest, before=5), prior.row(3, rest))  # (5, 3) is not stored
    assert abs(float(prior.row(3, rest, before=2).sum()) - 1) < 1e-12


def test_the_drafter_reads_the_pair_before_each_position_its_own_drafts_included():
    stream = torch.tensor([2, 3, 4] * 10 + [5, 3, 2] * 10)  # after (2, 3): 4; after (5, 3): 2
    prior = CorpusBigram(*count(stream, V, SPECIAL), count_pairs(stream, V, SPECIAL))
    drafter = NgramDrafter(vocab_size=V, special_ids=SPECIAL, prior=prior)
    _, (row,) = _rows(drafter, [2, 3, None, 4], [2])
    assert row[4] > 0.9  # (2, 3) before position 2
    _, (row,) = _rows(drafter, [5, 3, None, 4], [2])
    assert row[2] > 0.9  # (5, 3) before it
