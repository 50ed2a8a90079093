"""Store.annotate_session: what is learnt about a stored session afterwards (a comparison's verdict)
is added to its spans, read back by get_session; an unknown id or spans that are not a dict are left
alone, and the spans' size limit holds."""

from __future__ import annotations

import pytest

from storage import StorageInputError, open_store


def test_a_verdict_is_kept_with_its_session(tmp_path):
    st = open_store(f"sqlite:///{tmp_path / 's.db'}")
    try:
        sid = st.create_session("text", "m", "a [MASK] b", {"kind": "compare", "views": []})
        assert st.annotate_session(sid, "verdict", "**Verdict:** A is 1.40x faster (1.20-1.60, 12 pairs)")
        spans = st.get_session(sid).spans
        assert spans["verdict"].endswith("12 pairs)") and spans["kind"] == "compare" and spans["views"] == []
        assert not st.annotate_session("no-such-id", "verdict", "x")  # not a share id at all
        assert not st.annotate_session("A" * 22, "verdict", "x")  # well formed, stored nowhere
        assert st.annotate_session(sid, "note", 3) and st.get_session(sid).spans["note"] == 3  # a second key
        assert st.get_session(sid).spans["verdict"].endswith("12 pairs)")  # the first kept
        plain = st.create_session("text", "m", "a [MASK] b", [1, 2])
        assert not st.annotate_session(plain, "verdict", "x") and st.get_session(plain).spans == [1, 2]
        with pytest.raises(StorageInputError, match=r"^spans is too large"):
            st.annotate_session(sid, "verdict", "x" * 200_000)
        assert st.get_session(sid).spans["verdict"].endswith("12 pairs)")
    finally:
        st.close()
