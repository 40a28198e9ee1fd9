"""Webhooks: create (the secret once), list, deliveries, replay, rotate, delete, and a signature checked by hand."""

from __future__ import annotations

import base64
import hashlib
import hmac
import http.server
import threading
import time

import pytest

import agentfs
from conftest import Bundle


class _Receiver(http.server.BaseHTTPRequestHandler):
    got: list[tuple[dict[str, str], bytes]] = []

    def do_POST(self) -> None:  # noqa: N802 (the stdlib's name)
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        type(self).got.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def _wait(cond, what: str, timeout: float = 30) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def test_webhooks(bundle: Bundle) -> None:
    _Receiver.got = []
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Receiver)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        c = bundle.client()
        url = f"http://127.0.0.1:{srv.server_address[1]}/hook"
        w = c.create_webhook(url, prefix="wh/", types=["file.created"], description="py")
        assert w.id.startswith("wh_") and w.secret and w.secret.startswith("whsec_") and w.status == "active"
        with pytest.raises(agentfs.UnprocessableEntityError):
            c.create_webhook(url, types=["file.sneezed"])
        f = c.put_file("wh/a.txt", b"a")
        _wait(lambda: len(_Receiver.got) == 1, "the delivery")
        headers, body = _Receiver.got[0]
        assert headers["webhook-id"].startswith("evt_") and f.id.encode() in body
        key = base64.b64decode(w.secret.removeprefix("whsec_"))
        signed = f"{headers['webhook-id']}.{headers['webhook-timestamp']}.".encode() + body
        want = "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode()
        assert want in headers["webhook-signature"].split(" ")
        assert [x.id for x in c.webhooks()] == [w.id] and c.webhook(w.id).secret is None
        _wait(lambda: len(c.webhook_deliveries(w.id)) == 1, "the delivery logged")
        d = c.webhook_deliveries(w.id)[0]
        assert d.status == "succeeded" and d.status_code == 204 and d.attempt == 1 and d.object == "webhook_delivery"
        c.replay_webhook(w.id, "start")
        _wait(lambda: len(_Receiver.got) == 2, "the replayed delivery")
        assert _Receiver.got[1][0]["webhook-id"] == headers["webhook-id"]
        rotated = c.rotate_webhook_secret(w.id)
        assert rotated.secret and rotated.secret != w.secret
        assert c.update_webhook(w.id, status="disabled").status == "disabled"
        c.delete_webhook(w.id)
        with pytest.raises(agentfs.NotFoundError):
            c.webhook(w.id)
    finally:
        srv.shutdown()
