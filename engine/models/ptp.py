"""Parallel Token Prediction (PTP) drafter head: one AS-ARM call, k *dependent* drafts.

Why a head: pipelined ASSD's k parallel rows are drawn independently and so conflict; this small
causal head reads each row's AS-ARM query state and what came before it (the previous draft in
"draft" mode, the previous uniform in "onepass" mode) and adds a residual to the AS-ARM's logits.
Draft j is an inverse-CDF draw of row j at its own uniform, so it is a function of the context and
u_1..u_j (PTP's form), and the shared speculative test keeps the output exact whatever the head
learnt; its output projection starts at zero, so an untrained head drafts as pipelined ASSD.
How it reads, trains and measures: docs/DESIGN.md §7 and §7.1, docs/MODELS.md.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn
from transformers import AutoConfig, AutoModel, PreTrainedModel

from .config import ModelConfig
from .layers import Block, init_weights


class PtpConfig(ModelConfig):
    """The PTP head's config.json (`model_type="ptp"`): the shared fields (copied from its
    teacher), the draft length it was trained for and the teacher's name."""

    model_type = "ptp"

    def __init__(self, *, num_layers: int = 2, intermediate_size: int = 768, k: int = 5, teacher: str = "",
                 rate_min: float = 0.5, window: int = 0, mode: str = "draft", prev_rank: int = 0,
                 output_layer: bool = True, **kwargs):
        self.k = k  # draft length it was trained for (any k works; rows past it are extrapolation)
        self.teacher = teacher  # name of the AS-ARM it was distilled from
        self.rate_min = rate_min  # training masks: rate ~ U(rate_min, 1) per sequence
        self.window = window  # known tokens just left of a round that the head reads as extra rows
        # "draft": row j reads the previous draft d_{j-1}, so a round takes k sequential head steps;
        # "onepass": row j reads u_{j-1} (its float bits and e_{j-1}, the AS-ARM row's token at u_{j-1}),
        # so all k rows come from one pass (docs/DESIGN.md §7.1, "The one-pass head")
        if mode not in ("draft", "onepass"):
            raise ValueError(f"PTP head mode {mode!r}: expected 'draft' or 'onepass'")
        self.mode = mode
        self.prev_rank = prev_rank  # onepass: rank of the per-row low-rank logit term on d_{j-1} (0: none)
        # onepass with a low-rank term: False drops the [V, d] output layer, so a row's residual is that term
        # alone (a CPU round then reads no output layer: docs/DESIGN.md §7.1, "A head without its output layer")
        if not output_layer and (mode != "onepass" or not prev_rank):
            raise ValueError("a PTP head without its output layer needs mode 'onepass' and a low-rank term (prev_rank > 0)")
        self.output_layer = output_layer
        super().__init__(num_layers=num_layers, intermediate_size=intermediate_size, **kwargs)

    @classmethod
    def for_teacher(cls, teacher_cfg, a) -> PtpConfig:
        """The config `train --kind ptp` builds: width, vocabulary and ids from the teacher."""
        return cls(
            vocab_size=teacher_cfg.vocab_size, hidden_size=teacher_cfg.hidden_size, num_layers=a.layers,
            num_heads=a.heads, intermediate_size=a.ffn, max_positions=teacher_cfg.max_positions,
            rope_theta=teacher_cfg.rope_theta, k=a.k, teacher=Path(a.teacher).name, rate_min=a.rate_min,
            window=a.window, mode=getattr(a, "ptp_mode", "draft"), prev_rank=getattr(a, "prev_rank", 0),
            output_layer=not getattr(a, "no_output_layer", False),
            special_token_ids=list(teacher_cfg.special_token_ids), domain=teacher_cfg.domain,
            pad_token_id=teacher_cfg.pad_token_id, bos_token_id=teacher_cfg.bos_token_id,
            mask_token_id=teacher_cfg.mask_token_id,
        )


class PtpHead(PreTrainedModel):
    """Residual logits for k draft rows from the AS-ARM's query states and the previous drafts."""

    config_class = PtpConfig
    base_model_prefix = "ptp"

    def __init__(self, config: PtpConfig):
        super().__init__(config)
        d = config.hidden_size
        self.in_proj = nn.Linear(d, d)
        self.tok_embed = nn.Embedding(config.vocab_size, d)
        self.blocks = nn.ModuleList(
            Block(d=d, heads=config.num_heads, ffn=config.intermediate_size, theta=config.rope_theta)
            for _ in range(config.num_layers)
        )
        self.norm = nn.LayerNorm(d)
        self.out = nn.Linear(d, config.vocab_size, bias=False) if config.output_layer else None
        # a window row carries a known token, not an AS-ARM state: this vector stands in for in_proj(g)
        self.window_embed = nn.Parameter(torch.zeros(d)) if config.window else None
        if config.mode == "onepass":
            self.u_embed = nn.Linear(U_BITS, d)  # the paper's embedding of u by its float32 bits (PTP §3.1)
            if config.prev_rank:  # logits_j += prev_out(prev_in[d_{j-1}] * (1 + prev_gate(norm(h_j))))
                self.prev_in = nn.Embedding(config.vocab_size, config.prev_rank)
                self.prev_gate = nn.Linear(d, config.prev_rank, bias=False)
                self.prev_out = nn.Linear(config.prev_rank, config.vocab_size, bias=False)
        self.post_init()
        self._teacher: list = []  # not a submodule: never saved, never trained

    def _init_weights(self, module: nn.Module) -> None:
        init_weights(module)
        if module is getattr(self, "out", None) or module is getattr(self, "prev_out", None):
            nn.init.zeros_(module.weight)  # untrained head = the AS-ARM's own parallel rows
        if module is getattr(self, "u_embed", None):  # a head warm-started from a draft-mode one starts where it was
            nn.init.zeros_(module.weight)

    def forward(self, hidden: torch.Tensor, prev: torch.Tensor, pos: torch.Tensor,
                window: tuple[torch.Tensor, torch.Tensor] | None = None,
                u_prev: torch.Tensor | None = None, d_prev: torch.Tensor | None = None) -> torch.Tensor:
        """hidden [B, k, d]: the AS-ARM's normed query states of the rows; prev [B, k]: the token
        decided or drafted just before each row in lattice order (mode "onepass": e_{j-1}, the
        AS-ARM parallel row's token at u_{j-1}, the known token for row 1); pos [B, k]: model
        positions; window (ids, pos) [B, W]: the known tokens just left of the round
        (config.window of them); onepass only: u_prev [B, k] the uniform u_{j-1} (0 for row 1) and
        d_prev [B, k] the real previous draft (read by the low-rank term only, when prev_rank > 0).
        Returns residual logits [B, k, V] (row j sees the window and rows <= j only)."""
        if self.config.mode == "onepass":
            resid, gate = self.draft_pass(hidden, prev, u_prev, pos, window)
            if gate is not None:
                term = self.prev_out(self.prev_in(d_prev) * gate)
                resid = term if resid is None else resid + term
            return resid
        k = hidden.shape[1]
        x = self.rows(hidden, prev)
        if window is not None:
            x, pos = torch.cat([self.window_rows(window[0]), x], 1), torch.cat([window[1], pos], 1)
        return self.out(self.norm(self._extend(x, pos, [])[:, -k:]))

    def draft_pass(self, hidden: torch.Tensor, e_prev: torch.Tensor, u_prev: torch.Tensor, pos: torch.Tensor,
                   window: tuple[torch.Tensor, torch.Tensor] | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Mode "onepass": the whole round in ONE pass (window rows and k draft rows together).
        Row j's input is in_proj(g_j) + tok_embed(e_{j-1}) + u_embed(bits(u_{j-1})): a function of
        the context and u_1..u_{j-1} only, and the attention is causal, so p_j is fixed before u_j.
        Returns the residual logits [B, k, V] (None for a head without its output layer) and the gate
        [B, k, prev_rank] of the low-rank term (None without one), which `prev_term` completes row by row
        once d_{j-1} is drawn."""
        k = hidden.shape[1]
        x = self.in_proj(hidden.to(self.norm.weight.dtype)) + self.tok_embed(e_prev)
        x = x + self.u_embed(uniform_bits(u_prev).to(x.dtype))
        if window is not None:
            x, pos = torch.cat([self.window_rows(window[0]), x], 1), torch.cat([window[1], pos], 1)
        r = self.blocks[0].rope(pos, x) if len(self.blocks) else None  # looked up once for every block
        for blk in self.blocks:  # no cache to fill: every row of the round is in this one pass
            x = blk.causal(x, r)
        h = self.norm(x[:, -k:])
        gate = 1 + self.prev_gate(h) if self.config.prev_rank else None
        return (None if self.out is None else self.out(h)), gate

    def prev_term(self, gate: torch.Tensor, prev: int) -> torch.Tensor:
        """Row j's low-rank logit term on the real previous draft d_{j-1} ([V]; gate [prev_rank] from
        `draft_pass`): a table lookup and a [V, r] matvec, not a pass of the head. d_{j-1} is a
        function of u_1..u_{j-1}, so p_j stays fixed before u_j."""
        return self.prev_out((self.prev_in.weight[prev] * gate)[None])[0]

    def rows(self, hidden: torch.Tensor, prev: torch.Tensor) -> torch.Tensor:
        """Input of draft rows: the projected AS-ARM state plus the embedding of the token before."""
        return self.in_proj(hidden.to(self.norm.weight.dtype)) + self.tok_embed(prev)

    def window_rows(self, ids: torch.Tensor) -> torch.Tensor:
        """Input of window rows: the known token's embedding plus the learned window vector."""
        return self.tok_embed(ids) + self.window_embed

    def step(self, hidden: torch.Tensor, prev: torch.Tensor, pos: torch.Tensor, cache: list) -> torch.Tensor:
        """One more row for drafting: hidden [B, 1, d], prev [B, 1], pos [B, 1]; `cache` (a list;
        `start` fills it with the window, or it is empty) keeps each block's K/V of the earlier
        rows, which never change because the attention is causal. Returns that row's residual
        logits [B, 1, V], what `forward(...)[:, j]` gives up to float rounding, at the cost of
        one row instead of j."""
        return self.out(self.norm(self._extend(self.rows(hidden, prev), pos, cache)))

    def window_at(self, first: int) -> list[int]:
        """Model positions of the window of a round whose first row is at model position `first`."""
        return window_positions(torch.tensor([first]), self.config.window)[0].tolist()

    def start(self, ids: torch.Tensor, pos: torch.Tensor, cache: list) -> None:
        """Put a round's window rows (ids, pos [B, W]) into an empty step cache."""
        self._extend(self.window_rows(ids), pos, cache)

    def _extend(self, x: torch.Tensor, pos: torch.Tensor, cache: list) -> torch.Tensor:
        """Run n new rows through the blocks; each sees the cached rows and the new rows up to
        itself. The new rows' K/V are appended to `cache` (one (K, V) per block)."""
        n = x.shape[1]
        r = self.blocks[0].rope(pos, x)  # the same positions in every block: looked up once
        past = cache[0][0].shape[2] if cache else 0
        mask = torch.ones(n, past + n, dtype=torch.bool, device=x.device).tril(past)[None].expand(x.shape[0], n, past + n)
        for i, blk in enumerate(self.blocks):
            kk, vv = blk.keys(x, r)
            if len(cache) > i:
                kk, vv = (torch.cat([c, t], 2) for c, t in zip(cache[i], (kk, vv)))
                cache[i] = (kk, vv)
            else:
                cache.append((kk, vv))
            x = blk.attend(x, r, kk, vv, mask)
        return x

    # ---- distillation -------------------------------------------------------------------------

    def attach_teacher(self, teacher: nn.Module) -> None:
        """Freeze the AS-ARM to distil from and keep it beside the head (never saved, never trained)."""
        teacher.eval()
        for prm in teacher.parameters():
            prm.requires_grad_(False)
        self._teacher[:] = [teacher]

    def training_loss(self, ids: torch.Tensor, progress: float, gen: torch.Generator) -> torch.Tensor:
        """Forward KL from the frozen teacher's rows to the drafter's rows (see module docstring)."""
        loss, _ = self.distill(ids, gen, stats=False)
        return loss

    def distill(self, ids: torch.Tensor, gen: torch.Generator, rate: float | None = None,
                stats: bool = True) -> tuple[torch.Tensor, dict]:
        """The loss and (with `stats`: reading them waits for the device, so not every step) the
        expected acceptance 1 - TV(p, q) of rows 2.. of a round, for the head and the parallel rows."""
        if not self._teacher:
            raise RuntimeError("attach_teacher(asarm) first: the PTP head distils from a frozen AS-ARM")
        teacher = self._teacher[0]
        w = self.config.window
        batch = build_rounds(ids, self.config.k, gen, rate, self.config.rate_min, w)
        with torch.no_grad():
            hid, base, target = teacher_rows(teacher, ids, batch)
        batch = {n: v.to(ids.device) for n, v in batch.items()}  # rounds are cut on the CPU
        window = (batch["win"], batch["win_pos"]) if w else None
        if self.config.mode == "onepass":
            e_prev, u_prev = teacher_forced_uniforms(base, target, batch["prev"], gen)
            resid = self(hid, e_prev, batch["qpos"], window=window, u_prev=u_prev, d_prev=batch["prev"])
        else:
            resid = self(hid, batch["prev"], batch["qpos"], window=window)
        logits = (base + resid.float()).masked_fill(teacher.special_mask(), float("-inf"))
        logp = torch.log_softmax(logits, -1)
        q = torch.softmax(target, -1)
        w = batch["train"]
        kl = torch.where(q > 0, q * (torch.log(q.clamp_min(1e-30)) - logp), 0.0).sum(-1)
        loss = (kl * w).sum() / w.sum().clamp(min=1)
        if not stats:
            return loss, {}
        with torch.no_grad():
            pb = torch.softmax(base, -1)
            later = batch["valid"] & (batch["j"] > 0)
            acc_head = 1 - 0.5 * (logp.exp() - q).abs().sum(-1)
            acc_base = 1 - 0.5 * (pb - q).abs().sum(-1)
            stats = {"accept_head": float(acc_head[later].mean()), "accept_base": float(acc_base[later].mean())}
        return loss, stats


U_BITS = 32


def uniform_bits(u: torch.Tensor) -> torch.Tensor:
    """[..., 32] the IEEE-754 bits of float32(u), lowest bit first (PTP §3.1, eq. 14); u = 0 (row 1,
    whose previous token is known) gives all zeros, so u_embed adds only its bias there."""
    x = u.to(torch.float32).contiguous().view(torch.int32)
    return ((x[..., None] >> torch.arange(U_BITS, device=u.device, dtype=torch.int32)) & 1).float()


def inverse_cdf_rows(probs: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
    """Batched F^-1_p(u) (engine.samplers.acceptance.inverse_cdf for many rows): probs [..., V], u [...]."""
    cdf = probs.cumsum(-1)
    idx = torch.searchsorted(cdf, (u * cdf[..., -1])[..., None].to(cdf.dtype), right=True)[..., 0]
    return idx.clamp_max(probs.shape[-1] - 1)


def teacher_forced_uniforms(base: torch.Tensor, target: torch.Tensor, prev: torch.Tensor,
                            gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """Training inputs of the one-pass head (the paper's teacher forcing, its appendix on the
    auxiliaries): u_{j-1} uniform within the CDF interval of the data token x_{j-1} (= prev[:, j])
    under the teacher's exact row j-1, so that token is what the inverse CDF returns at u_{j-1};
    e_{j-1} = F^-1 of the AS-ARM parallel row j-1 at u_{j-1}. Row 1 gets the known token and u = 0.
    base, target [R, k, V] logits; prev [R, k]. Returns (e_prev, u_prev) [R, k]."""
    q = torch.softmax(target[:, :-1], -1)
    tok = prev[:, 1:, None]
    hi = q.cumsum(-1).gather(-1, tok)[..., 0]
    lo = hi - q.gather(-1, tok)[..., 0]
    r = torch.rand(hi.shape, generator=gen).to(hi.device)
    u = (lo + r * (hi - lo)).clamp(1e-7, 1 - 1e-7)
    e = inverse_cdf_rows(torch.softmax(base[:, :-1], -1), u)
    e_prev = torch.cat([prev[:, :1], e], 1)
    u_prev = torch.cat([torch.zeros_like(u[:, :1]), u], 1)
    return e_prev, u_prev


def build_rounds(ids: torch.Tensor, k: int, gen: torch.Generator, rate: float | None = None,
                 rate_min: float = 0.5, window: int = 0) -> dict[str, torch.Tensor]:
    """Random masks (rate ~ U(rate_min, 1), or `rate`) cut into rounds of k masked positions in lattice order.
    With `window`, each round also gets the `window` tokens just left of its first position
    ("win", "win_pos" [rounds, window]; positions below 0 repeat BOS at 0): in lattice order
    every one of them is known when the round is drafted.

    Each round gets the context the pipelined sampler gives it: all earlier masked tokens
    ("gap 0", after a round accepted everything) or all but the last one ("gap 1", after a
    rejection, whose resampled token is unknown to the call but known to the head)."""
    b, l = ids.shape
    ids = ids.cpu()  # one transfer a batch: the rounds are cut on the host, row by row
    rate = rate_min + (1 - rate_min) * torch.rand(b, generator=gen) if rate is None else torch.full((b,), rate)
    rows: dict[str, list] = {n: [] for n in ("seq", "pos", "rank", "limit", "prev", "j", "valid", "train")}
    for s in range(b):
        masked = (torch.rand(l, generator=gen) < rate[s]).tolist()
        masked[0] = False
        mpos = [i for i in range(1, l) if masked[i]]
        if not mpos:
            mpos = [1 + int(torch.randint(l - 1, (1,), generator=gen))]
        phase = int(torch.randint(k, (1,), generator=gen))  # first round may be short
        starts = ([0] if phase else []) + list(range(phase, len(mpos), k))
        for gi, g0 in enumerate(starts):
            g1 = starts[gi + 1] if gi + 1 < len(starts) else len(mpos)
            gap = int(torch.rand((), generator=gen) < 0.7) if g0 > 0 else 0
            for j in range(k):
                r = g0 + j  # 0-based masked rank
                ok = r < g1
                rows["seq"].append(s)
                rows["pos"].append(mpos[r] if ok else 0)
                rows["rank"].append(r + 1 if ok else 1)
                rows["limit"].append(g0 + 1 - gap)
                rows["prev"].append(int(ids[s, mpos[r - 1]] if ok and r > 0 else ids[s, 0]))
                rows["j"].append(j)
                rows["valid"].append(ok)
                rows["train"].append(ok and not (j == 0 and gap == 0))  # that row is already exact
    out = {n: torch.tensor(v) for n, v in rows.items()}
    g = len(rows["seq"]) // k
    out = {n: v.view(g, k) for n, v in out.items()}
    out["train"] = out["train"].float()
    out["valid"] = out["valid"].bool()
    out["qpos"] = out["pos"]
    out["mask_pos"] = _masked_matrix(ids, out)
    if window:
        out["win_pos"] = window_positions(out["pos"][:, 0], window)
        out["win"] = ids[out["seq"][:, :1], out["win_pos"]]
    return out


def window_positions(first: torch.Tensor, window: int) -> torch.Tensor:
    """[R, window] model positions just left of each round's first position `first` [R],
    clamped at 0 (BOS): the rows `PtpHead.start` and the training rounds give the head."""
    return (first[:, None] - window + torch.arange(window)[None]).clamp_min(0)


def _masked_matrix(ids: torch.Tensor, rounds: dict) -> torch.Tensor:
    """[B, L] rank of each position (0 = visible) implied by the rounds."""
    b, l = ids.shape
    rank = torch.zeros(b, l, dtype=torch.long)
    v = rounds["valid"]
    rank[rounds["seq"][v], rounds["pos"][v]] = rounds["rank"][v]
    return rank


def teacher_rows(teacher, ids: torch.Tensor, rounds: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """One teacher pass per sequence batch: for every round row, the parallel row (context =
    the round's limit) as normed state + logits, and the exact row (context = data prefix)."""
    b, l = ids.shape
    rank = rounds["mask_pos"].to(ids.device)
    pos = torch.arange(l, device=ids.device).expand(b, l)
    g, k = rounds["seq"].shape
    # per sequence, its rounds' rows: parallel rows then exact rows
    per = [torch.nonzero(rounds["seq"][:, 0] == s).flatten() for s in range(b)]
    width = max(len(x) for x in per) * k
    qpos = torch.zeros(b, 2 * width, dtype=torch.long)
    qlim = torch.ones(b, 2 * width, dtype=torch.long)
    dest, src = [], []  # round index <- row of the flattened [b * 2 * width] query rows (parallel rows)
    for s, idx in enumerate(per):
        n = len(idx) * k
        qpos[s, :n] = rounds["pos"][idx].flatten()
        qlim[s, :n] = rounds["limit"][idx].flatten()
        qpos[s, width : width + n] = rounds["pos"][idx].flatten()
        qlim[s, width : width + n] = rounds["rank"][idx].flatten()
        dest.append(idx)
        src.append(s * 2 * width + torch.arange(0, n, k))
    moved = torch.stack([qpos, qlim]).to(ids.device)  # what the device needs: one copy, one of indices
    gather = torch.stack([torch.cat(dest), torch.cat(src)]).to(ids.device)
    logits, normed = teacher(ids, pos, rank, moved[0], moved[1], states=True)
    d, v = normed.shape[-1], logits.shape[-1]
    rows = gather[1][:, None] + torch.arange(k, device=ids.device)  # [g, k] parallel rows; exact rows at +width
    hid = torch.zeros(g, k, d, device=ids.device)
    base = torch.zeros(g, k, v, device=ids.device)
    target = torch.zeros(g, k, v, device=ids.device)
    hid[gather[0]] = normed.reshape(-1, d)[rows].float()
    base[gather[0]] = logits.reshape(-1, v)[rows].float()
    target[gather[0]] = logits.reshape(-1, v)[rows + width].float()
    special = teacher.special_mask()
    return hid, base.masked_fill(special, float("-inf")), target.masked_fill(special, float("-inf"))


AutoConfig.register("ptp", PtpConfig)
AutoModel.register(PtpConfig, PtpHead)
