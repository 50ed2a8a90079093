"""The app through its public API: launched on a free local port against tiny random models and a
temporary database, driven with gradio_client (as a visitor's browser would drive it)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.support.studio import restore_env

PREFIX, SUFFIX = "The cat <script>alert(1)</script> sat on ", " mat."
INPUT = PREFIX + "[MASK:24]" + SUFFIX


def _form(text=INPUT, sampler="assd", model="text-asarm", domain="text", k=4, temperature=1.0, seed=3):
    return (domain, model, text, sampler, k, temperature, seed, 32, 0.05, "cosine", 1)


@pytest.fixture(scope="module")
def app_url(tmp_path_factory):
    root = tmp_path_factory.mktemp("app")
    saved = {k: os.environ.get(k) for k in ("INFILL_MODEL_DIRS", "DATABASE_URL", "INFILL_UI_MIN_INTERVAL")}
    os.environ["INFILL_MODEL_DIRS"] = str(root / "models")
    os.environ["DATABASE_URL"] = f"sqlite:///{root / 'studio.db'}"
    os.environ["INFILL_UI_MIN_INTERVAL"] = "0"
    from app.stored import store as app_store
    from engine.loading import folders as model_folders
    from tools.tiny_models import launch_for_tests, make_tiny_models

    saved_assets = model_folders.ASSETS
    model_folders.ASSETS = root / "no-bundled-models"  # only the tiny models below are listed
    make_tiny_models(root / "models")
    app_store._store = None
    demo, url = launch_for_tests()
    yield url
    demo.close()
    model_folders.ASSETS = saved_assets
    if app_store._store is not None:
        app_store._store.close()
        app_store._store = None
    restore_env(saved)


@pytest.fixture()
def client(app_url):
    from gradio_client import Client

    return Client(app_url, verbose=False)


def _val(x):
    """A plain value, or the value inside a gr.update(...) dict."""
    return x.get("value") if isinstance(x, dict) and x.get("__type__") == "update" else x


def _run(client, *form):
    job = client.submit(*form, api_name="/infill")
    updates = list(job)
    return updates, job.outputs()[-1]


def test_infill_streams_rounds_and_ends_with_completed_text(client):
    updates, final = _run(client, *_form())
    status, counters, player, detail, completed, link, _ = final
    assert len(updates) >= 3, "expected one streamed update per round"
    assert "Done" in status
    assert completed.startswith(PREFIX) and completed.endswith(SUFFIX)
    assert len(completed) == len(PREFIX) + 24 + len(SUFFIX)  # char model: one character per token
    assert "[MASK" not in completed
    assert re.search(r"\?s=[A-Za-z0-9_-]{16,}$", link)
    assert "calls" in counters and "tokens/call" in counters
    assert "tv-accepted" in player and "tv-legend" in player
    assert detail["headers"][4].startswith("accept prob")
    # intermediate updates show drafts or partially decided text
    assert any("tv-masked" in u[2] for u in updates[:-1] if isinstance(u[2], str))
    # the share link appears only in the last update, once the run is stored
    assert all(u[5] == "" for u in updates[:-1])
    assert "tokens/s" in counters


def test_speedup_event_times_cached_sequential_once(app_url, monkeypatch):
    """Run's chained `speedup` event: cached sequential decoding and the run's sampler on the same
    input and seed, alternating, timed after the done frame (which it never holds back); once per
    run; never for the baseline itself; "too short to time" below a measurable amount of work."""
    from app.tabs import player
    from app.timing import speedup

    link = list(player.run_infill(*_form()))[-1]["link"]
    monkeypatch.setattr(speedup, "MIN_TIMED_SECONDS", 1e9)
    assert "too short to time" in player.speedup(link)
    monkeypatch.setattr(speedup, "MIN_TIMED_SECONDS", 0.0)
    link = list(player.run_infill(*_form()))[-1]["link"]
    line = player.speedup(link)
    assert re.search(r"vs cached sequential\*\* assd is \d+\.\d\dx (faster|slower) \(\d+\.\d\d-\d+\.\d\d\) than "
                     r"cached sequential decoding on this input \(median of [2-7] alternating pairs, range in brackets; "
                     r"per run \d+(\.\d\d s| ms) against \d+(\.\d\d s| ms)\), timed just now on this server \(", line), line
    assert player.speedup(link) == ""  # timed once; nothing to redo
    base_link = list(player.run_infill(*_form(sampler="sequential-cache")))[-1]["link"]
    assert player.speedup(base_link) == ""
    assert player.speedup("http://x/?s=no-such-run") == "" and player.speedup("") == ""


def test_user_text_is_escaped(client):
    _, final = _run(client, *_form())
    player = final[2]
    assert "<script>" not in player and "&lt;" in player
    assert final[4].startswith(PREFIX)  # the completed text keeps the input verbatim


def test_share_link_restores_the_same_session_without_running(client):
    _, final = _run(client, *_form(seed=11))
    share_id = final[5].split("?s=")[-1]
    r = client.predict(share_id, api_name="/load_share")
    domain, model, text, sampler, k, temperature, seed = map(_val, r[:7])
    assert (domain, model, text, sampler, int(k), int(seed)) == ("text", "text-asarm", INPUT, "assd", 4, 11)
    assert "Restored" in r[11]
    assert r[13] == final[2], "the replayed final view equals the live one"
    assert r[15] == final[4]
    # a second visitor running the same input and seed gets the same text (seeded, exact replay)
    _, again = _run(client, *_form(seed=11))
    assert again[4] == final[4]


def test_scrub_walks_the_stored_steps(client):
    _, final = _run(client, *_form(seed=5))
    n = int(_val(final[6]))
    assert n > 3
    start_html, _, start_counts = client.predict(0, api_name="/scrub")
    assert 'data-role="accepted"' not in start_html and 'data-role="masked"' in start_html
    end_html, _, _ = client.predict(n, api_name="/scrub")
    assert end_html == final[2]
    assert f"step 0/{n}" in start_counts


def test_compare_returns_both_sides_and_charts(client):
    r = client.predict(*_form(text="abc [MASK:12] def"), "sequential", "text-asarm", api_name="/compare")
    status, html_a, html_b, cnt_a, cnt_b, summary, fig1, fig2, link = r
    assert "Done" in status
    assert "A: assd" in html_a and "B: sequential" in html_b
    rows = summary["data"]
    assert [row[1] for row in rows] == ["assd", "sequential"]
    assert rows[1][3] == "12" and rows[1][5] == "12/12"  # sequential: one call per token
    assert float(rows[0][3]) <= 12  # ASSD: calls <= masked tokens
    import json

    curves = {t["name"]: t for t in json.loads(fig1["plot"])["data"]}
    bars = {t["name"]: t for t in json.loads(fig2["plot"])["data"]}
    assert set(curves) == {"A: assd", "B: sequential", "1 token per call"} and set(bars) == {"A: assd", "B: sequential"}
    seq, spec = curves["B: sequential"], curves["A: assd"]
    assert seq["y"][-1] == spec["y"][-1] == 12 and seq["x"] == [float(v) for v in seq["y"]]  # one call per token
    assert spec["x"][-1] == float(rows[0][3])  # the chart ends at the run's own call count
    assert sum(bars["A: assd"]["y"]) == sum(bars["B: sequential"]["y"]) == 12 and bars["B: sequential"]["y"] == [1] * 12
    sid = link.split("?s=")[-1]
    restored = client.predict(sid, api_name="/load_share")
    restored = [_val(x) for x in restored]
    assert restored[20] and "A: assd" in restored[20] and "B: sequential" in restored[21]


@pytest.mark.parametrize(
    ("form", "needle"),
    [
        (_form(text="no mask here"), "Nothing is masked"),
        (_form(text="   "), "empty"),
        (_form(text="x" * 300 + "[MASK]"), "at most 128"),
        (_form(text="[MASK:0] hi"), "at least 1 token"),
        (_form(domain="protein", model="protein-asarm", text="MKV 123 [MASK:5]"), "cannot represent"),
        (_form(k=0), "range 1 to 64"),  # raw values (preprocess=False): the page's ranges (app.run.form)
        (_form(temperature=0), "range 0.05 to 10"),
        (_form(seed=-1), "outside the range"),
        (_form(k=2.5), "whole number"),
        (_form(k=100), "range 1 to 64"),
        (_form(model="../../etc"), "No model named"),
        (_form(model="protein-asarm"), "does not fit"),
        (_form(sampler="nonsense"), "Unknown sampler"),
        (_form(text="a" * 20_001 + "[MASK:2]"), "at most 20,000"),
        (_form(text="a [MASK:" + "9" * 1000 + "] b"), "span cannot be longer"),  # (5000: over the length bound)
        (_form(domain="code", model=""), "No asarm model is available"),
    ],
)
def test_bad_inputs_come_back_as_messages(client, form, needle):
    from gradio_client.exceptions import AppError

    try:
        r = client.predict(*form, api_name="/infill")
    except AppError as e:  # Gradio's component validation: a message, shown as an error toast
        assert needle in str(e) and "Traceback" not in str(e)
        return
    status, player = r[0], r[2]
    assert needle in status and "⚠️" in status
    assert "Traceback" not in status and "Traceback" not in player


def test_bad_share_ids_come_back_as_messages(client):
    for bad in ["", "nope", "A" * 22, "<script>alert(1)</script>"]:
        r = client.predict(bad, api_name="/load_share")
        assert "⚠️" in r[11], r[11]
        assert "<script>" not in (r[13] or "")


def test_mask_selection_and_token_toggle(client):
    text, status = client.predict("hello world", 6, 11, "text-asarm", "text", api_name="/mask_selection")
    assert text == "hello [MASK:5]"
    text, status = client.predict("hello", 3, 3, "text-asarm", "text", api_name="/mask_selection")
    assert text == "hello" and "Select" in status
    text, status = client.predict("x" * 30_000, 0, 5, "text-asarm", "text", api_name="/mask_selection")
    assert len(text) == 30_000 and "at most 20,000" in status  # refused before tokenizing, text kept
    toks, _ = client.predict("ab[MASK:2]c", "text-asarm", "text", api_name="/show_tokens")
    assert _val(toks) == [2, 3]
    text, _ = client.predict([0, 2, 3], api_name="/toggle_tokens")  # same client session: its token view
    assert text == "[MASK:1]b[MASK:2]c"


def test_statistics_and_recent_sessions(client):
    _, final = _run(client, *_form(seed=1))
    sid = final[5].split("?s=")[-1]
    f1, f2, f3, table, csv_path = client.predict("all", "all", "all", api_name="/stats")
    samplers = {row[1] for row in table["data"]}
    assert "assd" in samplers
    assert Path(_val(csv_path)).read_text().startswith("model,sampler,params,metric")
    only = client.predict("text", "text-asarm", "assd", api_name="/stats")[3]["data"]
    assert {row[1] for row in only} == {"assd"}
    html = client.predict([sid, "<script>alert(1)</script>"], api_name="/recent")  # this browser's history
    assert f"?s={sid}" in html and html.count("?s=") == 1 and "<script>" not in html
    assert "<td>assd</td>" in html and "<td>text-asarm</td>" in html  # the sampler and model that ran
    assert "?s=" not in client.predict([], api_name="/recent")  # another browser sees nobody's sessions


def test_sessions_list_shows_sampler_and_model_escaped():
    from datetime import datetime

    from app.stored.share import recent_html
    from storage import SessionSummary

    row = SessionSummary(
        share_id="a" * 22,
        domain="text",
        model="<b>m</b>",
        created_at=datetime(2026, 1, 2, 3, 4),
        text_preview="in<put",
        run_count=2,
        samplers=["assd", "<img src=x onerror=alert(1)>"],
    )
    html = recent_html([row])
    assert "<th>sampler</th>" in html and "<th>model</th>" in html
    assert "assd | &lt;img src=x onerror=alert(1)&gt;" in html and "&lt;b&gt;m&lt;/b&gt;" in html
    assert "<img" not in html and "<b>" not in html and "in&lt;put" in html


def test_render_fold_roles_and_escaping():
    from app.views.render import fold, view_html
    from engine.trace import Step, StepKind

    texts = ["<b>", "\u2581", "\u2581", "\u2581"]
    steps = [
        Step(kind=StepKind.DRAFT_PASS, round=0, calls=1),
        Step(
            kind=StepKind.DRAFT,
            round=0,
            positions=[1, 2, 3],
            tokens=[5, 6, 7],
            texts=["x", "<i>", "z"],
            p=[0.5, 0.4, 0.3],
            q=[None] * 3,
            calls=1,
        ),
        Step(
            kind=StepKind.ACCEPT, round=0, positions=[1], tokens=[5], texts=["x"], p=[0.5], q=[0.5], calls=1, note="first draft"
        ),
        Step(kind=StepKind.DENSITY_PASS, round=0, calls=2),
        Step(kind=StepKind.REJECT, round=0, positions=[2], tokens=[6], texts=["<i>"], p=[0.4], q=[0.1], calls=2),
        Step(kind=StepKind.RESAMPLE, round=0, positions=[2], tokens=[8], texts=["y"], p=[None], q=[0.6], calls=2),
    ]
    st = fold(texts, [1, 2, 3], steps)
    assert st.roles == ["context", "accepted", "resampled", "drafted"]
    assert st.decided == 2 and st.calls == 2
    reject_row = [r for r in st.detail if r[5] == "rejected"][0]
    assert reject_row[4] == "0.2500"  # min(1, q/p) = 0.1/0.4
    html = view_html(st)
    assert "<b>" not in html and "&lt;b&gt;" in html and "&lt;i&gt;" in html and "tv-rej" in html
    st.apply(Step(kind=StepKind.DRAFT_PASS, round=1, calls=3))
    assert st.roles[3] == "masked"  # undecided drafts go back to masked in the next round


def test_stop_cancels_a_run_and_stores_what_it_had(client, monkeypatch):
    """Stop cancels the run (gradio_client's job.cancel() fires the cancel event the Stop button is
    wired to; /stop is the button's own handler): the run ends early, is stored as cancelled with the
    steps it made, the share link appears only then, and the scrubber/Replay keep the partial trace."""
    import time

    from app.run import streaming
    from app.stored import store as app_store

    fast = streaming.rounds

    def slow(live):  # the app runs in this process: give Stop time to arrive (tiny models are quick)
        for lv in fast(live):
            time.sleep(0.05)
            yield lv

    monkeypatch.setattr(streaming, "rounds", slow)

    job = client.submit(*_form(text="x[MASK:110]y", sampler="sequential", seed=2), api_name="/infill")
    deadline = time.time() + 60
    while len(job.outputs()) < 2 and time.time() < deadline:  # the run is under way
        time.sleep(0.01)
    assert len(job.outputs()) >= 2
    assert all(o[5] == "" for o in job.outputs()), "no share link while the run is not stored"
    assert job.cancel() is not False
    # (the buttons' states: see tests/e2e)
    status, link, scrub_max, counters, player_html, _, completed = client.predict(api_name="/stop")
    assert "Stopped after" in status and "cancelled" in status, status
    # the counters, the player and the completed text describe the same stored, partial state
    assert "Stopped after" in counters and completed == ""
    sid = link.split("?s=")[-1]
    sess = app_store.store().get_session(sid)
    run = sess.runs[0]
    assert run.status == "cancelled"
    n_sample = sum(1 for s in run.steps if s.kind.value == "sample")
    assert 0 < n_sample < 110  # stopped part way, steps kept
    n = int(_val(scrub_max))
    assert n == len(run.steps)
    # Replay after Stop plays the partial trace (not nothing)
    frames = list(client.submit(api_name="/replay"))
    assert frames and f"step {n}/{n}" in frames[-1][2]
    assert frames[-1][0].count('data-role="sampled"') == n_sample
    assert player_html.count('data-role="sampled"') == n_sample and f"step {n}/{n}" in counters
    # the link opens the partial run
    r = client.predict(sid, api_name="/load_share")
    assert "cancelled" in r[11]


def test_stop_after_the_run_finished_never_cancels_it(client):
    _, final = _run(client, *_form(seed=4))
    status = client.predict(api_name="/stop")[0]
    assert "Nothing is running" in status
    from app.stored import store as app_store

    sid = final[5].split("?s=")[-1]
    assert [r.status for r in app_store.store().get_session(sid).runs] == ["ok"]


def test_text_survives_multibyte_characters_in_every_view():
    """Byte-level tokens that hold part of a character are decoded with their neighbours: the token
    view and the player show "Zürich", never "Z\ufffd\ufffdrich"."""
    from types import SimpleNamespace

    from app.views.render import fold, view_html
    from app.views.textmap import bytes_fn, char_pieces
    from engine.inputs.tokenization import Codec
    from engine.trace import Step, StepKind

    bundled = Path(__file__).resolve().parents[2] / "assets" / "models" / "text-asarm"
    if not (bundled / "tokenizer.json").is_file():
        pytest.skip("bundled text tokenizer missing")
    lm = SimpleNamespace(codec=Codec.load(bundled))  # byte-level BPE: "ü" is two tokens
    text = "Zürich naïve 東京"
    ids = lm.codec.encode(text)
    of = bytes_fn(lm.codec)
    assert "\ufffd" in "".join(lm.codec.token_text(t) for t in ids)  # the trap is real
    pieces = char_pieces(ids, of)
    assert "".join(pieces) == text and "\ufffd" not in "".join(pieces)
    # the player: mask the 'ü' tokens, then draft and accept them back
    u = [i for i, t in enumerate(ids) if lm.codec.token_text(t) == "\ufffd"][:2]
    masked = u
    token_texts = ["\u2581" if i in masked else lm.codec.token_text(t) for i, t in enumerate(ids)]
    base = [None if i in masked else t for i, t in enumerate(ids)]
    steps = [Step(kind=StepKind.DRAFT, round=0, positions=u, tokens=[ids[i] for i in u], texts=["\ufffd", "\ufffd"], p=[0.5, 0.5],
                  q=[None, None], calls=1),
             Step(kind=StepKind.ACCEPT, round=0, positions=u, tokens=[ids[i] for i in u], texts=["\ufffd", "\ufffd"],
                  p=[0.5, 0.5], q=[0.6, 0.6], calls=2)]
    half = fold(token_texts, masked, steps[:1], ids=base, bytes_of=of)
    half.apply(Step(kind=StepKind.REJECT, round=0, positions=[u[1]], tokens=[ids[u[1]]], texts=["\ufffd"], p=[0.5], q=[0.1],
                    calls=2))
    # each lone byte of the split 'ü' (the draft and the rejected one) is named, not garbled
    assert "".join(half.display_texts()) == "Z<C3><BC>" + text[2:]
    half_html = view_html(half)
    assert "&lt;C3&gt;" in half_html and "&lt;BC&gt;" in half_html and "\ufffd" not in half_html
    st = fold(token_texts, masked, steps, ids=base, bytes_of=of)
    assert "".join(st.display_texts()) == text
    html = view_html(st)
    assert "\ufffd" not in html and "ü" in html
    assert "acceptance probability" in html and "round 1" in html  # hover: p, q, min(1, q/p), round


def test_model_card_reads_the_folder_and_says_when_quality_is_low(tmp_path, monkeypatch):
    import json

    from app.views import cards
    from engine.loading import folders as model_folders
    from tools.tiny_models import make_tiny_models

    folder = make_tiny_models(tmp_path, ("text-asarm",)) / "text-asarm"  # a folder the loader's checks accept
    (folder / "train_state.json").write_text(json.dumps({"params": 2_500_000, "steps": 100, "batch": 4,
                                                          "seq_len": 64, "minutes": 3.0, "device": "cpu"}))
    (folder / "metrics.json").write_text(json.dumps({"ppl_left_to_right": 150.0, "spelling_accuracy_95": 0.5,
                                                      "brand_new_metric": 1.25}))
    monkeypatch.setattr(model_folders, "ASSETS", tmp_path)
    monkeypatch.delenv("INFILL_MODEL_DIRS", raising=False)
    md = cards.card_markdown("text-asarm")
    assert "2.5M parameters" in md and "100 steps" in md and "3 minutes on cpu" in md
    assert "perplexity, left to right 150.0" in md and "brand_new_metric 1.25" in md
    assert "Low quality" in md and "50% of the words" in md
    (folder / "metrics.json").write_text(json.dumps({"ppl_left_to_right": 8.0, "spelling_accuracy_95": 0.99}))
    assert "Low quality" not in cards.card_markdown("text-asarm")
    (folder / "metrics.json").unlink()
    assert "none recorded" in cards.card_markdown("text-asarm")


def test_protein_paste_is_read_like_fasta():
    from app.run.inputs import normalize_protein

    seq, note = normalize_protein(">sp|P69905|HBA_HUMAN Hemoglobin\nmvlspadktn\nVKAAW[MASK:5]gkv\n")
    assert seq == "MVLSPADKTNVKAAW[MASK:5]GKV"
    assert "FASTA header" in note and "upper-cased 13 letters" in note and "removed 1 line break or space" in note
    assert normalize_protein("MKV[MASK:3]") == ("MKV[MASK:3]", "")


def test_protein_fasta_run_and_malformed_sentinel(client):
    r = client.predict(*_form(domain="protein", model="protein-asarm", sampler="sequential",
                              text=">my protein\nmkv\nla[MASK:4]g\n"), api_name="/infill")
    assert "Done" in r[0] and "FASTA header" in r[0]
    assert r[4].startswith("MKVLA") and r[4].endswith("G") and len(r[4]) == 10
    r = client.predict(*_form(text="a [MASK:abc] b"), api_name="/infill")
    assert "'[MASK:abc]' is not a span marker" in r[0]
    r = client.predict(*_form(seed=1.5), api_name="/infill")
    assert "whole number" in r[0]


def test_statistics_count_compare_runs_under_the_model_that_ran(tmp_path):
    from engine.trace import Step, StepKind
    from storage import open_store

    st = open_store(f"sqlite:///{tmp_path / 's.db'}")
    sid = st.create_session("text", "m-a | m-b", "x", {"kind": "compare"})
    steps = [Step(kind=StepKind.SAMPLE, round=0, positions=[0], tokens=[1], texts=["a"], p=[None], q=[0.5], calls=1)]
    for m in ("m-a", "m-b"):
        st.record_run(sid, "sequential", {"model": m, "temperature": 1.0}, 0, steps, completed_text="a",
                      masked_tokens=1)
    groups = st.stats()
    assert sorted(g.model for g in groups) == ["m-a", "m-b"]
    assert [g.runs for g in st.stats(model="m-b")] == [1]
    assert st.stats(model="m-a | m-b") == []
