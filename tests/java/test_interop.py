"""Byte-compatibility with MirrorMaker 2, checked by running MM2's own Java classes.

``Interop.java`` (next to this file) is compiled against the connect-mirror jars from Maven Central
and fed commands over stdin. Records encoded by Python must decode in Java to the same fields and
records encoded by Java must be byte-identical to Python's and decode in Python.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mirrorlib import Checkpoint, Heartbeat, OffsetSync
from mirrorlib.testing.jars import java_executable, kafka_classpath

pytestmark = pytest.mark.java

SOURCE = Path(__file__).with_name("Interop.java")


class JavaMM2:
    """A long-running JVM that answers encode/decode commands with MM2's classes."""

    def __init__(self, classpath: str, out: Path) -> None:
        """Compiles Interop.java into ``out`` (a fresh test directory: nothing is reused from an
        earlier run or from outside the repository except Kafka's jars), then starts it."""
        java = java_executable()
        javac = str(Path(java).with_name("javac"))
        subprocess.run(
            [javac, "-cp", classpath, "-d", str(out), str(SOURCE)],
            check=True,
            capture_output=True,
            timeout=180,
        )
        self._proc = subprocess.Popen(
            [
                java,
                "-Xmx256m",
                "-cp",
                f"{out}:{classpath}",
                "org.apache.kafka.connect.mirror.Interop",
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            encoding="utf-8",
        )

    def ask(self, *fields: object) -> list[str]:
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write("\t".join(str(f) for f in fields) + "\n")
        self._proc.stdin.flush()
        answer = self._proc.stdout.readline().rstrip("\n").split("\t")
        assert answer and answer[0] != "ERROR", answer
        return answer

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait(timeout=30)


@pytest.fixture(scope="module")
def java(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaMM2]:
    jvm = JavaMM2(kafka_classpath(), tmp_path_factory.mktemp("interop"))
    yield jvm
    jvm.close()


def h(text: str) -> str:
    return text.encode("utf-8").hex()


def u(hex_text: str) -> str:
    return bytes.fromhex(hex_text).decode("utf-8")


# Strings MM2 can write: no lone surrogates, at most 32767 UTF-8 bytes.
text = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)
SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@SETTINGS
@given(text, text, int32, int64, int64, text)
def test_checkpoint_both_directions(
    java: JavaMM2, g: str, t: str, p: int, up: int, down: int, m: str
) -> None:
    cp = Checkpoint(g, t, p, up, down, m)
    key_hex, value_hex = java.ask("enc-checkpoint", h(g), h(t), p, up, down, h(m))
    assert bytes.fromhex(key_hex) == cp.encode_key()
    assert bytes.fromhex(value_hex) == cp.encode_value()
    assert Checkpoint.decode(bytes.fromhex(key_hex), bytes.fromhex(value_hex)) == cp
    fields = java.ask("dec-checkpoint", cp.encode_key().hex(), cp.encode_value().hex())
    assert (
        u(fields[0]),
        u(fields[1]),
        int(fields[2]),
        int(fields[3]),
        int(fields[4]),
        u(fields[5]),
    ) == (g, t, p, up, down, m)


@SETTINGS
@given(text, text, int64)
def test_heartbeat_both_directions(java: JavaMM2, s: str, t: str, ts: int) -> None:
    hb = Heartbeat(s, t, ts)
    key_hex, value_hex = java.ask("enc-heartbeat", h(s), h(t), ts)
    assert bytes.fromhex(key_hex) == hb.encode_key()
    assert bytes.fromhex(value_hex) == hb.encode_value()
    assert Heartbeat.decode(bytes.fromhex(key_hex), bytes.fromhex(value_hex)) == hb
    fields = java.ask("dec-heartbeat", hb.encode_key().hex(), hb.encode_value().hex())
    assert (u(fields[0]), u(fields[1]), int(fields[2])) == (s, t, ts)


@SETTINGS
@given(text, int32, int64, int64)
def test_offset_sync_both_directions(java: JavaMM2, t: str, p: int, up: int, down: int) -> None:
    sync = OffsetSync(t, p, up, down)
    key_hex, value_hex = java.ask("enc-offset-sync", h(t), p, up, down)
    assert bytes.fromhex(key_hex) == sync.encode_key()
    assert bytes.fromhex(value_hex) == sync.encode_value()
    assert OffsetSync.decode(bytes.fromhex(key_hex), bytes.fromhex(value_hex)) == sync
    fields = java.ask("dec-offset-sync", sync.encode_key().hex(), sync.encode_value().hex())
    assert (u(fields[0]), int(fields[1]), int(fields[2]), int(fields[3])) == (t, p, up, down)


def test_reference_worked_examples_match_java(java: JavaMM2) -> None:
    key_hex, value_hex = java.ask(
        "enc-checkpoint", h("my-group"), h("us-west.orders"), 0, 100, 95, ""
    )
    assert key_hex == "00086d792d67726f7570000e75732d776573742e6f726465727300000000"
    assert value_hex == "00000000000000000064000000000000005f0000"
    key_hex, value_hex = java.ask("enc-offset-sync", h("orders"), 3, 100, 95)
    assert (key_hex, value_hex) == ("00066f726465727300000003", "0000000000000064000000000000005f")
