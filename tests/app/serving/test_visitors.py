"""Limits keyed on what a visitor cannot mint at will (app.serving.visitors): the peer address,
a forwarded address only from a trusted proxy, IPv6 by /64; and the long-run line served
round-robin by visitor (app.serving.admission)."""

from __future__ import annotations

import ipaddress
import logging
import threading

import pytest

from app.serving.admission import Admission, Busy
from app.serving.visitors import UNKNOWN, address_key

LOCAL = (ipaddress.ip_network("127.0.0.1/32"),)


def test_the_peer_address_is_the_key_and_a_forwarded_one_only_from_a_trusted_proxy():
    assert address_key("203.0.113.7") == "203.0.113.7"
    # a client's own header is ignored unless its peer is a listed proxy
    assert address_key("203.0.113.7", "198.51.100.1", trusted=()) == "203.0.113.7"
    assert address_key("203.0.113.7", "198.51.100.1", trusted=LOCAL) == "203.0.113.7"
    assert address_key("127.0.0.1", "198.51.100.1", trusted=LOCAL) == "198.51.100.1"
    # read from the right: what the visitor wrote to the left of the proxy's entry is its own claim
    assert address_key("127.0.0.1", "1.2.3.4, 198.51.100.1", trusted=LOCAL) == "198.51.100.1"
    two = (*LOCAL, ipaddress.ip_network("10.0.0.0/8"))
    assert address_key("127.0.0.1", "198.51.100.1, 10.1.2.3", trusted=two) == "198.51.100.1"
    assert address_key("127.0.0.1", "garbage", trusted=LOCAL) == "127.0.0.1"
    assert address_key(None) == address_key("not an address") == UNKNOWN


def test_ipv6_is_grouped_by_64_and_mapped_ipv4_is_ipv4():
    a = address_key("2001:db8:1:2::1")
    assert a == address_key("2001:db8:1:2:ffff:ffff:ffff:ffff") == "2001:db8:1:2::/64"
    assert address_key("2001:db8:1:3::1") != a
    assert address_key("::ffff:192.0.2.5") == "192.0.2.5"


def test_the_long_run_line_serves_visitors_in_turn(caplog):
    adm = Admission(seats=1, line=4, per_visitor=4)
    order: list[str] = []
    seat = adm.enter("a", True)
    seat.__enter__()  # "a" holds the only seat
    started = []

    def wait(owner: str):
        ready = threading.Event()
        started.append(ready)

        def go():
            ready.set()
            with adm.enter(owner, True):
                order.append(owner)
        t = threading.Thread(target=go, daemon=True)
        t.start()
        return t

    threads = []
    for owner in ("a", "a", "a", "b"):  # "a" queued three runs before "b" queued one
        n = adm._waiting()
        threads.append(wait(owner))
        while adm._waiting() == n:  # in line before the next arrives (state, not time)
            threading.Event().wait(0.01)
    seat.__exit__(None, None, None)
    for t in threads:
        t.join(30)
    assert order[:2] == ["a", "b"]  # "b" does not wait behind all of "a"'s runs
    assert order == ["a", "b", "a", "a"]


def test_refusals_are_logged_once_each_and_counted_by_visitor(caplog):
    adm = Admission(seats=1, line=0, per_visitor=1)
    with adm.enter("198.51.100.1", True):
        with caplog.at_level(logging.INFO, logger="app.admission"):
            for _ in range(3):
                with pytest.raises(Busy):
                    with adm.enter("198.51.100.1", False):
                        pass
            with pytest.raises(Busy, match="long runs"):
                with adm.enter("203.0.113.9", True):
                    pass
    lines = [r for r in caplog.records if r.name == "app.admission"]
    assert len(lines) == 4 and all(r.exc_info is None for r in lines)
    assert "198.51.100.1" in lines[0].getMessage()
    assert adm.refusals() == {"198.51.100.1": 3, "203.0.113.9": 1}
