"""The reverse-proxy set-up of docs/SERVING.md against a real nginx (Debian's package), in front of
the studio: a run streams through it, the studio keys the visitor on the address nginx forwards
(INFILL_TRUSTED_PROXIES), and a visitor's own X-Forwarded-For is not believed. Slow; skipped
where nginx is not installed."""

from __future__ import annotations

import shutil
import subprocess
import time
import urllib.request

import pytest

from tests.support.studio import TEXT, tiny_studio

pytestmark = pytest.mark.slow

NGINX = shutil.which("nginx") or ("/usr/sbin/nginx" if shutil.os.path.exists("/usr/sbin/nginx") else None)

CONF = """
worker_processes 1;
user root;
pid {tmp}/nginx.pid;
error_log {tmp}/error.log;
events {{ worker_connections 64; }}
http {{
  access_log off;
  client_body_temp_path {tmp}/body; proxy_temp_path {tmp}/proxy;
  fastcgi_temp_path {tmp}/fcgi; uwsgi_temp_path {tmp}/uwsgi; scgi_temp_path {tmp}/scgi;
  upstream infill {{ ip_hash; server 127.0.0.1:{app_port}; }}
  server {{
    listen 127.0.0.1:{port};
    client_max_body_size 1m;
    location / {{ proxy_pass http://infill; proxy_http_version 1.1;
      proxy_buffering off; proxy_read_timeout 600s; proxy_set_header Host $host;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for; }}
  }}
}}
"""


@pytest.fixture(scope="module")
def proxied(tmp_path_factory):
    if NGINX is None:
        pytest.skip("nginx is not installed (Debian: apt-get install nginx)")
    from tools.tiny_models import free_port, launch_for_tests

    tmp = tmp_path_factory.mktemp("nginx")
    mp = pytest.MonkeyPatch()
    mp.setenv("INFILL_TRUSTED_PROXIES", "127.0.0.1")
    with tiny_studio(tmp / "studio"):
        demo, url = launch_for_tests()
        port = free_port()
        (tmp / "nginx.conf").write_text(CONF.format(tmp=tmp, app_port=url.rstrip("/").rsplit(":", 1)[1], port=port))
        proc = subprocess.Popen([NGINX, "-c", str(tmp / "nginx.conf"), "-g", "daemon off;"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        front = f"http://127.0.0.1:{port}/"
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                try:
                    urllib.request.urlopen(front + "config", timeout=5).read()
                    break
                except OSError:
                    time.sleep(0.2)
            yield front, url
        finally:
            proc.terminate()
            proc.wait(30)
            demo.close()
            mp.undo()


def test_a_run_streams_through_nginx_keyed_on_the_forwarded_address(proxied):
    from app.serving.address_sessions import address_sessions
    from tools.loadtest import form
    from tools.visitor_http import call

    front, _ = proxied
    event, data = call(front, "infill", list(form(TEXT, "assd", 1, k=4)), source="127.0.0.5")
    assert event == "complete" and "Done" in str(data[0])
    assert "127.0.0.5" in address_sessions().counts()  # the visitor, not the proxy at 127.0.0.1


def test_a_visitors_own_forwarded_header_is_not_believed(proxied):
    import http.client
    import json
    from urllib.parse import urlsplit

    from app.serving.address_sessions import address_sessions

    front, _ = proxied
    u = urlsplit(front)
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60, source_address=("127.0.0.6", 0))
    body = json.dumps({"data": ["text"], "session_hash": "forged1"})
    c.request("POST", "/gradio_api/call/nope", body, {"Content-Type": "application/json",
                                                     "X-Forwarded-For": "203.0.113.99"})
    c.getresponse().read()
    c.close()
    counts = address_sessions().counts()
    assert "203.0.113.99" not in counts and "127.0.0.6" in counts


def test_the_operator_stats_are_not_served_through_the_proxy(proxied):
    import urllib.error

    front, direct = proxied
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(front + "operator/stats", timeout=30)
    assert e.value.code == 404
    assert urllib.request.urlopen(direct + "operator/stats", timeout=30).status == 200
