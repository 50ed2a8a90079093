"""`--model` takes a Hugging Face model id (loaded with from_pretrained), never from an app visitor.

No network in tests: the Hub is a local folder (a tiny random XLNet saved with save_pretrained)
handed back by a stand-in for `snapshot_download`; the offline message comes from the real one
with HF_HUB_OFFLINE=1 (set by conftest) and an id that is in no cache.
"""

from __future__ import annotations

import time

import huggingface_hub
import pytest

from engine.api import InfillRun, infill, score
from engine.cli import main as engine_main
from engine.errors import IncompatibleModelsError, ModelNotFoundError
from engine.loading import hub, registry
from tests.engine.models.test_xlnet_adapter import save_tiny_xlnet

HUB_ID = "someorg/tiny-xlnet"


@pytest.fixture
def fake_hub(tmp_path, monkeypatch):
    """snapshot_download / hf_hub_download that serve HUB_ID from a local folder, recording calls."""
    folder = save_tiny_xlnet(tmp_path / "snapshot")
    calls = []

    other = tmp_path / "gpt"  # a family the studio cannot run
    other.mkdir()
    (other / "config.json").write_text('{"model_type": "gpt2"}')
    repos = {HUB_ID: folder, "someorg/gpt": other}

    def check(repo_id, local_files_only, what):
        calls.append((repo_id, local_files_only, what))
        if repo_id not in repos:
            import httpx

            response = httpx.Response(404, request=httpx.Request("GET", f"https://huggingface.co/{repo_id}"))
            raise huggingface_hub.errors.RepositoryNotFoundError(f"{repo_id} not found", response=response)
        return repos[repo_id]

    def snapshot_download(repo_id, local_files_only=False, **kw):
        return str(check(repo_id, local_files_only, "snapshot"))

    def hf_hub_download(repo_id, filename, local_files_only=False, **kw):
        return str(check(repo_id, local_files_only, filename) / filename)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", snapshot_download)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hf_hub_download)
    monkeypatch.setenv("INFILL_MODEL_IDS", "")
    for f in (hub.hub_folder, hub.hub_config):
        f.cache_clear()
    yield calls
    for f in (hub.hub_folder, hub.hub_config):
        f.cache_clear()


def test_a_hub_id_loads_with_from_pretrained_and_runs(fake_hub):
    lm = registry.load(HUB_ID)
    assert (lm.name, lm.hub_id, lm.kind, lm.model_type) == (HUB_ID, HUB_ID, "asarm", "xlnet")
    assert fake_hub == [(HUB_ID, True, "config.json"), (HUB_ID, True, "snapshot")], \
        "offline (HF_HUB_OFFLINE=1): only the local cache may be read"
    r = infill("a[MASK:2]c", model=HUB_ID, sampler="assd", k=2, seed=1)
    assert r.model == HUB_ID and len(r.text) == 4 and set(r.text) <= set("abc")
    assert r.model_path == HUB_ID and score(result=r) == pytest.approx(r.log_prob, abs=1e-9)  # reloads by id
    from tests.support.tiny import trace_log_prob

    assert score(result=r) == pytest.approx(trace_log_prob(r.trace), abs=1e-6)  # the sampler's own rows agree (float32 model)


def test_cli_takes_a_hub_id(fake_hub, capsys):
    assert engine_main(["infill", "a[MASK:2]c", "--model", HUB_ID, "--sampler", "sequential", "--json"]) == 0
    assert f'"model": "{HUB_ID}"' in capsys.readouterr().out


def test_the_app_never_loads_an_id_a_visitor_types(fake_hub, monkeypatch):
    for typed in (HUB_ID, "xlnet/xlnet-base-cased"):
        with pytest.raises(ModelNotFoundError, match="No model named"):
            InfillRun("a[MASK:2]c", model=typed, sampler="assd", allow_paths=False)
    assert fake_hub == [], "a visitor's id reached the Hub"
    monkeypatch.setenv("INFILL_MODEL_IDS", f"{HUB_ID}, other/model")  # the operator lists it: now offered
    rows = {r["name"]: r for r in registry.available()}
    assert rows[HUB_ID]["kind"] == "asarm" and rows[HUB_ID]["domain"] == "text"
    from app.choices import list_models

    assert HUB_ID in list_models("text", "asarm")
    run = InfillRun("a[MASK:2]c", model=HUB_ID, sampler="assd", allow_paths=False)
    assert run.lm.hub_id == HUB_ID


def test_an_unknown_id_online_names_what_is_available(fake_hub):
    with pytest.raises(ModelNotFoundError, match="has no public model.*Available here: .*text-asarm"):
        registry.load("someorg/no-such-model")


def test_a_family_the_studio_cannot_run_is_refused_before_its_weights_download(fake_hub):
    with pytest.raises(IncompatibleModelsError, match="'gpt2' model; the studio runs AS-ARM"):
        registry.load("someorg/gpt")
    assert [c[2] for c in fake_hub] == ["config.json"]


def test_offline_without_a_cached_copy_is_one_line_saying_what_to_do(capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    hub.hub_folder.cache_clear()
    hub_id = "infilling-studio-test/does-not-exist-4f1c"
    t0 = time.monotonic()
    with pytest.raises(ModelNotFoundError) as e:
        registry.load(hub_id)
    msg = str(e.value)
    assert "\n" not in msg and "HF_HUB_OFFLINE=1" in msg
    assert f"hf download {hub_id} --local-dir DIR" in msg and "--model DIR" in msg
    assert engine_main(["infill", "a [MASK] b", "--model", hub_id]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: Model '{hub_id}'")
    assert time.monotonic() - t0 < 60, "offline must not wait on the network"


def test_a_path_that_is_not_a_checkpoint_is_not_sent_to_the_hub(tmp_path, fake_hub, monkeypatch):
    (tmp_path / "runs" / "empty").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    for folder in (str(tmp_path / "runs" / "empty"), "runs/empty"):  # "runs/empty" also reads as an id
        with pytest.raises(ModelNotFoundError, match="No model named"):
            registry.load(folder)
    with pytest.raises(ModelNotFoundError, match="No model named"):
        registry.load("../etc/passwd")
    assert fake_hub == []
