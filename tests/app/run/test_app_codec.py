"""The app runs from what it holds (issue 23): starting a run (Run or Compare) never loads the
model's tokenizer again from its folder, and the speed-up line's reruns take the finished run's
loaded model and masked input, never a trip through the registry; only a replay, which holds no
model, looks the tokenizer up (cached by folder)."""

from __future__ import annotations

import pytest

from tests.support.studio import TEXT, form, tiny_studio


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    with tiny_studio(tmp_path_factory.mktemp("codec")) as store:
        yield store


@pytest.fixture()
def codec_loads(monkeypatch):
    """Calls of Codec.load from now on (the byte-map cache emptied first)."""
    from app.views import token_views
    from engine.inputs.tokenization import Codec

    token_views._bytes_for_folder.cache_clear()
    calls = []
    real = Codec.load.__func__

    def counted(cls, *a, **kw):
        calls.append(a)
        return real(cls, *a, **kw)

    monkeypatch.setattr(Codec, "load", classmethod(counted))
    return calls


def test_starting_a_run_does_not_reload_the_tokenizer(studio, codec_loads):
    from app.run import form as app_form
    from app.run import streaming
    from app.tabs import compare

    app_form.prepare(form())  # the model is loaded (and cached by the registry) before counting
    codec_loads.clear()
    live = streaming.start(form())
    assert live.state.bytes_of is not None and live.state.bytes_of(live.run.mi.tokens[0])
    values = dict(zip(app_form.PUBLISHED_FIELDS, ("text", "text-asarm", TEXT, "assd", 4, 1.0, 3, 32, 0.05, "cosine", 1)))
    sid, lives = compare._prepare(values, "sequential", "text-asarm", None)  # the form by name (takes_form)
    assert all(lv.state.bytes_of is not None for lv in lives)
    assert codec_loads == []


def test_a_replay_looks_the_tokenizer_up_once(studio, codec_loads):
    from app.run import streaming
    from app.views import token_views

    live = streaming.start(form())
    codec_loads.clear()
    for _ in range(3):
        assert token_views.new_state(live.view).bytes_of is not None
    assert len(codec_loads) == 1


def test_the_speedup_reruns_take_the_models_the_run_holds(studio, monkeypatch):
    import engine.run_setup
    from app.run import streaming
    from app.timing import speedup

    live = streaming.start(form())
    for _ in streaming.rounds(live):
        pass

    def no_registry(*a, **kw):
        raise AssertionError("the rerun went through the registry")

    monkeypatch.setattr(engine.run_setup, "load", no_registry)
    for sampler in (speedup.BASELINE_SAMPLER, live.run.spec.name):
        rerun = speedup._rerun(live, sampler)
        assert rerun.lm is live.run.lm and rerun.mi is live.run.mi
