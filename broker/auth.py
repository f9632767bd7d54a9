"""Broker URLs, credentials and the access rules every broker enforces.

Roles: the **sink** may publish flow and hop records; the **agent** (algorithms,
estimator) may publish estimates and decisions; everyone, anonymous included, may read
``intcc/v1/#`` (so ``mosquitto_sub -t 'intcc/v1/#'`` just works). Passwords
live in one JSON file (``credentials.json``, mode 0600), created with random
passwords by ``intcc broker run`` and read by the sink and agents on the same
host; pass ``--credentials`` or a ``user:password@`` URL to use others.
"""
from __future__ import annotations

import json
import os
import secrets
from dataclasses import dataclass
from typing import Dict, List, Optional
from urllib.parse import parse_qs, unquote, urlsplit

from int_node.runtime import run_path
from telemetry.schema import TOPIC_ROOT

DEFAULT_CREDENTIALS = run_path("broker", "credentials.json")
DEFAULT_PORT, DEFAULT_TLS_PORT = 1883, 8883
SINK_USER, AGENT_USER = "intcc-sink", "intcc-agent"
PUBLISH_ACL: Dict[str, List[str]] = {
    # the sink's side also names the CCAs of the flows through its node (Dragonfly)
    SINK_USER: [f"{TOPIC_ROOT}/flow/#", f"{TOPIC_ROOT}/hop/#", f"{TOPIC_ROOT}/cca/#"],
    AGENT_USER: [f"{TOPIC_ROOT}/estimate/#", f"{TOPIC_ROOT}/decision/#"],
}
READ_TOPICS = [f"{TOPIC_ROOT}/#"]


class BrokerURLError(ValueError):
    pass


@dataclass
class BrokerURL:
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    tls: bool = False
    username: Optional[str] = None
    password: Optional[str] = None
    ca_file: Optional[str] = None
    credentials: Optional[str] = None     # credentials file to take username/password from

    @property
    def display(self) -> str:
        user = f"{self.username}@" if self.username else ""
        return f"{'mqtts' if self.tls else 'mqtt'}://{user}{self.host}:{self.port}"


def parse_url(url: str) -> BrokerURL:
    """``mqtt[s]://[user[:password]@]host[:port][?ca=FILE&credentials=FILE]``."""
    if "://" not in url:
        url = "mqtt://" + url
    u = urlsplit(url)
    if u.scheme not in ("mqtt", "mqtts", "tcp", "ssl"):
        raise BrokerURLError(f"broker URL '{url}': scheme must be mqtt:// or mqtts://")
    tls = u.scheme in ("mqtts", "ssl")
    try:
        port = u.port or (DEFAULT_TLS_PORT if tls else DEFAULT_PORT)
    except ValueError:
        raise BrokerURLError(f"broker URL '{url}': bad port") from None
    if not u.hostname:
        raise BrokerURLError(f"broker URL '{url}': no host")
    q = parse_qs(u.query)
    unknown = set(q) - {"ca", "credentials"}
    if unknown:
        raise BrokerURLError(f"broker URL '{url}': unknown option(s) {', '.join(sorted(unknown))}")
    return BrokerURL(u.hostname, port, tls, unquote(u.username) if u.username else None,
                     unquote(u.password) if u.password else None,
                     q.get("ca", [None])[0], q.get("credentials", [None])[0])


def load_credentials(path: str = DEFAULT_CREDENTIALS) -> Dict[str, str]:
    """{username: password}; {} if the file does not exist."""
    try:
        with open(path) as f:
            data = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, json.JSONDecodeError) as exc:
        raise BrokerURLError(f"cannot read credentials {path}: {exc}") from None
    users = data.get("users") if isinstance(data, dict) else None
    if not isinstance(users, dict) or not all(isinstance(v, str) for v in users.values()):
        raise BrokerURLError(f"credentials {path}: expected {{\"users\": {{name: password}}}}")
    return users


def ensure_credentials(path: str = DEFAULT_CREDENTIALS) -> Dict[str, str]:
    """Load the credentials file, creating it with random passwords if missing."""
    users = load_credentials(path)
    if users:
        return users
    users = {SINK_USER: secrets.token_urlsafe(18), AGENT_USER: secrets.token_urlsafe(18)}
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump({"users": users}, f, indent=1)
    return users


def resolve_login(url: BrokerURL, role_user: Optional[str]) -> BrokerURL:
    """Fill username/password for ``role_user`` from the credentials file when
    the URL carries none (anonymous when neither has any)."""
    if url.username or role_user is None:
        return url
    users = load_credentials(url.credentials or DEFAULT_CREDENTIALS)
    if role_user in users:
        url.username, url.password = role_user, users[role_user]
    return url


def may_publish(username: Optional[str], topic: str) -> bool:
    return any(_topic_matches(topic, pattern) for pattern in PUBLISH_ACL.get(username or "", []))


def may_read(topic_filter: str) -> bool:
    """Whether a subscription (a filter, wildcards allowed) stays inside READ_TOPICS:
    the ACL is the contract, for every user and for anonymous clients alike."""
    return any(_filter_within(topic_filter, pattern) for pattern in READ_TOPICS)


def _filter_within(topic_filter: str, pattern: str) -> bool:
    f, p = topic_filter.split("/"), pattern.split("/")
    for i, part in enumerate(p):
        if part == "#":
            return True
        if i >= len(f) or f[i] == "#" or (part != "+" and part != f[i]) or (part != "+" and f[i] == "+"):
            return False
    return len(f) == len(p)


def _topic_matches(topic: str, pattern: str) -> bool:
    t, p = topic.split("/"), pattern.split("/")
    for i, part in enumerate(p):
        if part == "#":
            return True
        if i >= len(t) or (part != "+" and part != t[i]):
            return False
    return len(t) == len(p)
