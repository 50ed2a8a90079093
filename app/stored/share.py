"""Share links (`?s=<share id>`) and the recent-sessions list: a stored session is reached only
through its unguessable id, so links carry it and the list shows only this browser's own ids."""

from __future__ import annotations

from urllib.parse import parse_qs, urlsplit

from app.views.render import esc

QUERY_KEY = "s"


def base_url(request) -> str:
    """The page's address as the visitor's browser sees it (best effort from the headers)."""
    if request is None:
        return ""
    try:
        headers = {k.lower(): v for k, v in dict(request.headers).items()}
    except Exception:
        headers = {}
    ref = headers.get("referer", "")
    if ref:
        parts = urlsplit(ref)
        if parts.scheme in ("http", "https") and parts.netloc:
            return f"{parts.scheme}://{parts.netloc}{parts.path}"
    host = headers.get("x-forwarded-host") or headers.get("host") or ""
    if not host:
        return ""
    scheme = headers.get("x-forwarded-proto", "http")
    return f"{scheme}://{host}/"


def share_link(request, share_id: str) -> str:
    """The link that reopens session `share_id` on this page ('' without an id)."""
    if not share_id:
        return ""
    return f"{base_url(request)}?{QUERY_KEY}={share_id}"


def share_id_from(request) -> str:
    """The share id in the page's own address ('' when it was opened without one)."""
    if request is None:
        return ""
    try:
        return str(dict(request.query_params).get(QUERY_KEY, "") or "")
    except Exception:
        return ""


def share_id_from_link(link: object) -> str:
    """The share id inside a share link ('' when there is none)."""
    if not isinstance(link, str) or "?" not in link:
        return ""
    return (parse_qs(urlsplit(link).query).get(QUERY_KEY) or [""])[0]


def recent_html(summaries) -> str:
    """The sessions list as an HTML table (every stored string escaped): link, id, domain, model,
    the samplers of its runs (A | B for a compare), run count, date and the start of the input."""
    if not summaries:
        return ("<p>No sessions in this browser yet. Runs you make and share links you open are listed here; "
                "the list lives in this browser only, so others see a session only through its link.</p>")
    rows = []
    for s in summaries:
        preview = s.text_preview if len(s.text_preview) <= 80 else s.text_preview[:80] + "…"
        samplers = " | ".join(getattr(s, "samplers", None) or [])
        rows.append(
            f'<tr><td><a href="?{QUERY_KEY}={esc(s.share_id)}" target="_blank" rel="noopener">open</a></td>'
            f"<td><code>{esc(s.share_id)}</code></td><td>{esc(s.domain)}</td><td>{esc(s.model)}</td>"
            f"<td>{esc(samplers)}</td><td>{s.run_count}</td><td>{esc(s.created_at.strftime('%Y-%m-%d %H:%M'))}</td>"
            f'<td style="font-family: monospace">{esc(preview)}</td></tr>'
        )
    head = ("<tr><th></th><th>share id</th><th>domain</th><th>model</th><th>sampler</th><th>runs</th>"
            "<th>created (UTC)</th><th>input</th></tr>")
    return f'<table class="tv-recent">{head}{"".join(rows)}</table>'
