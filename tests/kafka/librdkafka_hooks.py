"""librdkafka's own test hooks, reached from tests (confluent-kafka does not expose them)."""

from __future__ import annotations

import ctypes

import confluent_kafka
import pytest
from confluent_kafka import Producer, cimpl

__all__ = ["provoke_fatal_error"]


def provoke_fatal_error(producer: Producer, code: int) -> None:
    """Raise a fatal error in ``producer`` as librdkafka does itself (its test hook
    ``rd_kafka_test_fatal_error``); confluent-kafka exposes no way to, so its client handle (the
    pointer after the Python object header) is passed to librdkafka through ctypes."""
    # The handle's place is confluent-kafka's C struct (``PyObject_HEAD; rd_kafka_t *rk``), the
    # same in every 2.x release; on another major version, skip rather than touch a wrong pointer.
    version = confluent_kafka.version()  # "2.16.1", or ("2.x.y", int) in older releases
    version = version[0] if isinstance(version, tuple) else version
    if not str(version).startswith("2."):
        pytest.skip(f"handle layout not known for confluent-kafka {version}")
    lib = ctypes.CDLL(cimpl.__file__)  # librdkafka's symbols, through the loaded extension
    header = ctypes.sizeof(ctypes.c_ssize_t) + ctypes.sizeof(ctypes.c_void_p)
    rk = ctypes.c_void_p.from_address(id(producer) + header).value
    lib.rd_kafka_name.argtypes = [ctypes.c_void_p]
    lib.rd_kafka_name.restype = ctypes.c_char_p
    name = lib.rd_kafka_name(rk)
    if b"#producer-" not in (name or b""):  # librdkafka names it <client.id>#producer-<n>
        pytest.skip(f"cannot reach librdkafka's producer handle (found {name!r})")
    lib.rd_kafka_test_fatal_error.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p]
    assert lib.rd_kafka_test_fatal_error(rk, code, b"provoked by the test") == 0
