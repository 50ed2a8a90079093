"""The ASSD paper's conditioning of XLNet, written from the paper alone, to check the studio's adapter.

The paper (sections 4.1-4.2, figure 1, appendix C): a generation order sigma puts the prompt first,
then the decided tokens in the order they were decided, then the drafts in draft order. A token's
content may be seen only by tokens after it in sigma (the prompt tokens see each other); a query
(the distribution at a position) sees the prompt, every decided token and the drafts before the one
it asks about, and never its own position. XLNet says this with `perm_mask[i, j] = 1` (i may NOT
attend to j) and picks a query row with a one-hot `target_mapping`; the window is fed as the
authors feed it: the token ids of the window, `<mask>` where nothing is known, no `<s>` (their
encoding uses add_special_tokens=False). Only a window with nothing visible (which the authors never
run) gets one `<s>` before it, so the first query has something to attend to.

Deliberately unlike engine/samplers/oracle.py's XLNetOracle: one Hugging Face forward per query, the mask
built by two plain loops over positions, probabilities in float64 with the banned ids removed.
"""

from __future__ import annotations

import torch


def reference_rows(model, tokens: list[int], visible: list[int], mask_id: int, bos_id: int | None,
                   decided: list[tuple[int, int]], drafts: list[tuple[int, int]],
                   queries: list[tuple[int, int]], banned: set[int], line_positions: set[int] = frozenset(),
                   newline_ids: set[int] = frozenset()) -> torch.Tensor:
    """Probabilities [len(queries), V] of each query (position, e): the token at `position` given the
    prompt (`visible` positions of `tokens`), every decided token and the first e drafts. `banned`
    ids never come out; at `line_positions` (one-line code spans) neither do `newline_ids`."""
    lead = [bos_id] if not visible else []
    shift = len(lead)
    ids = lead + [tokens[i] if i in visible else mask_id for i in range(len(tokens))]
    order: dict[int, int] = {}  # window index (after the lead) -> place in sigma; prompt: 0
    for i in range(shift):
        order[i] = 0
    for i in visible:
        order[i + shift] = 0
    for r, (p, t) in enumerate(decided + drafts):
        ids[p + shift] = t
        order[p + shift] = r + 1
    size = len(ids)
    rows = []
    for pos, e in queries:
        q = pos + shift
        sees = 1 + len(decided) + e  # the query sees places < this in sigma
        perm = torch.ones(size, size)
        for i in range(size):
            own = order.get(i)
            for j in range(size):
                other = order.get(j)
                if other is None:
                    continue  # nobody sees a position that is neither known nor drafted
                if i == q:
                    ok = other < sees and j != q
                elif own is None:
                    ok = False
                elif own == 0:
                    ok = other == 0
                else:
                    ok = other < own or j == i
                perm[i, j] = 0.0 if ok else 1.0
        tmap = torch.zeros(1, 1, size)
        tmap[0, 0, q] = 1.0
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([ids]), perm_mask=perm[None], target_mapping=tmap,
                           use_mems=False).logits[0, 0].double()
        for b in banned | (newline_ids if pos in line_positions else set()):
            logits[b] = float("-inf")
        rows.append(torch.softmax(logits, dim=-1))
    return torch.stack(rows)
