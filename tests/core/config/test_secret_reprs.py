"""Secrets never reach a repr, a str or an error message: every value class that can hold a client
configuration masks them with the one rule (:func:`mirrorlib.core.config.keys.is_sensitive`)."""

from __future__ import annotations

from typing import Any

import pytest

from mirrorlib import ConfigError, MirrorConfig
from mirrorlib.core.config.clients import ClientSettings, JaasEntry, Setting, parse_jaas
from mirrorlib.core.config.keys import is_sensitive, masked
from mirrorlib.core.config.properties import ParsedProperties, ResolvedProperties, parse_properties
from mirrorlib.core.settings import FlowSettings

PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
#: Every secret below contains this marker; nothing shown may.
MARK = "Sekr3t"

SECRETS = {
    "A.security.protocol": "SASL_SSL",
    "A.sasl.mechanism": "PLAIN",
    "A.sasl.jaas.config": f'{PLAIN} required username="alice" password="jaas-{MARK}";',
    "A.ssl.key.password": f"key-{MARK}",
    "A.ssl.keystore.password": f"keystore-{MARK}",
    "A.ssl.truststore.password": f"truststore-{MARK}",
    "B.security.protocol": "SASL_PLAINTEXT",
    "B.sasl.mechanism": "PLAIN",
    "B.sasl.password": f"sasl-{MARK}",
    "B.sasl.username": "bob",
    "B.ssl.key.pem": f"-----BEGIN PRIVATE KEY-----{MARK}",
    "B.basic.auth.user.info": f"bob:basic-{MARK}",
    "B.producer.sasl.jaas.config": f'{PLAIN} required username="bob" password="prod-{MARK}";',
}
BASE = {
    "clusters": "A, B",
    "A.bootstrap.servers": "127.0.0.1:1",
    "B.bootstrap.servers": "127.0.0.1:2",
    "A->B.enabled": "true",
    "B->A.enabled": "true",
}


def shown(value: Any) -> list[str]:
    """``repr`` and ``str`` of ``value``."""
    return [repr(value), str(value)]


def assert_hidden(*texts: str) -> None:
    for text in texts:
        assert MARK not in text, text


@pytest.fixture(scope="module")
def config() -> MirrorConfig:
    return MirrorConfig.from_properties({**BASE, **SECRETS})


@pytest.mark.parametrize(
    "key",
    [
        "sasl.jaas.config",
        "sasl.password",
        "ssl.key.password",
        "ssl.keystore.password",
        "ssl.truststore.password",
        "basic.auth.user.info",
        "ssl.key.pem",
        "sasl.oauthbearer.client.secret",
        "sasl.oauthbearer.config",
        "B.producer.ssl.key.password",
    ],
)
def test_secret_keys_are_sensitive(key: str) -> None:
    assert is_sensitive(key)
    assert masked({key: "x", "bootstrap.servers": "h:1"}) == {
        key: "[hidden]",
        "bootstrap.servers": "h:1",
    }


def test_flow_settings_repr_and_str_hide_every_secret(config: MirrorConfig) -> None:
    for flow in config.pairs:
        settings = FlowSettings.from_config(config, flow)
        # the secrets are there (the clients need them) ...
        assert any(MARK in str(v) for v in settings.source_consumer.values()) or any(
            MARK in str(v) for v in settings.target_producer.values()
        )
        # ... and never shown
        assert_hidden(*shown(settings))
        assert "[hidden]" in repr(settings)
        assert "bootstrap.servers" in repr(settings)  # the rest is still shown


def test_mirror_and_flow_config_reprs_hide_every_secret(config: MirrorConfig) -> None:
    assert_hidden(*shown(config))
    for flow in config.pairs:
        assert_hidden(*shown(flow))
        for side in ("source", "target"):
            for role in ("consumer", "producer", "admin"):
                client = flow.client_settings(side, role)
                assert isinstance(client, ClientSettings)
                assert any(MARK in v for v in client.settings.values()) or side == "target"
                assert_hidden(*shown(client), *(t for d in client.dropped for t in shown(d)))


def test_setting_jaas_entry_and_properties_reprs_hide_every_secret() -> None:
    setting = Setting(f"pw-{MARK}", "B.producer.ssl.key.password")
    assert_hidden(*shown(setting))
    assert "B.producer.ssl.key.password" in repr(setting)
    provided = Setting(f"from-a-provider-{MARK}", "B.some.key", secret=True)
    assert_hidden(*shown(provided))
    plain = Setting("all", "B.producer.acks")
    assert "all" in repr(plain)  # not a secret: shown
    [entry] = parse_jaas(SECRETS["A.sasl.jaas.config"])
    assert isinstance(entry, JaasEntry)
    assert_hidden(*shown(entry))
    assert "alice" in repr(entry)
    text = "\n".join(f"{k}={v}" for k, v in {**BASE, **SECRETS}.items())
    parsed = parse_properties(text, origin="mm2.properties")
    assert isinstance(parsed, ParsedProperties)
    assert_hidden(*shown(parsed))
    resolved = ResolvedProperties(
        {**parsed.values, "B.some.key": f"from-a-provider-{MARK}"}, frozenset({"B.some.key"})
    )
    assert_hidden(*shown(resolved))


@pytest.mark.parametrize(
    "props",
    [
        # a malformed JAAS text (no ';'), a bad value of a password-typed key, an unknown client
        # setting holding a secret
        {"A.sasl.jaas.config": f'{PLAIN} required username="a" password="bad-{MARK}"'},
        {
            "A.sasl.mechanism": "PLAIN",
            "A.security.protocol": "SASL_PLAINTEXT",
            "A.sasl.jaas.config": f'no.such.Module required password="bad-{MARK}";',
        },
        {"A.consumer.sasl.jaas.config": f"{MARK} not jaas at all"},
    ],
)
def test_error_messages_hide_the_secret(props: dict[str, str]) -> None:
    try:
        config = MirrorConfig.from_properties({**BASE, **props})
        for flow in config.pairs:
            FlowSettings.from_config(config, flow)
            for side in ("source", "target"):
                for role in ("consumer", "producer", "admin"):
                    flow.client_settings(side, role)
        messages = [str(w) for w in config.warnings]
    except ConfigError as exc:
        messages = [str(exc), repr(exc)]
    assert messages  # the mistake is reported...
    assert_hidden(*messages)  # ...without the secret
