"""The contenders, each a separate OS process so its CPU and memory can be measured alone."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench import stats
from bench.procmon import children, resume_tree, suspend_tree
from mirrorlib.testing import BaseCluster
from mirrorlib.testing.config import render_properties
from mirrorlib.testing.mm2 import RealMirrorMaker, mm2_properties

#: Settings that make MM2's clients match mirrorlib's (librdkafka) ones where comparable.
MM2_SAME_AS_MIRRORLIB = {
    "producer.linger.ms": "5",
    "producer.batch.size": "1000000",
    "producer.acks": "all",
    "producer.enable.idempotence": "true",
    "producer.max.in.flight.requests.per.connection": "5",
    "producer.buffer.memory": "268435456",
}
#: Where the mirrorlib contender imports mirrorlib from (a snapshot of a commit; see bench.run).
MIRRORLIB_SRC = ""


def mirrorlib_src(text: str) -> Path:
    """``text`` as a ``src/`` directory holding the mirrorlib package to measure, or
    ``SystemExit`` naming it: a wrong path on ``PYTHONPATH`` would silently run the installed
    package under the variant's name."""
    src = Path(text).resolve()
    if src.name != "src" or not (src / "mirrorlib" / "__init__.py").is_file():
        raise SystemExit(f"{text}: not a src/ directory holding mirrorlib")
    return src


#: More properties of the next contender started (bench.transforms_cost: a filter per flow).
EXTRA_FLOW_PROPERTIES: dict[str, str] = {}

#: Harness-only: the Connect worker's group session must survive SIGSTOP during a preload.
MM2_HARNESS = {"session.timeout.ms": "45000"}


class Contender:
    """One replicator process: start, suspend (SIGSTOP) / resume (SIGCONT), stop."""

    id: str
    remote_prefix: str

    def __init__(self, cid: str, source_alias: str, target_alias: str, work: Path) -> None:
        self.id = cid
        self.source_alias = source_alias
        self.target_alias = target_alias
        self.work = work
        self.remote_prefix = f"{source_alias}."
        self.settings: dict[str, Any] = {}

    def remote(self, topic: str) -> str:
        return self.remote_prefix + topic

    @property
    def pid(self) -> int:
        raise NotImplementedError

    def start(self, a: BaseCluster, b: BaseCluster, topics: list[str], pattern: str) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def suspend(self) -> None:
        """SIGSTOP the replicator's whole process tree (with ``tasks.max`` > 1 mirrorlib copies in
        child processes: stopping only the parent let them copy part of the preload outside the
        measured window, until their pipe to the stopped parent filled)."""
        suspend_tree(self.pid)

    def resume(self) -> None:
        """SIGCONT the tree, children first (the parent finds its workers running)."""
        resume_tree([self.pid, *children(self.pid)])

    @property
    def checkpoints(self) -> bool:
        return True

    def alive_or_raise(self) -> None:
        """Raise if the replicator process has exited."""


def flow_properties(
    cid: str, a: BaseCluster, b: BaseCluster, src: str, tgt: str, pattern: str
) -> dict[str, str]:
    extra: dict[str, str] = {}
    engine = stats.ENGINE.get(cid, cid)
    if engine == stats.MM2_TUNED:
        extra.update({f"{tgt}.{k}": v for k, v in MM2_SAME_AS_MIRRORLIB.items()})
        extra[f"{src}.consumer.max.poll.records"] = "10000"  # mirrorlib consumes 10000 per batch
    if engine in (stats.MM2_TUNED, stats.MM2_DEFAULTS):
        extra.update({f"{tgt}.{k}": v for k, v in MM2_HARNESS.items()})
    extra.update(EXTRA_FLOW_PROPERTIES)
    return mm2_properties(
        {src: a.java_client_config(), tgt: b.java_client_config()},
        [f"{src}->{tgt}"],
        topics=pattern,
        groups=pattern,
        interval_seconds=1,
        offset_flush_interval_ms=1000,
        tasks_max=stats.TASKS_MAX.get(cid, 1),
        extra=extra,
    )


class MM2(Contender):
    def alive_or_raise(self) -> None:
        if self.mm2 is not None and self.mm2.returncode is not None:
            raise RuntimeError(f"MM2 exited with {self.mm2.returncode}:\n{self.mm2.log_tail(40)}")

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.mm2: RealMirrorMaker | None = None

    @property
    def pid(self) -> int:
        assert self.mm2 is not None and self.mm2.pid is not None
        return self.mm2.pid

    def start(self, a: BaseCluster, b: BaseCluster, topics: list[str], pattern: str) -> None:
        props = flow_properties(self.id, a, b, self.source_alias, self.target_alias, pattern)
        self.settings = {"properties": props, "jvm": "-Xms256m -Xmx1g, G1, C1+C2"}
        self.mm2 = RealMirrorMaker(
            props,
            work_dir=self.work / f"mm2-{self.id}-{time.time_ns()}",
            heap="1g",
            fast_jit=False,
            jvm_args=("-Xms256m",),  # connect-mirror-maker.sh: -Xms256M
        )
        self.mm2.start()

    def stop(self) -> None:
        if self.mm2 is not None:
            pid = self.mm2.pid
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGCONT)
            self.mm2.stop(timeout=15)
            self.mm2 = None


class _Subprocess(Contender):
    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def _launch(
        self,
        cmd: list[str],
        name: str,
        env: Mapping[str, str] | None = None,
        new_session: bool = False,
    ) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        log = self.work / f"{name}-{time.time_ns()}.log"
        self.settings["command"] = " ".join(cmd)
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                cmd,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                start_new_session=new_session,
            )
        self.log = log

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)
            proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)

    def alive_or_raise(self) -> None:
        """Raise if the replicator process has exited."""
        if self.proc is not None and self.proc.poll() is not None:
            raise RuntimeError(
                f"{self.id} exited with {self.proc.returncode}:\n{self.log.read_text()[-3000:]}"
            )


class Mirrorlib(_Subprocess):
    """``python -m mirrorlib run mm2.properties`` — the embedded Replicator in its own process."""

    def start(self, a: BaseCluster, b: BaseCluster, topics: list[str], pattern: str) -> None:
        props = flow_properties(self.id, a, b, self.source_alias, self.target_alias, pattern)
        self.work.mkdir(parents=True, exist_ok=True)
        path = self.work / f"mirrorlib-{time.time_ns()}.properties"
        path.write_text(render_properties(props))
        self.settings = {"properties": props}
        env = {"PYTHONPATH": MIRRORLIB_SRC} if MIRRORLIB_SRC else None
        self.settings["mirrorlib_src"] = MIRRORLIB_SRC or "installed package"
        self._launch(
            [sys.executable, "-m", "mirrorlib", "--log-level", "WARNING", "run", str(path)],
            "mirrorlib",
            env,
        )


class BareLoop(_Subprocess):
    def start(self, a: BaseCluster, b: BaseCluster, topics: list[str], pattern: str) -> None:
        self._launch(
            [
                sys.executable,
                "-m",
                "bench.bareloop",
                a.bootstrap_servers,
                b.bootstrap_servers,
                self.remote_prefix,
                *topics,
                *(["--acked"] if self.id in (stats.ACKED_LOOP, stats.ACKED_LOOP_2) else []),
                *(["--processes", "2"] if self.id in stats.LOOPS[2] else []),
            ],
            "bareloop",
        )

    @property
    def checkpoints(self) -> bool:
        return False


class Spark(_Subprocess):
    """``python -m mirrorlib.spark mm2.properties --master local[N]`` in its own process (and
    session: its JVM and Python workers are one process group, stopped together). The
    throughput phase runs it with ``--backfill``, one fresh job per cell; the scenario runs it
    continuously (micro-batches every ``--trigger-interval``)."""

    TRIGGER = "1 second"

    def __init__(self, *args: Any, cores: int, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.cores = cores

    def _command(self, path: Path, checkpoint: Path, backfill: bool) -> list[str]:
        cmd = [
            sys.executable, "-m", "mirrorlib.spark", str(path),
            "--checkpoint-location", str(checkpoint),
            "--master", f"local[{self.cores}]",
            "--trigger-interval", self.TRIGGER,
            # INFO logs each batch's records, tasks, duration, slowest task and first record
            # (a line per batch: a backfill cell is one to a few batches, the latency scenario
            # one a second), which explains a slow job or the latency; kept in the work dir
            "--log-level", "INFO",
        ]  # fmt: skip
        return [*cmd, "--backfill"] if backfill else cmd

    def start(
        self,
        a: BaseCluster,
        b: BaseCluster,
        topics: list[str],
        pattern: str,
        backfill: bool = False,
    ) -> None:
        props = flow_properties(self.id, a, b, self.source_alias, self.target_alias, pattern)
        self.work.mkdir(parents=True, exist_ok=True)
        stamp = time.time_ns()
        path = self.work / f"{self.id}-{stamp}.properties"
        path.write_text(render_properties(props))
        checkpoint = self.work / f"{self.id}-chk-{stamp}"
        self.settings = {
            "properties": props,
            "master": f"local[{self.cores}]",
            "mode": "backfill (one fresh job per cell)" if backfill else "continuous",
            "spark_submit_args": SPARK_SUBMIT_ARGS,
        }
        self.settings["mirrorlib_src"] = MIRRORLIB_SRC or "installed package"
        self._launch(
            self._command(path, checkpoint, backfill), self.id, spark_env(), new_session=True
        )

    def wait(self, timeout: float) -> int | None:
        """The exit status of a backfill job, or None if it is still running after ``timeout``."""
        assert self.proc is not None
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None

    def stop(self) -> None:
        proc = self.proc
        if proc is None:
            return
        pgid = proc.pid  # start_new_session: the driver leads its own process group
        super().stop()  # SIGTERM: the driver stops its queries and exits
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGTERM)  # the JVM and workers, if any outlived the driver
            time.sleep(2.0)
            os.killpg(pgid, signal.SIGKILL)


#: Spark settings for the Spark contenders (no UI: several sessions may overlap a little).
SPARK_SUBMIT_ARGS = "--conf spark.ui.enabled=false --driver-memory 1g pyspark-shell"


def spark_env() -> dict[str, str]:
    """The environment of a Spark contender's driver (added to this process's)."""
    env = {"PYSPARK_SUBMIT_ARGS": SPARK_SUBMIT_ARGS, "PYSPARK_PYTHON": sys.executable}
    if MIRRORLIB_SRC:  # the driver and (through the JVM's environment) the Python workers
        env["PYTHONPATH"] = MIRRORLIB_SRC
    return env


def prepare_spark_archive(timeout: float = 300.0) -> dict[str, Any]:
    """``python -m mirrorlib.spark --prepare`` with the Spark contenders' environment, timed:
    writes the driver's class-data-sharing archive if this machine has none for these settings
    (docs/spark.md advises it where drivers start from a fresh file system), so that no Spark
    job's start-up depends on whether an earlier job on the machine happened to write it."""
    started = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "mirrorlib.spark", "--prepare"],
            check=False,
            env={**os.environ, **spark_env()},
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        return {"status": None, "seconds": round(time.monotonic() - started, 2),
                "output": f"no answer in {timeout:.0f}s"}  # fmt: skip
    # its answer is the last line of stdout (Spark's log lines go to stderr)
    out = done.stdout.strip().splitlines() or done.stderr.strip().splitlines()
    return {
        "status": done.returncode,
        "seconds": round(time.monotonic() - started, 2),
        "output": out[-1][:300] if out else "",
    }


def make(cid: str, index: int, work: Path) -> Contender:
    src, tgt = f"S{index}", f"T{index}"
    if cid in stats.SPARKS:
        return Spark(cid, src, tgt, work, cores=stats.SPARKS[cid])
    cls: type[Contender] = {
        stats.MM2_TUNED: MM2,
        stats.MM2_DEFAULTS: MM2,
        stats.MIRRORLIB: Mirrorlib,
        stats.MM2_TUNED_2: MM2,
        stats.MM2_DEFAULTS_2: MM2,
        stats.MIRRORLIB_2: Mirrorlib,
        stats.BARE_LOOP: BareLoop,
        stats.ACKED_LOOP: BareLoop,
        stats.BARE_LOOP_2: BareLoop,
        stats.ACKED_LOOP_2: BareLoop,
    }[cid]
    return cls(cid, src, tgt, work)
