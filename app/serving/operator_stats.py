"""The operator's stats: `GET /operator/stats` answers JSON with the runs refused, the runs in
progress, the sessions kept and the calls refused by the call limits (app.serving.call_limits), by
visitor address (app.serving.visitors), so an operator sees
who is being refused and who is crowding; every refusal also writes one log line.

Only peers listed in INFILL_OPERATOR_ADDRESSES (comma-separated addresses or networks; default
127.0.0.1 and ::1, the server's own machine) get an answer; anyone else gets 404, as for any
unknown path."""

from __future__ import annotations

import ipaddress
import os

PATH = "/operator/stats"


def operator_networks() -> list:
    """Who may read the stats (INFILL_OPERATOR_ADDRESSES, default the loopback's 127.0.0.1 and ::1)."""
    nets = []
    for part in os.environ.get("INFILL_OPERATOR_ADDRESSES", "127.0.0.1,::1").split(","):
        try:
            nets.append(ipaddress.ip_network(part.strip(), strict=False))
        except ValueError:
            continue
    return nets


def is_operator(scope: dict) -> bool:
    """Whether the request's socket peer may read the stats; never a request that came through a
    proxy (it carries X-Forwarded-For: a proxy on this machine is not the operator)."""
    if any(k == b"x-forwarded-for" for k, _ in scope.get("headers", ())):
        return False
    peer = (scope.get("client") or (None,))[0]
    try:
        ip = ipaddress.ip_address(peer or "")
    except ValueError:
        return False
    return any(ip.version == n.version and ip in n for n in operator_networks())


def stats() -> dict:
    """Refusals, runs in progress, sessions kept and calls refused, by address."""
    from app.serving.address_sessions import address_sessions
    from app.serving.admission import admission
    from app.serving.call_limits import call_limits

    adm = admission()
    return {"runs_refused_by_address": adm.refusals(), "runs_in_progress_by_address": adm.by_visitor(),
            "sessions_by_address": address_sessions().counts(),
            "calls_refused_by_address": call_limits().refusals()}
