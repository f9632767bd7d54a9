"""The embedded broker: amqtt in its own process, with intcc's login and ACL.

Run it with ``intcc broker run`` (or ``python -m broker.embedded``). It must
not share a process with busy clients: amqtt on one asyncio loop with the
publishers gives p99 latencies near 50 ms (LINUX-NOTES.md).
"""
from __future__ import annotations

import asyncio
import hmac
import logging
import signal
from dataclasses import dataclass

from amqtt.broker import Broker
from amqtt.contexts import Action
from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin

from .auth import DEFAULT_CREDENTIALS, READ_TOPICS, ensure_credentials, load_credentials, may_publish, may_read

log = logging.getLogger("intcc.broker")


class IntccAuthPlugin(BaseAuthPlugin):
    """Known users must give their password; anonymous clients may connect
    (to read) when ``allow_anonymous`` is set."""

    @dataclass
    class Config:
        credentials_file: str = DEFAULT_CREDENTIALS
        allow_anonymous: bool = True

    def __init__(self, context):
        super().__init__(context)
        self._users = load_credentials(self.config.credentials_file)

    async def authenticate(self, *, session) -> bool:
        user = session.username
        if not user:
            return bool(self.config.allow_anonymous)
        expected = self._users.get(user)
        given = session.password or ""
        if isinstance(given, bytes):
            given = given.decode(errors="replace")
        ok = expected is not None and hmac.compare_digest(expected.encode(), given.encode())
        if not ok:
            log.warning("refused login for user %r", user)
        return ok


class IntccTopicPlugin(BaseTopicPlugin):
    """Publishing follows auth.PUBLISH_ACL; reading follows auth.READ_TOPICS (intcc/v1/#),
    as mosquitto's ACL file says (broker/launch.py)."""

    @dataclass
    class Config:
        pass

    async def topic_filtering(self, *, session=None, topic=None, action=None) -> bool:
        if action == Action.PUBLISH:
            user = session.username if session else None
            allowed = may_publish(user, topic or "")
            if not allowed:
                log.warning("dropped a publish by %r to %s (not allowed)", user or "anonymous", topic)
            return allowed
        allowed = may_read(topic or "")
        if not allowed and action == Action.SUBSCRIBE:
            log.warning("refused a subscription by %r to %s (outside %s)",
                        (session.username if session else None) or "anonymous", topic, ", ".join(READ_TOPICS))
        return allowed


def broker_config(host: str, port: int, credentials_file: str, allow_anonymous: bool = True) -> dict:
    return {
        "listeners": {"default": {"type": "tcp", "bind": f"{host}:{port}", "max_connections": 256}},
        "plugins": {
            f"{__name__}.IntccAuthPlugin": {"credentials_file": credentials_file,
                                            "allow_anonymous": allow_anonymous},
            f"{__name__}.IntccTopicPlugin": {},
        },
    }


async def serve(host: str = "127.0.0.1", port: int = 1883, credentials_file: str = DEFAULT_CREDENTIALS,
                allow_anonymous: bool = True, ready_cb=None) -> None:
    ensure_credentials(credentials_file)
    broker = Broker(broker_config(host, port, credentials_file, allow_anonymous))
    await broker.start()
    log.info("embedded broker (amqtt) on %s:%d", host, port)
    if ready_cb:
        ready_cb()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    await stop.wait()
    await broker.shutdown()


def main(argv=None) -> None:
    import argparse
    p = argparse.ArgumentParser(description="intcc embedded MQTT broker (amqtt)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=1883)
    p.add_argument("--credentials", default=DEFAULT_CREDENTIALS)
    p.add_argument("--no-anonymous", action="store_true")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    asyncio.run(serve(a.host, a.port, a.credentials, not a.no_anonymous))


if __name__ == "__main__":
    main()
