"""Issue 28, the engine / model / input half: one test per defect the probe found.

4 concurrent first loads race transformers' lazy imports; 5 one broken operator folder hides every
model; 6 corrupt checkpoints surface raw library errors or run on random weights; 7 + 9 refused
inputs without a message, misuses raising TypeError, a Hub id tried for 23 s, a 10 MB text
tokenized before "too long"; 10 a pasted share link refused, [MASK:٣] read as 3. The bad-input
sweep's tables live in tests/support/sweep_bad_inputs.py (`python -m tests.support.sweep_bad_inputs` prints them)."""

from __future__ import annotations

import json
import logging
import math
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from engine.errors import BadModelError, BadSpanLengthError, InfillError, InputTooLongError, ModelNotFoundError
from engine.loading import folders as model_folders
from engine.loading import hub, registry
from tests.support import sweep_bad_inputs as sweep
from tests.support.studio import restore_env

ROOT = Path(__file__).resolve().parents[3]
pytestmark = pytest.mark.filterwarnings("ignore:.*:UserWarning:gradio")  # the handler's toasts outside a request


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    """Tiny models listed through INFILL_MODEL_DIRS, a temporary store and the built page."""
    root = tmp_path_factory.mktemp("harden-engine")
    saved = {k: os.environ.get(k) for k in ("INFILL_MODEL_DIRS", "INFILL_UI_MIN_INTERVAL")}
    saved_assets = model_folders.ASSETS
    model = sweep.setup(root)
    from app import create
    from app.stored import store as app_store
    from storage import open_store

    saved_store = app_store._store
    app_store._store = open_store(f"sqlite:///{root / 'studio.db'}")
    demo = create()
    yield {"model": model, "demo": demo, "root": root}
    app_store._store.close()
    app_store._store, model_folders.ASSETS = saved_store, saved_assets
    restore_env(saved)


def _readable(msg: str) -> None:
    assert msg and msg.strip(), "no message"
    assert "NOT AN InfillError" not in msg and "error: None" not in msg, msg
    assert "Traceback" not in msg and "Something went wrong" not in msg, msg


# ----------------------------------------------------------------------------- 7 + 9: the sweep


@pytest.mark.parametrize(("case", "kwargs"), sweep.ENGINE_CASES, ids=[c for c, _ in sweep.ENGINE_CASES])
def test_engine_refuses_every_bad_input_with_its_own_error(studio, case, kwargs):
    msg = sweep.engine_message(studio["model"], kwargs)
    _readable(msg)
    assert "\n" not in msg


@pytest.mark.parametrize(("case", "kwargs"), sweep.SCORE_CASES, ids=[c for c, _ in sweep.SCORE_CASES])
def test_score_refuses_every_bad_input_with_its_own_error(studio, case, kwargs):
    msg = sweep.score_message(studio["model"], kwargs)
    _readable(msg)
    assert "\n" not in msg


@pytest.mark.parametrize(("case", "changes"), sweep.APP_CASES, ids=[c for c, _ in sweep.APP_CASES])
def test_the_infill_handler_answers_every_bad_input_with_a_message(studio, case, changes):
    status = sweep.handler_message(sweep.form_values(changes))
    assert status.startswith("⚠️ ") and len(status) > 10, status
    _readable(status)


HTTP_CASES = [(c, "infill", sweep.form_values(ch)) for c, ch in sweep.APP_CASES] + [
    ("3 of 11 values", "infill", ["text", "text-asarm", sweep.TEXT]),
    ("no values", "infill", []),
    ("NaN selection", "mask_selection", ["hello", math.nan, 3, "text-asarm", "text"]),
    ("'abc' selection", "mask_selection", ["hello", "abc", 3, "text-asarm", "text"]),
    ("too few to mask_selection", "mask_selection", ["hello"]),
]


@pytest.mark.parametrize(("case", "api", "values"), HTTP_CASES, ids=[c for c, _, _ in HTTP_CASES])
def test_the_http_api_never_answers_error_null(studio, case, api, values):
    """What the queue sends for a refused request: {"error": message}, never {"error": null}."""
    msg = sweep.http_message(studio["demo"], api, values)
    _readable(msg)
    assert msg.startswith("error: ") or msg.startswith("⚠️ "), msg


@pytest.mark.parametrize("seed", sweep.GOOD_SEEDS, ids=repr)
def test_digit_string_seeds_run_through_the_engine_and_the_http_api(studio, seed):
    import engine

    r = engine.infill(sweep.TEXT, model=str(studio["model"]), k=2, seed=seed)
    assert r.seed == int(str(seed).strip())
    status = sweep.http_message(studio["demo"], "infill", sweep.form_values({"seed": seed}))
    assert "⚠️" not in status and not status.startswith("error"), status


def test_the_sweep_prints_its_table(capsys, monkeypatch):
    """The script form of the sweep runs and reports every case answered (small tables, same code)."""
    monkeypatch.setattr(sweep, "ENGINE_CASES", sweep.ENGINE_CASES[:2])
    monkeypatch.setattr(sweep, "APP_CASES", sweep.APP_CASES[:2])
    saved = {k: os.environ.get(k) for k in ("INFILL_MODEL_DIRS", "INFILL_UI_MIN_INTERVAL")}
    saved_assets = model_folders.ASSETS
    from app.stored import store as app_store

    saved_store = app_store._store
    try:
        assert sweep.main() == 0
    finally:
        app_store._store, model_folders.ASSETS = saved_store, saved_assets
        restore_env(saved)
    out = capsys.readouterr().out
    assert "k must be a whole number, got 5.5." in out and "0 without" in out


# ----------------------------------------------------------------------------- 4: the cold-start race

RACE = textwrap.dedent("""
    import json, sys, threading
    from engine.loading import registry
    barrier, out, errors = threading.Barrier(8), [], []
    def go():
        barrier.wait()
        try:
            out.append(id(registry.load(sys.argv[1])))
        except Exception as e:
            errors.append(f"{type(e).__name__}: {e}")
    threads = [threading.Thread(target=go) for _ in range(8)]
    [t.start() for t in threads]
    [t.join() for t in threads]
    print(json.dumps({"errors": errors, "models": len(set(out))}))
""")


def test_eight_concurrent_first_loads_in_a_fresh_process_all_succeed(tmp_path):
    """The probe's cold start: 8 threads load a transformers-backed model (a hybrid) at once in a
    process that has not imported transformers yet. Without the load lock 7 failed with
    "cannot import name 'AutoConfig' from 'transformers'"."""
    from tests.engine.samplers.test_hybrid import save_tiny_hybrid

    folder = save_tiny_hybrid(tmp_path / "tiny-hybrid")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    res = subprocess.run([sys.executable, "-c", RACE, str(folder)], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    got = json.loads(res.stdout.strip().splitlines()[-1])
    assert got == {"errors": [], "models": 1}, got  # every thread got the one model, built once


# ----------------------------------------------------------------------------- 5 + 6: model folders


def _tiny_models(root: Path) -> dict[str, Path]:
    from tests.engine.samplers.test_hybrid import save_tiny_hybrid
    from tools.tiny_models import make_tiny_models

    make_tiny_models(root, ("text-asarm", "protein-asarm"))
    save_tiny_hybrid(root / "text-hybrid")
    return {"asarm": root / "text-asarm", "hybrid": root / "text-hybrid", "protein": root / "protein-asarm"}


def _edit_config(**changes):
    def edit(folder: Path, models) -> None:
        p = folder / "config.json"
        p.write_text(json.dumps({**json.loads(p.read_text()), **changes}))
    return edit


def _truncate(name: str, keep: float):
    def edit(folder: Path, models) -> None:
        p = folder / name
        data = p.read_bytes()
        p.write_bytes(data[: int(len(data) * keep)])
    return edit


def _write(name: str, content: bytes):
    return lambda folder, models: (folder / name).write_bytes(content)


def _weights_of(other: str):
    return lambda folder, models: shutil.copy(models[other] / "model.safetensors", folder / "model.safetensors")


# (case, base model, edit, words the one-line message must hold)
CORRUPTIONS = [
    ("truncated config.json", "asarm", _truncate("config.json", 0.5), "not valid JSON"),
    ("config.json not JSON", "asarm", _write("config.json", b"{model_type: asarm"), "not valid JSON"),
    ("config.json a list", "asarm", _write("config.json", b"[1, 2]"), "not an object"),
    ("config.json not UTF-8", "asarm", _write("config.json", b"\xff\xfe{}"), "cannot be read"),
    ("weights missing", "asarm", lambda f, m: (f / "model.safetensors").unlink(), "model.safetensors is missing"),
    ("weights truncated", "asarm", _truncate("model.safetensors", 0.6), "truncated"),
    ("weights 5 bytes", "asarm", _truncate("model.safetensors", 0.0001), "truncated"),
    ("weights garbage", "asarm", _write("model.safetensors", b"\x10\x00\x00\x00\x00\x00\x00\x00not json at all!"),
     "unreadable header"),
    ("99-layer config on 2-layer weights", "asarm", _edit_config(num_layers=99), "num_layers = 99"),
    ("99-layer hybrid config on 2-layer weights", "hybrid", _edit_config(num_layers=99), "num_layers = 99"),
    ("hybrid causal_layers 3 on 1", "hybrid", _edit_config(causal_layers=3), "causal_layers = 3"),
    ("wrong vocab_size", "asarm", _edit_config(vocab_size=120), "vocab_size 120"),
    ("wrong hidden_size", "asarm", _edit_config(hidden_size=64, num_heads=2), "hidden_size 64"),
    ("hidden_size not a multiple of heads", "asarm", _edit_config(num_heads=5), "multiple of num_heads"),
    ("bogus domain", "asarm", _edit_config(domain="klingon"), "domain 'klingon'"),
    ("domain not a string", "asarm", _edit_config(domain=7), "domain 7"),
    ("bogus dtype", "asarm", _edit_config(dtype="banana"), "dtype 'banana'"),
    ("mask_token_id outside the vocabulary", "asarm", _edit_config(mask_token_id=100000), "mask_token_id = 100000"),
    ("mask_token_id not the tokenizer's", "asarm", _edit_config(mask_token_id=5), "mask_token_id 5"),
    ("mask_token_id a string", "asarm", _edit_config(mask_token_id="2"), "mask_token_id = '2'"),
    ("max_positions 1e9", "asarm", _edit_config(max_positions=1_000_000_000), "max_positions = 1000000000"),
    ("max_positions 1e9 on a hybrid", "hybrid", _edit_config(max_positions=1_000_000_000), "max_positions"),
    ("max_positions a float", "asarm", _edit_config(max_positions=1e9), "max_positions"),
    ("hybrid positions not the config's", "hybrid", _edit_config(max_positions=50), "max_positions 50"),
    ("num_layers true", "asarm", _edit_config(num_layers=True), "num_layers = True"),
    ("an AS-ARM of no layer", "asarm", _edit_config(num_layers=0), "num_layers = 0"),  # only a PTP head may have none
    ("unknown model_type", "asarm", _edit_config(model_type="gpt2"), "'gpt2'"),
    ("no model_type", "asarm", _write("config.json", b"{}"), "model_type None"),
    ("tokenizer missing", "asarm", lambda f, m: [(f / n).unlink() for n in ("tokenizer.json", "tokenizer_config.json")],
     "tokenizer does not load"),
    ("a hybrid's weights in an AS-ARM folder", "asarm", _weights_of("hybrid"), "no embed.weight"),
    ("text model carrying protein weights", "asarm", _weights_of("protein"), "embed.weight is"),
]


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    return _tiny_models(tmp_path_factory.mktemp("tiny-originals"))


@pytest.mark.parametrize(("case", "base", "edit", "needle"), CORRUPTIONS, ids=[c[0] for c in CORRUPTIONS])
def test_a_corrupt_checkpoint_is_one_readable_line_naming_it(tmp_path, tiny_models, case, base, edit, needle):
    folder = tmp_path / f"broken-{base}"
    shutil.copytree(tiny_models[base], folder)
    edit(folder, tiny_models)
    with pytest.raises(BadModelError) as e:
        registry.load(str(folder))
    msg = str(e.value)
    assert "\n" not in msg and len(msg) < 400, msg
    assert "'broken-" in msg and needle in msg, msg


def test_a_good_checkpoint_still_loads_and_a_broken_card_only_loses_the_card(tmp_path, tiny_models):
    folder = tmp_path / "fine"
    shutil.copytree(tiny_models["hybrid"], folder)
    (folder / "metrics.json").write_text("{trunc")
    lm = registry.load(str(folder))
    assert lm.kind == "hybrid" and lm.card == {}


def test_a_broken_operator_folder_is_skipped_with_a_warning_and_the_others_stay(tmp_path, tiny_models, monkeypatch,
                                                                               caplog):
    """The probe: one folder in INFILL_MODEL_DIRS with a truncated config.json made every run say
    "No asarm model is available for the 'text' domain yet"."""
    ops = tmp_path / "operator"
    shutil.copytree(tiny_models["asarm"], ops / "good-asarm")
    shutil.copytree(tiny_models["asarm"], ops / "half-copied")
    _truncate("config.json", 0.5)(ops / "half-copied", tiny_models)
    shutil.copytree(tiny_models["asarm"], ops / "huge")
    _edit_config(max_positions=1_000_000_000)(ops / "huge", tiny_models)
    monkeypatch.setenv("INFILL_MODEL_DIRS", f"{tiny_models['hybrid']}:{ops}")
    monkeypatch.setattr(model_folders, "ASSETS", tmp_path / "no-bundled-models")
    monkeypatch.setattr(model_folders, "_warned", {})
    with caplog.at_level(logging.WARNING, logger="engine.loading.registry"):
        names = [r["name"] for r in registry.available()]
        registry.available()  # a second listing does not warn again
    assert names == ["text-hybrid", "good-asarm"]
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 2, warned
    assert any("half-copied" in w and "not valid JSON" in w for w in warned)
    assert any("huge" in w and "max_positions" in w for w in warned)
    from app import choices

    assert choices.list_models("text", "asarm") == ["good-asarm"]
    with pytest.raises(ModelNotFoundError, match="No model named 'half-copied'"):
        registry.load("half-copied", allow_paths=False)


def test_lab_training_domains_are_ones_the_loader_accepts():
    from engine.loading.checkpoint import DOMAINS
    from lab.data import TRAIN_DOMAINS

    assert set(TRAIN_DOMAINS) <= set(DOMAINS)


# ----------------------------------------------------------------------------- 9: fail fast


def test_an_unknown_hub_id_without_network_never_starts_the_retrying_download(monkeypatch):
    """Online by setting but the Hub's endpoint does not answer: the Hub is read from the local
    cache only (one probe), not tried with huggingface_hub's retries (23 s in the probe)."""
    import huggingface_hub

    calls = []

    def hf_hub_download(repo_id, filename, local_files_only=False, **kw):
        calls.append(local_files_only)
        raise huggingface_hub.errors.LocalEntryNotFoundError("not cached")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    monkeypatch.setattr(hub, "hub_reachable", lambda: False)
    hub.hub_folder.cache_clear()
    with pytest.raises(ModelNotFoundError, match="does not accept connections"):
        registry.load("someorg/not-cached-anywhere")
    assert calls == [True]


def test_the_hub_probe_says_unreachable_for_a_closed_port(monkeypatch):
    import huggingface_hub

    from tools.tiny_models import free_port

    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", f"http://127.0.0.1:{free_port()}")
    monkeypatch.setattr(hub, "_probe", {})
    assert hub.hub_reachable() is False


def test_a_10_mb_text_is_refused_before_it_is_tokenized(studio, monkeypatch):
    from engine.api import parse_for
    from engine.inputs.tokenization import Codec

    lm = registry.load(str(studio["model"]))

    def encode(self, text):
        raise AssertionError("tokenized")

    monkeypatch.setattr(Codec, "encode", encode)
    for text in ("x" * 10_000_000 + "[MASK]", "[MASK:1]" * 2_000_000):
        with pytest.raises(InputTooLongError, match="characters long"):
            parse_for(text, lm)


def test_the_length_bound_never_refuses_what_fits(studio):
    """The cheap bound is an upper bound: the longest text the model takes still parses."""
    from engine.api import parse_for

    lm = registry.load(str(studio["model"]))
    n = lm.max_tokens
    assert len(parse_for("a" * (n - 1) + "[MASK:1]", lm).tokens) == n
    assert len(parse_for("[MASK:1]" * n, lm).tokens) == n


# ----------------------------------------------------------------------------- 10: links and digits


def test_a_pasted_share_link_opens_its_session(studio):
    from app.run import form, streaming
    from app.stored import replay

    live = streaming.start(form.Form(domain="text", model="text-asarm", text=sweep.TEXT, sampler="assd", k=2, seed=1))
    for _ in streaming.rounds(live):
        pass
    for pasted in (f"http://127.0.0.1:7860/?s={live.share_id}", f"  https://studio.example/app/?x=1&s={live.share_id} ",
                   live.share_id):
        assert replay.load_session(pasted).session.share_id == live.share_id
    with pytest.raises(InfillError, match="No stored session"):
        replay.load_session("http://127.0.0.1:7860/?s=nope")


@pytest.mark.parametrize("marker", ["[MASK:٣]", "[MASK:³]", "[MASK:３]", "[MASK:3.5]", "[MASK:٣w]"])
def test_span_lengths_take_ascii_digits_only_in_the_engine_and_the_app(studio, marker):
    from app.run.inputs import check_sentinels
    from engine.api import parse_for

    lm = registry.load(str(studio["model"]))
    with pytest.raises(BadSpanLengthError, match="digits 0-9"):
        parse_for(f"a {marker} b", lm)
    with pytest.raises(InfillError, match="digits 0-9"):
        check_sentinels(f"a {marker} b")
    assert len(parse_for("a [MASK:3] b", lm).masked) == 3


# ----------------------------------------------------------------------------- the knob rule itself


@pytest.mark.parametrize(("value", "expected"), [("18446744073709551615", 2**64 - 1), (" 42 ", 42), ("5.0", 5), (7, 7),
                                                 (3.0, 3), (2**64, 2**64)])
def test_whole_numbers_are_read_exactly(value, expected):
    from engine.params import whole_number

    assert whole_number("seed", value) == expected


@pytest.mark.parametrize("value", ["9" * 41, "٣", "³", "1.5", "inf", "", "abc", True, None, math.nan, 2.0**53, [1]])
def test_everything_else_is_refused_by_name(value):
    from engine.errors import BadParameterError
    from engine.params import whole_number

    with pytest.raises(BadParameterError, match="^seed"):
        whole_number("seed", value)


def test_an_unreadable_card_is_warned_once_per_change_of_its_folder(tmp_path, monkeypatch, caplog):
    """An unreadable metrics.json logged a warning on every page event, dozens a second (issue 36)."""
    folder = tmp_path / "m"
    folder.mkdir()
    (folder / "metrics.json").write_text("{not json")
    monkeypatch.setattr(model_folders, "_warned", {})
    # pytest keeps one capture handler for the session: a server started in this process by an earlier
    # test put the app's repeat limit on it (app.serving.log_limits.install), which would count this
    # test's lines against that test's; what is checked here is the folder rule alone
    for f in list(caplog.handler.filters):
        monkeypatch.setattr(caplog.handler, "filters", [x for x in caplog.handler.filters if x is not f])
    with caplog.at_level(logging.WARNING, logger="engine.loading.registry"):
        for _ in range(50):
            assert model_folders.read_card(folder) == {}
        assert len(caplog.records) == 1 and "metrics.json unreadable" in caplog.records[0].getMessage()
        (folder / "metrics.json").write_text("{still not json, and longer")  # the operator edits it
        for _ in range(50):
            model_folders.read_card(folder)
        assert len(caplog.records) == 2
        (folder / "metrics.json").write_text('{"ok": 1}')
        assert model_folders.read_card(folder) == {"ok": 1} and len(caplog.records) == 2
