"""``mirrorlib local up|status|down``: two local Kafka clusters to try your own flow on.

``local up`` starts local single-broker KRaft clusters (``A`` and ``B`` unless ``--clusters``)
that keep running in the background after the command returns (see
:mod:`mirrorlib.testing.local`), writes ``DIR/mm2.properties`` with the flow ``A->B`` enabled
(sized for one broker, short intervals), and — unless ``--no-sample`` — creates a topic
``orders`` on ``A`` with 1000 records and a consumer group ``billing`` that has read 400 of
them, so ``run``, ``status``, ``verify`` and ``failover`` have something to show. ``local down``
stops the clusters and deletes what ``up`` wrote. ``DIR`` is ``./.mirrorlib-local`` unless
``--dir``. The clusters listen on 127.0.0.1 only.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_DIR", "SAMPLE_GROUP", "SAMPLE_RECORDS", "SAMPLE_TOPIC", "add_parser", "run"]

DEFAULT_DIR = ".mirrorlib-local"
SAMPLE_TOPIC = "orders"
SAMPLE_GROUP = "billing"
SAMPLE_RECORDS = 1000
SAMPLE_CONSUMED = 400
CONFIG_FILE = "mm2.properties"

_EXIT_OK = 0
_EXIT_FAILURE = 1


def add_parser(sub: Any) -> None:
    """Register ``local`` and its subcommands on the ``mirrorlib`` subparsers ``sub``."""
    local = sub.add_parser("local", help="local clusters in the background to try a flow on")
    local_sub = local.add_subparsers(dest="local_command", required=True, metavar="ACTION")
    up = local_sub.add_parser("up", help="start local clusters, write DIR/mm2.properties")
    up.add_argument("--clusters", default="A,B", metavar="A,B",
                    help="cluster aliases, comma-separated (default A,B; flow first->second)")  # fmt: skip
    up.add_argument("--no-sample", action="store_true",
                    help=f"no sample topic {SAMPLE_TOPIC!r} and group {SAMPLE_GROUP!r}")  # fmt: skip
    up.add_argument("--timeout", type=float, default=600.0,
                    help="seconds to wait for the clusters (default 600: the first start "
                    "downloads Kafka's jars)")  # fmt: skip
    for parser in (up, local_sub.add_parser("status", help="whether the local clusters run"),
                   local_sub.add_parser("down", help="stop the local clusters, delete their data")):  # fmt: skip
        parser.add_argument("--dir", default=DEFAULT_DIR,
                            help=f"where the clusters and mm2.properties live (default {DEFAULT_DIR})")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    """Run ``mirrorlib local ACTION``; returns the exit code."""
    actions = {"up": _up, "status": _status, "down": _down}
    return actions[args.local_command](args)


def _describe(state: Any) -> str:
    return ", ".join(f"{c.alias} at {c.bootstrap_servers}" for c in state.clusters)


def _up(args: argparse.Namespace) -> int:
    from mirrorlib.cli.output import Output
    from mirrorlib.errors import MirrorError
    from mirrorlib.testing.local import is_running, read_state, start_detached

    directory = Path(args.dir)
    aliases = [a.strip() for a in args.clusters.split(",") if a.strip()]
    if len(aliases) < 2 or len(set(aliases)) != len(aliases):
        raise MirrorError(f"--clusters needs at least two distinct aliases, not {args.clusters!r}")
    output = Output()
    state = read_state(directory)
    if state is not None and is_running(state):
        output.line(f"local clusters already run in {directory}: {_describe(state)}")
        output.report(_next_steps(directory, sample=False))
        return _EXIT_OK
    with output.activity(f"starting local Kafka clusters {', '.join(aliases)} in {directory} "
                         "(the first start downloads Kafka's jars) ..."):  # fmt: skip
        state = start_detached(directory, aliases, timeout=args.timeout)
    try:
        config = _write_config(directory, state)
        sample = not args.no_sample
        if sample:
            with output.activity(f"writing sample data to {SAMPLE_TOPIC!r} on {aliases[0]} ..."):
                _sample(state.clusters[0].bootstrap_servers, aliases[0])
    except BaseException:
        from mirrorlib.testing.local import stop_detached

        stop_detached(directory)
        raise
    lines = [f"local clusters running: {_describe(state)}", f"wrote {config}"]
    if sample:
        lines.append(
            f"sample data on {aliases[0]}: topic {SAMPLE_TOPIC!r} ({SAMPLE_RECORDS} records, "
            f"3 partitions); group {SAMPLE_GROUP!r} has read {SAMPLE_CONSUMED} of them"
        )
    output.report(lines, _next_steps(directory, sample=sample, aliases=aliases))
    return _EXIT_OK


def _next_steps(directory: Path, *, sample: bool, aliases: list[str] | None = None) -> list[str]:
    config = shlex.quote(str(directory / CONFIG_FILE))
    source, target = (aliases or ["A", "B"])[:2]
    group = SAMPLE_GROUP if sample else "GROUP"
    dir_opt = "" if str(directory) == DEFAULT_DIR else f" --dir {shlex.quote(str(directory))}"
    steps = [
        (
            f"mirrorlib run {config}",
            "replicate until Ctrl-C (leave it running, go on in another terminal)",
        ),
        (f"mirrorlib status {config}", "lag, heartbeats, checkpoints"),
        (f"mirrorlib verify {config}", "every record copied?"),
        (
            f"mirrorlib failover {config} --group {group} --from {source} --to {target} --dry-run",
            "where the group would resume",
        ),
        (f"mirrorlib local down{dir_opt}", "stop the clusters, delete their data"),
    ]
    return ["next:", *(line for command, what in steps for line in (f"  # {what}", f"  {command}"))]


def _write_config(directory: Path, state: Any) -> Path:
    """``DIR/mm2.properties``: the first cluster to the second, for one broker each."""
    from mirrorlib.core.config import MirrorConfig
    from mirrorlib.testing.mm2 import mm2_properties

    conns = {c.alias: {"bootstrap.servers": c.bootstrap_servers} for c in state.clusters}
    aliases = list(conns)
    props = mm2_properties(conns, [(aliases[0], aliases[1])], interval_seconds=2,
                           offset_flush_interval_ms=2000)  # fmt: skip
    # mm2_properties also serves the real MM2 (Connect worker settings mirrorlib has no use for):
    # a file written for mirrorlib holds nothing that every command would warn about
    warned = {w.key for w in MirrorConfig.from_properties(props).warnings}
    props = {key: value for key, value in props.items() if key not in warned}
    path = directory / CONFIG_FILE
    header = (
        f"# written by `mirrorlib local up` for the local clusters {', '.join(aliases)}\n"
        f"# flow {aliases[0]}->{aliases[1]}; replication factor 1 (one broker each); "
        "short intervals for trying things\n"
    )
    # plain `key=value` lines: the values are addresses, numbers and regexes (no escapes needed)
    body = "".join(f"{key}={value}\n" for key, value in props.items())
    path.write_text(header + body, encoding="utf-8")
    return path


def _sample(bootstrap: str, alias: str) -> None:
    """Topic ``orders`` (3 partitions, 1000 records) and group ``billing`` at 400 of them."""
    from mirrorlib.cli.demo import consume_and_commit
    from mirrorlib.testing import ExternalCluster

    cluster = ExternalCluster(alias, bootstrap)
    cluster.create_topic(SAMPLE_TOPIC, 3)
    for partition in range(3):
        cluster.produce(
            SAMPLE_TOPIC,
            [f"order #{i}" for i in range(partition, SAMPLE_RECORDS, 3)],
            partition=partition,
        )
    consume_and_commit(cluster.client_config(), SAMPLE_GROUP, SAMPLE_TOPIC, SAMPLE_CONSUMED)


def _status(args: argparse.Namespace) -> int:
    from mirrorlib.cli.output import Output
    from mirrorlib.testing.local import is_running, read_state

    directory = Path(args.dir)
    state = read_state(directory)
    output = Output()
    if state is None:
        output.line(f"no local clusters in {directory} (start them: mirrorlib local up)")
        return _EXIT_FAILURE
    if not is_running(state):
        output.line(f"the local clusters in {directory} stopped (clean up: mirrorlib local down)")
        return _EXIT_FAILURE
    output.line(f"local clusters running in {directory}: {_describe(state)}")
    output.line(f"config: {directory / CONFIG_FILE}")
    return _EXIT_OK


def _down(args: argparse.Namespace) -> int:
    from mirrorlib.cli.output import Output
    from mirrorlib.testing.local import stop_detached

    directory = Path(args.dir)
    output = Output()
    with output.activity(f"stopping the local clusters in {directory} ..."):
        ran = stop_detached(directory)
    (directory / CONFIG_FILE).unlink(missing_ok=True)
    if directory.is_dir() and not any(directory.iterdir()):
        directory.rmdir()
    output.line("stopped the local clusters" if ran else f"no local clusters ran in {directory}")
    return _EXIT_OK
