"""When the server has let go of a page's trace, the player's controls say so with the run's share
link, which the page still holds (the link box lives in the browser): escaped, and a link only to a
share id of this app (issue 49)."""

from __future__ import annotations

from app.tabs import playback

SID = "AAAAAAAAAAAAAAAAAAAAAA"


def test_the_lost_trace_message_carries_the_share_link():
    link = f"http://host:7860/?s={SID}"
    for out in (playback.scrub(3, None, link), playback.step_forward(1, None, link),
                playback.step_back(1, None, link), next(playback.play(0, None, "5 tokens/s", link)),
                next(playback.replay(None, "5 tokens/s", link))):
        html = out["player"]
        assert "let go of this page" in html and f'<a href="{link}">{link}</a>' in html, html


def test_without_a_link_the_plain_message_and_a_bad_link_is_never_a_link():
    assert playback.NO_TRACE[:30] in playback.scrub(0, None, "")["player"]
    assert playback.NO_TRACE[:30] in playback.scrub(0, None)["player"]  # the API's call, no link
    bad = '"><img src=x onerror=alert(1)>'
    html = playback.scrub(0, None, bad)["player"]
    assert "<img" not in html and "<a " not in html
    evil = f'javascript:alert(1)//?s={SID}'
    html = playback.scrub(0, None, evil)["player"]
    assert f'href="?s={SID}"' in html and 'href="javascript' not in html
