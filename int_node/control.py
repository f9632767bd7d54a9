"""A node's control socket: JSON requests over a unix stream socket.

One request per connection, one JSON object per line:
    {"cmd": "counters"}                      -> {"ok": true, "counters": {...}}
    {"cmd": "read", "element": "wl", "handler": "distance_m"}
    {"cmd": "write", "element": "wl", "handler": "distance_m", "value": "30"}
    {"cmd": "elements"} / {"cmd": "stop"}
"""
from __future__ import annotations

import json
import os
import socket
from typing import Any, Dict

from .element import ConfigError


class ControlServer:
    def __init__(self, router, path: str):
        self.router, self.path = router, path
        if os.path.exists(path):
            os.unlink(path)   # a stale socket from a killed node
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(16)
        self.sock.setblocking(False)
        router.loop.add_reader(self.sock.fileno(), self._accept)
        self.started_ns = 0

    def _accept(self):
        try:
            conn, _ = self.sock.accept()
        except BlockingIOError:
            return
        with conn:
            conn.settimeout(1.0)
            try:
                raw = b""
                while not raw.endswith(b"\n") and len(raw) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    raw += chunk
                reply = self.handle(json.loads(raw or b"{}"))
            except (ValueError, OSError) as exc:
                reply = {"ok": False, "error": f"bad request: {exc}"}
            try:
                conn.sendall(json.dumps(reply, default=str).encode() + b"\n")
            except OSError:
                pass

    def handle(self, req: Dict[str, Any]) -> Dict[str, Any]:
        cmd = req.get("cmd")
        r = self.router
        try:
            if cmd == "counters":
                return {"ok": True, "pid": os.getpid(), "counters": r.counters()}
            if cmd == "elements":
                return {"ok": True, "elements": r.element_list()}
            if cmd in ("read", "write"):
                elem = r.elements.get(req.get("element"))
                if elem is None:
                    return {"ok": False, "error": f"no element named {req.get('element')!r}"}
                if cmd == "write":
                    elem.write_handler(str(req.get("handler")), str(req.get("value")))
                return {"ok": True, "value": elem.read_handler(str(req.get("handler")))}
            if cmd == "stop":
                r.loop.stop()
                return {"ok": True}
        except ConfigError as exc:
            return {"ok": False, "error": str(exc)}
        return {"ok": False, "error": f"unknown command {cmd!r} (counters, elements, read, write, stop)"}

    def close(self):
        self.router.loop.remove_reader(self.sock.fileno())
        self.sock.close()
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def request(path: str, req: Dict[str, Any], timeout_s: float = 2.0) -> Dict[str, Any]:
    """Send one request to a node's control socket and return its reply."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(timeout_s)
        s.connect(path)
        s.sendall(json.dumps(req).encode() + b"\n")
        raw = b""
        while not raw.endswith(b"\n"):
            chunk = s.recv(65536)
            if not chunk:
                break
            raw += chunk
    return json.loads(raw)
