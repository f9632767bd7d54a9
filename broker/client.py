"""A paho-mqtt client set up the intcc way: MQTT 3.1.1 (every broker speaks it),
clean session, reconnects by itself with a short backoff, optional TLS."""
from __future__ import annotations

import logging
import os
import socket
import ssl
from typing import Optional

import paho.mqtt.client as mqtt

from .auth import BrokerURL

log = logging.getLogger(__name__)

RECONNECT_MIN_S, RECONNECT_MAX_S = 0.2, 2.0
KEEPALIVE_S = 10


def make_client(url: BrokerURL, client_id_prefix: str, client_id: Optional[str] = None) -> mqtt.Client:
    cid = client_id or f"{client_id_prefix}-{os.getpid()}-{os.urandom(3).hex()}"
    c = mqtt.Client(mqtt.CallbackAPIVersion.VERSION2, client_id=cid, clean_session=True,
                    protocol=mqtt.MQTTv311, reconnect_on_failure=True)
    if url.username:
        c.username_pw_set(url.username, url.password)
    if url.tls:
        c.tls_set(ca_certs=url.ca_file, cert_reqs=ssl.CERT_REQUIRED)
    c.reconnect_delay_set(RECONNECT_MIN_S, RECONNECT_MAX_S)
    c.on_socket_open = _no_delay
    return c


def _no_delay(client, userdata, sock) -> None:
    """Nagle holds a small record back until the previous one is ACKed, and the
    peer delays that ACK by up to 40 ms: telemetry is all small records."""
    try:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    except (OSError, AttributeError):
        pass    # not a TCP socket (unix or websocket transport)


def start(client: mqtt.Client, url: BrokerURL) -> None:
    """Connect in the background: a broker that is not up yet is retried, not fatal."""
    client.connect_async(url.host, url.port, keepalive=KEEPALIVE_S)
    client.loop_start()


def stop(client: mqtt.Client) -> None:
    try:
        client.disconnect()
    finally:
        client.loop_stop()


def logged_in(url: str, user: str, client_id_prefix: str) -> tuple[mqtt.Client, BrokerURL]:
    """A started client for ``url``, logged in as ``user`` from the credentials file where the
    URL carries no login (with a warning when the file has none: a broker with intcc's ACL
    drops what is published anonymously)."""
    from .auth import parse_url, resolve_login
    resolved = resolve_login(parse_url(url), user)
    if not resolved.username:
        log.warning("%s: no login for %s in the credentials file: a broker with intcc's ACL drops what is "
                    "published anonymously (give the URL ?credentials=FILE)", resolved.display, user)
    client = make_client(resolved, client_id_prefix)
    start(client, resolved)
    return client, resolved
