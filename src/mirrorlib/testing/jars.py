"""Find Java and resolve the Apache Kafka jars from Maven Central, once per user.

The jars of one pinned Kafka release (broker, MirrorMaker 2, perf tools and the Log4j 2 binding)
are copied by Maven into ``<cache>/kafka-<version>/lib``. The cache root is
``$MIRRORLIB_CACHE_DIR``, else ``$XDG_CACHE_HOME/mirrorlib``, else ``~/.cache/mirrorlib``.
A file lock makes concurrent processes (pytest-xdist workers, parallel CI jobs) resolve once.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

from mirrorlib.errors import TestClusterError

__all__ = [
    "KAFKA_VERSION",
    "LOG4J_VERSION",
    "MIN_JAVA_VERSION",
    "cache_dir",
    "java_executable",
    "java_version",
    "kafka_classpath",
    "kafka_lib_dir",
    "maven_executable",
    "render_pom",
    "resolve_kafka_jars",
]

#: The Kafka release whose jars are resolved. 4.4.0 has POMs on Central, but not the jars of
#: ``kafka-tools-api``, ``kafka-tools`` and ``connect-mirror``; 4.3.1 is the newest that resolves.
KAFKA_VERSION = "4.3.1"
#: Log4j 2 version matching what ``kafka-server`` 4.3.1 pulls in (the SLF4J binding must agree).
LOG4J_VERSION = "2.25.4"
#: Kafka 4.x brokers need Java 17 or newer.
MIN_JAVA_VERSION = 17

_POM_RESOURCE = "kafka-jars.pom.xml"
_MARKER = ".mirrorlib-complete"
_JAVA_HINT = (
    "install a JDK/JRE 17+ (Debian/Ubuntu: `apt-get install openjdk-17-jre-headless`; "
    "macOS: `brew install openjdk@17`), or point JAVA_HOME or MIRRORLIB_JAVA at one"
)
_MAVEN_HINT = (
    "install Apache Maven 3.8+ (Debian/Ubuntu: `apt-get install maven`; macOS: "
    "`brew install maven`), or set MIRRORLIB_MVN to the mvn executable"
)


def cache_dir() -> Path:
    """The per-user cache root (not created)."""
    env = os.environ.get("MIRRORLIB_CACHE_DIR")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "mirrorlib"


def _find_executable(name: str, env_var: str, home_var: str | None) -> str | None:
    explicit = os.environ.get(env_var)
    if explicit:
        path = shutil.which(explicit)
        return path
    if home_var:
        home = os.environ.get(home_var)
        if home:
            candidate = Path(home) / "bin" / name
            if os.access(candidate, os.X_OK):
                return str(candidate)
    return shutil.which(name)


def java_executable() -> str:
    """Path of the ``java`` launcher to use.

    Looks at ``$MIRRORLIB_JAVA``, then ``$JAVA_HOME/bin/java``, then ``PATH``; checks that it is
    Java 17 or newer. Raises :class:`TestClusterError` naming what is missing and how to install it.
    """
    java = _find_executable("java", "MIRRORLIB_JAVA", "JAVA_HOME")
    if java is None:
        raise TestClusterError(
            "Java not found (looked at $MIRRORLIB_JAVA, $JAVA_HOME/bin/java and PATH); "
            f"Kafka needs Java {MIN_JAVA_VERSION}+: {_JAVA_HINT}"
        )
    version = java_version(java)
    if version < MIN_JAVA_VERSION:
        raise TestClusterError(
            f"{java} is Java {version}; Kafka {KAFKA_VERSION} needs Java {MIN_JAVA_VERSION}+: "
            f"{_JAVA_HINT}"
        )
    return java


@functools.lru_cache(maxsize=8)
def java_version(java: str) -> int:
    """Major version of the given ``java`` launcher (``17`` for ``17.0.15``, ``8`` for 1.8)."""
    try:
        proc = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise TestClusterError(f"cannot run `{java} -version`: {exc}; {_JAVA_HINT}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', proc.stderr + proc.stdout)
    if proc.returncode != 0 or match is None:
        raise TestClusterError(
            f"`{java} -version` failed (exit {proc.returncode}): {proc.stderr.strip()[-500:]}"
        )
    major = int(match.group(1))
    if major == 1 and match.group(2):
        major = int(match.group(2))
    return major


def maven_executable() -> str:
    """Path of ``mvn`` (``$MIRRORLIB_MVN``, ``$MAVEN_HOME/bin/mvn``, then ``PATH``)."""
    mvn = _find_executable("mvn", "MIRRORLIB_MVN", "MAVEN_HOME")
    if mvn is None:
        raise TestClusterError(
            "Maven (`mvn`) not found; it is needed once to download the Kafka jars from Maven "
            f"Central into {cache_dir()}: {_MAVEN_HINT}"
        )
    return mvn


def render_pom(version: str, log4j_version: str, lib_dir: Path) -> str:
    """The Maven POM (shipped as package data) that copies the Kafka jars into ``lib_dir``."""
    template = resources.files(__package__).joinpath(_POM_RESOURCE).read_text(encoding="utf-8")
    return (
        template.replace("@KAFKA_VERSION@", version)
        .replace("@LOG4J_VERSION@", log4j_version)
        .replace("@LIB_DIR@", str(lib_dir))
    )


def kafka_lib_dir(version: str = KAFKA_VERSION) -> Path:
    """Where the jars of ``version`` live once resolved (may not exist yet)."""
    return cache_dir() / f"kafka-{version}" / "lib"


@contextlib.contextmanager
def _file_lock(path: Path, timeout: float) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise TestClusterError(
                        f"timed out after {timeout:.0f}s waiting for lock {path} (another process "
                        "is resolving the Kafka jars; delete the lock file if it is stale)"
                    ) from None
                time.sleep(0.2)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def _pom_digest(version: str, log4j_version: str) -> str:
    # the digest of the template with a fixed lib dir: changes when the shipped POM changes
    text = render_pom(version, log4j_version, Path("LIB"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _is_complete(lib: Path, digest: str) -> bool:
    marker = lib / _MARKER
    try:
        return marker.read_text(encoding="utf-8").strip() == digest
    except OSError:
        return False


def resolve_kafka_jars(
    version: str = KAFKA_VERSION,
    *,
    log4j_version: str = LOG4J_VERSION,
    timeout: float = 900.0,
) -> Path:
    """Make sure the Kafka jars are in the per-user cache; return the ``lib`` directory.

    The first call runs ``mvn package`` on the shipped POM (needs network access to Maven
    Central, or a populated ``~/.m2``); later calls, in this or any other process, only check a
    marker file. Safe to call concurrently from several processes.
    """
    lib = kafka_lib_dir(version)
    digest = _pom_digest(version, log4j_version)
    if _is_complete(lib, digest):
        return lib
    root = lib.parent
    with _file_lock(root.parent / f"kafka-{version}.lock", timeout):
        if _is_complete(lib, digest):  # another process finished while we waited
            return lib
        mvn = maven_executable()
        root.mkdir(parents=True, exist_ok=True)
        work = Path(tempfile.mkdtemp(prefix="resolve-", dir=root))
        try:
            staging = work / "lib"
            pom = work / "pom.xml"
            pom.write_text(render_pom(version, log4j_version, staging), encoding="utf-8")
            cmd = [mvn, "-B", "-q", "-f", str(pom), "package"]
            try:
                proc = subprocess.run(
                    cmd,
                    cwd=work,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    check=False,
                )
            except subprocess.TimeoutExpired as exc:
                raise TestClusterError(
                    f"`{' '.join(cmd)}` did not finish within {timeout:.0f}s resolving Kafka "
                    f"{version} from Maven Central"
                ) from exc
            jars = list(staging.glob("*.jar")) if staging.is_dir() else []
            if proc.returncode != 0 or not jars:
                output = (proc.stdout + proc.stderr).strip()[-3000:]
                raise TestClusterError(
                    f"Maven could not resolve Kafka {version} jars (exit {proc.returncode}); "
                    f"command: {' '.join(cmd)}\n{output}"
                )
            (staging / _MARKER).write_text(digest + "\n", encoding="utf-8")
            if lib.exists():
                shutil.rmtree(lib)
            staging.rename(lib)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    return lib


def kafka_classpath(version: str = KAFKA_VERSION) -> str:
    """The JVM classpath (``<lib>/*``) with every Kafka jar; resolves the jars if needed.

    Use it for ``java -cp`` to run the broker, ``org.apache.kafka.connect.mirror.MirrorMaker``,
    ``org.apache.kafka.tools.ProducerPerformance`` or Java interop code.
    """
    return str(resolve_kafka_jars(version) / "*")
