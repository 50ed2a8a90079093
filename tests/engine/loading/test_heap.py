"""A fresh model load freezes the garbage collector's heap (engine.loading.loaded_model.settle_heap):
full collections then walk only what runs allocate, not torch's and transformers' objects (one of
77 ms landed inside a model call seven times in one bench run)."""

from __future__ import annotations

import gc

from engine.loading import registry
from tests.support.tiny import save_tiny_asarm


def test_a_fresh_load_puts_what_is_tracked_out_of_the_collectors_reach(tmp_path):
    folder = save_tiny_asarm(tmp_path / "tiny-asarm-heap")
    before = gc.get_freeze_count()
    held = [[1], {"a": [2]}]  # tracked objects alive at the load, in no generation the collector walks after it
    lm = registry.load(str(folder))
    assert gc.get_freeze_count() >= before + 4
    walked = [o for g in range(3) for o in gc.get_objects(generation=g)]
    assert not any(o is held or o is held[1] or o is lm.model for o in walked)
    again = registry.load(str(folder))  # the load cache's answer: nothing new to freeze
    assert again is lm
