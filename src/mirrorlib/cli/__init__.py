"""The ``mirrorlib`` command line.

Commands (``mirrorlib COMMAND --help`` for the options):

``run CONFIG [--clusters ALIAS ...]``
    A drop-in for ``connect-mirror-maker.sh``: runs every enabled flow (or those targeting
    ``--clusters``) until SIGINT/SIGTERM, then stops gracefully (positions stored). A flow that
    fails (data loss with ``data.loss.action=fail``) stops them all, with exit code 1.
``status CONFIG [--json] [--watch SECONDS]``
    For each flow, read from the clusters: state, per-partition lag in records and seconds,
    heartbeat age, last checkpoint age, errors.
``plan CONFIG [--flow A->B] [--json]``
    Dry run: which source topics map to which remote topics, what would be created, which configs
    and ACLs would change, which topics are skipped and why.
``verify CONFIG [--flow A->B] [--topics REGEX] [--json]``
    Audits flows record by record: missing, extra and duplicated records per partition.
``failover --group G --from A --to B CONFIG [--dry-run] [--allow-skip] [--allow-empty] [--force] [--json]``
    Commits group G's translated offsets on B (see :mod:`mirrorlib.runtime.failover`). Many
    groups at once: repeat ``--group``, or ``--groups REGEX``, or ``--all-groups`` (every group
    with checkpoints); one result per group.
``demo``
    Starts two local clusters, replicates, fails a consumer group over and shows where it resumed.
``local up|status|down [--dir DIR]``
    Local clusters that keep running in the background, with a ready ``DIR/mm2.properties`` (and
    sample data) to try ``run``, ``status``, ``verify`` and ``failover`` on
    (see :mod:`mirrorlib.cli.local`).

Exit codes: 0 success; 1 runtime failure (a cluster unreachable, a flow failed); 2 bad command
line; 3 invalid configuration; 4 ``verify`` found missing, extra or duplicated records; 5
``failover`` refused (the group is still active or its state unknown, would skip records, or
has nothing to move;
also with ``--dry-run``; for many groups: every group refused); 6 a failover of many groups
partly failed (some groups failed over, the others were refused or failed: named on stderr).
Errors are one line on stderr; ``--verbose`` adds the traceback.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import re
import signal
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from typing import Any

from mirrorlib.errors import ConfigError, MirrorError

__all__ = ["main"]

log = logging.getLogger(__name__)

_STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_CONFIG = 3
EXIT_DIFFERENCES = 4
EXIT_REFUSED = 5
EXIT_PARTIAL = 6

#: seconds a cluster has to answer the read-only commands (and ``run``, before it is reported)
DEFAULT_TIMEOUT = 10.0
_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


# -- argument types: bad values are usage errors (exit 2), never tracebacks --------------------


def _number(kind: Callable[[str], Any], *, low: float, high: float | None = None,
            what: str) -> Callable[[str], Any]:  # fmt: skip
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}") from None
        if math.isnan(value) or value < low or (high is not None and value > high):
            raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
        return value

    return parse


_seconds = _number(float, low=0.001, high=86_400.0 * 365, what="a positive number of seconds")
_port = _number(int, low=1, high=65535, what="a port number (1-65535)")
_count = _number(int, low=1, what="a positive whole number")


def _regex(text: str) -> str:
    try:
        re.compile(text)
    except re.error as exc:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a valid regular expression: {exc}"
        ) from None
    return text


def _flow(text: str) -> str:
    source, arrow, target = text.partition("->")
    if not arrow or not source.strip() or not target.strip() or "->" in target:
        raise argparse.ArgumentTypeError(f"{text!r} is not a flow: write SOURCE->TARGET, e.g. A->B")
    return text


def _level(text: str) -> str:
    return text.upper()


def _timeout(parser: argparse.ArgumentParser, default: float, help: str) -> None:
    parser.add_argument("--timeout", type=_seconds, default=default, metavar="SECONDS",
                        help=f"{help} (default {default:g})")  # fmt: skip


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mirrorlib",
        description="Kafka MirrorMaker 2 as a Python library and command.",
        epilog="exit codes: 0 ok, 1 failure, 2 usage, 3 configuration, "
        "4 verify found differences, 5 failover refused, 6 failover of many groups partly failed",
    )
    parser.add_argument(
        "--log-level", type=_level, choices=_LOG_LEVELS, default=None, metavar="LEVEL",
        help="DEBUG, INFO, WARNING or ERROR (run: INFO, else WARNING)",
    )  # fmt: skip
    parser.add_argument("-v", "--verbose", action="store_true", help="show error details")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="replicate, like connect-mirror-maker.sh")
    run.add_argument("config", help="MM2 properties file (mm2.properties)")
    run.add_argument(
        "--clusters", nargs="+", metavar="ALIAS", help="only flows whose target is one of these"
    )
    run.add_argument(
        "--metrics-port",
        type=_port,
        metavar="PORT",
        help="serve Prometheus metrics on this port (needs the prometheus extra)",
    )
    run.add_argument(
        "--metrics-address", default="127.0.0.1", metavar="ADDR", help="address for --metrics-port"
    )
    _timeout(run, DEFAULT_TIMEOUT, "seconds a cluster has to answer before it is reported "
             "unreachable; the flow keeps trying")  # fmt: skip

    status = sub.add_parser("status", help="state, lag, heartbeat and checkpoint age per flow")
    status.add_argument("config", help="MM2 properties file")
    status.add_argument("--flow", type=_flow, metavar="A->B", help="only this flow")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument(
        "--watch", type=_seconds, metavar="SECONDS", help="refresh every SECONDS until Ctrl-C"
    )
    status.add_argument("--details", action="store_true", help="show every partition")
    _timeout(status, DEFAULT_TIMEOUT, "seconds a cluster has to answer each request")

    plan = sub.add_parser("plan", help="dry run: topics, configs and ACLs a flow would change")
    plan.add_argument("config", help="MM2 properties file")
    plan.add_argument("--flow", type=_flow, metavar="A->B", help="only this flow")
    plan.add_argument("--json", action="store_true", help="machine-readable output")
    plan.add_argument("--strict", action="store_true",
                      help="exit 3 when the configuration has warnings")  # fmt: skip
    _timeout(plan, DEFAULT_TIMEOUT, "seconds a cluster has to answer each request")

    verify = sub.add_parser("verify", help="compare source and remote records of a flow")
    verify.add_argument("config", help="MM2 properties file")
    verify.add_argument("--flow", type=_flow, metavar="A->B", help="only this flow")
    verify.add_argument("--topics", type=_regex, metavar="REGEX",
                        help="only source topics matching REGEX")  # fmt: skip
    verify.add_argument("--json", action="store_true", help="machine-readable output")
    _timeout(verify, 600.0, f"seconds for the whole audit; a cluster has min(SECONDS, "
             f"{DEFAULT_TIMEOUT:g}) to answer each request")  # fmt: skip

    fo = sub.add_parser("failover", help="move consumer groups' offsets to another cluster")
    fo.add_argument("config", help="MM2 properties file")
    fo.add_argument("--group", action="append", default=[], metavar="GROUP",
                    help="consumer group id (repeat for several groups)")  # fmt: skip
    fo.add_argument("--groups", type=_regex, metavar="REGEX",
                    help="also every group matching REGEX (fully) among those with checkpoints "
                    "and those the old cluster lists that the flow's groups filter accepts")  # fmt: skip
    fo.add_argument("--all-groups", action="store_true",
                    help="every group with checkpoints of the flow on the new cluster")  # fmt: skip
    fo.add_argument("--from", dest="from_alias", required=True, metavar="ALIAS",
                    help="cluster the group consumed from")  # fmt: skip
    fo.add_argument("--to", dest="to_alias", required=True, metavar="ALIAS",
                    help="cluster the group moves to")  # fmt: skip
    fo.add_argument("--dry-run", action="store_true",
                    help="show the plan, commit nothing (exit 5 if it would be refused)")  # fmt: skip
    fo.add_argument("--allow-skip", action="store_true",
                    help="proceed although the group is past the translation on the new "
                    "cluster (the records in between are never read)")  # fmt: skip
    fo.add_argument("--allow-empty", action="store_true",
                    help="succeed although the group has no committed offsets to move")  # fmt: skip
    fo.add_argument("--force", action="store_true",
                    help="proceed although the old cluster answers but not about the group "
                    "(its state there is unknown): only if its consumers there are stopped")  # fmt: skip
    fo.add_argument("--json", action="store_true", help="machine-readable output")
    _timeout(fo, 30.0, "seconds a cluster has to answer each request")

    demo = sub.add_parser("demo", help="local clusters: replicate, fail a consumer group over")
    demo.add_argument("--records", type=_count, default=300, help="records to produce (300)")

    from mirrorlib.cli.local import add_parser as add_local_parser

    add_local_parser(sub)
    return parser


def _load(path: str, *, show_warnings: bool = True) -> Any:
    """The configuration at ``path``, its warnings printed once on stderr; a TLS file that does
    not exist is a configuration error naming the cluster, the key and the file."""
    from mirrorlib.core.config import MirrorConfig
    from mirrorlib.core.config.clients import ROLES
    from mirrorlib.kafka.tls import check_tls_files

    config = MirrorConfig.from_file(path)
    if show_warnings:
        for warning in config.warnings:
            print(f"mirrorlib: warning: {warning}", file=sys.stderr)
    for alias in config.clusters:
        for role in ROLES:
            try:
                client = config.client_config(alias, role)
            except ConfigError:
                continue  # no bootstrap.servers: reported if the cluster is used
            check_tls_files(client, alias=alias)
    return config


def _stop_before_start(_signum: int, _frame: object) -> None:
    raise KeyboardInterrupt  # unwinds the start-up; `_run` turns it into a clean exit


def _run(args: argparse.Namespace) -> int:
    # Until Replicator.run installs its own handlers, a stop request ends the command cleanly
    # (exit 0, nothing started) instead of killing it with the signal's default action.
    previous = {sig: signal.signal(sig, _stop_before_start) for sig in _STOP_SIGNALS}
    try:
        return _run_replicator(args)
    except KeyboardInterrupt:
        log.info("stop requested before the replicator started")
        return EXIT_OK
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _run_replicator(args: argparse.Namespace) -> int:
    from mirrorlib.runtime.process import tune_gc
    from mirrorlib.runtime.replicator import Replicator

    tune_gc()  # this process is mirrorlib's own (an embedding application's is not touched)
    config = _load(args.config, show_warnings=False)  # the replicator logs them
    replicator = Replicator(config, clusters=args.clusters, connect_timeout=args.timeout)
    server = None
    if args.metrics_port is not None:
        from mirrorlib.runtime.prometheus import start_http_server

        try:
            server = start_http_server(replicator, args.metrics_port, args.metrics_address)
        except OSError as exc:
            raise MirrorError(
                f"cannot serve metrics on {args.metrics_address}:{args.metrics_port} "
                f"(--metrics-address, --metrics-port): {exc.strerror or exc}"
            ) from exc
    try:
        replicator.run()  # a failed flow raises FlowFailedError: exit code 1
    finally:
        if server is not None:
            server.shutdown()
    return EXIT_FAILURE if _report_never_up(replicator) else EXIT_OK


def _report_never_up(replicator: Any) -> bool:
    """After a stop (SIGTERM): print the flows that never came up with the error that kept
    them down (a cluster that did not answer, a refused client configuration); whether there
    were any. A flow stopped while it was still starting, with no error yet (the stop came
    before its clusters' first answer), is not a failure: it is logged, not reported."""
    errors = {s.name: s.errors for s in replicator.status()}
    failed = False
    for name in replicator.never_up:
        why = "; ".join(errors.get(name, ()))
        if why:
            print(f"mirrorlib: flow {name} never came up: {why}", file=sys.stderr)
            failed = True
        else:
            log.info("flow %s stopped while starting, before its clusters answered", name)
    return failed


def _status(args: argparse.Namespace) -> int:
    from mirrorlib.cli.output import Output, status_header
    from mirrorlib.core.audit import FlowHealth, status_json
    from mirrorlib.core.report import Block
    from mirrorlib.runtime.operations import flow_status, select_flows

    config = _load(args.config)
    flows = select_flows(config, args.flow)
    if not args.json:
        report: list[FlowHealth] = []

        def frame() -> list[list[Block]]:
            report[:] = [flow_status(config, f, timeout=args.timeout) for f in flows]
            limit = None if args.details else 20
            return [[status_header(len(report))], *(h.blocks(limit) for h in report)]

        Output().watch(frame, args.watch, activity=f"reading the state of {len(flows)} flow(s) ...")
        bad = any(h.state in ("unreachable", "stalled") for h in report)
        return EXIT_FAILURE if bad and not args.watch else EXIT_OK
    while True:
        report = [flow_status(config, f, timeout=args.timeout) for f in flows]
        print(status_json(report), flush=True)
        if not args.watch:
            bad = any(h.state in ("unreachable", "stalled") for h in report)
            return EXIT_FAILURE if bad else EXIT_OK
        try:
            time.sleep(args.watch)
        except KeyboardInterrupt:
            return EXIT_OK


def _plan(args: argparse.Namespace) -> int:
    from mirrorlib.cli.output import Output
    from mirrorlib.core.plans import CreatePartitions, CreateTopic, SkippedTopic
    from mirrorlib.runtime.operations import flow_plan, select_flows

    config = _load(args.config)
    if args.strict and config.warnings:
        raise ConfigError(
            f"{len(config.warnings)} configuration warning(s) (--strict); fix them or drop --strict"
        )
    out: list[dict[str, Any]] = []
    output = Output()
    for flow in select_flows(config, args.flow):
        plan = flow_plan(config, flow, timeout=args.timeout)
        mapping = {
            s.source_topic: s.name
            for s in plan.steps
            if isinstance(s, CreateTopic | CreatePartitions) and s.source_topic
        }
        if args.json:
            out.append(
                {
                    "flow": flow.name,
                    "steps": [line for s in plan.steps for line in s.describe()],
                    "creates": mapping,
                    "skipped": [
                        {"topic": s.name, "reason": str(s.reason)}
                        | ({"detail": s.detail} if s.detail else {})
                        for s in plan.skipped
                        if isinstance(s, SkippedTopic)
                    ],
                    "skipped_acls": [
                        s.describe() for s in plan.skipped if not isinstance(s, SkippedTopic)
                    ],
                }
            )
            continue
        head = f"== {flow.name} (policy {type(flow.policy).__name__})"
        output.report([head, *plan.describe().splitlines()])
    if args.json:
        print(json.dumps(out, indent=2))
    return EXIT_OK


def _verify(args: argparse.Namespace) -> int:
    from mirrorlib.cli.output import Output
    from mirrorlib.runtime.operations import select_flows, verify_flow

    config = _load(args.config)
    output = Output()
    reports = []
    for flow in select_flows(config, args.flow):
        if args.json:
            report = verify_flow(
                config, flow, args.topics, timeout=args.timeout, request_timeout=DEFAULT_TIMEOUT
            )
        else:
            with output.progress() as progress:
                report = verify_flow(
                    config, flow, args.topics, timeout=args.timeout,
                    request_timeout=DEFAULT_TIMEOUT, progress=progress,
                )  # fmt: skip
            output.report(report.blocks())
        reports.append(report)
    if args.json:
        print(json.dumps([r.to_dict() for r in reports], indent=2))
    if any(r.errors for r in reports):
        return EXIT_FAILURE
    return EXIT_OK if all(r.ok for r in reports) else EXIT_DIFFERENCES


def _failover(args: argparse.Namespace) -> int:
    from mirrorlib.cli.output import Output
    from mirrorlib.runtime.failover import FailoverRefusedError, failover

    if not args.group and args.groups is None and not args.all_groups:
        print("mirrorlib failover: give --group GROUP (repeatable), --groups REGEX or "
              "--all-groups", file=sys.stderr)  # fmt: skip
        return EXIT_USAGE
    if len(args.group) > 1 or args.groups is not None or args.all_groups:
        return _failover_many(args)
    config = _load(args.config)
    try:
        plan = failover(
            config, args.group[0], args.from_alias, args.to_alias, dry_run=args.dry_run,
            allow_skip=args.allow_skip, allow_empty=args.allow_empty, force=args.force,
            timeout=args.timeout,
        )  # fmt: skip
    except FailoverRefusedError as exc:
        if args.json:
            print(exc.plan.to_json())
        else:
            Output().report(exc.plan.blocks())
        print(f"mirrorlib: failover refused: {exc}", file=sys.stderr)
        return EXIT_REFUSED
    if args.json:
        print(plan.to_json())
    else:
        Output().report(plan.blocks(), ["dry run: nothing committed"] if args.dry_run else [])
    return EXIT_OK


def _failover_many(args: argparse.Namespace) -> int:
    """Many groups: one result per group; exit 0 when every group succeeded, 6 when some did
    and others did not, 5 when none did and all were refused, 1 when none did and one failed."""
    from mirrorlib.cli.output import Output
    from mirrorlib.runtime.failover import failover_groups

    config = _load(args.config)
    batch = failover_groups(
        config, args.group, args.from_alias, args.to_alias, pattern=args.groups,
        all_groups=args.all_groups, dry_run=args.dry_run, allow_skip=args.allow_skip,
        allow_empty=args.allow_empty, force=args.force, timeout=args.timeout,
    )  # fmt: skip
    if args.json:
        print(batch.to_json())
    else:
        Output().report(batch.blocks())
    if not batch.results:
        if args.allow_empty:
            return EXIT_OK
        print("mirrorlib: failover refused: no group selected (no group matches, or none has "
              "checkpoints); pass --allow-empty if there is nothing to move", file=sys.stderr)  # fmt: skip
        return EXIT_REFUSED
    failed = batch.failed
    if not failed:
        return EXIT_OK
    print(f"mirrorlib: failover failed for {len(failed)} of {len(batch.results)} group(s): "
          f"{', '.join(failed)}", file=sys.stderr)  # fmt: skip
    if batch.succeeded:
        return EXIT_PARTIAL
    return EXIT_REFUSED if batch.all_refused else EXIT_FAILURE


def _demo(args: argparse.Namespace) -> int:
    from mirrorlib.cli.demo import run_demo

    run_demo(records=args.records)
    return EXIT_OK


def _local(args: argparse.Namespace) -> int:
    from mirrorlib.cli.local import run

    return run(args)


_COMMANDS = {
    "run": _run,
    "status": _status,
    "plan": _plan,
    "verify": _verify,
    "failover": _failover,
    "demo": _demo,
    "local": _local,
}


def _quiet_closed_stdout() -> None:
    """After a broken pipe (``mirrorlib status --json | head``): send what is left of stdout
    to /dev/null, so that Python does not complain at exit."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    level = args.log_level or ("INFO" if args.command == "run" else "WARNING")
    logging.basicConfig(
        level=getattr(logging, level), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    if args.command != "run" and args.log_level is None and not args.verbose:
        # the one-line error says why a cluster failed; librdkafka's retries would repeat it
        logging.getLogger("mirrorlib.librdkafka").setLevel(logging.ERROR)
    try:
        return _COMMANDS[args.command](args)
    except BrokenPipeError:
        _quiet_closed_stdout()
        return EXIT_FAILURE
    except ConfigError as exc:
        print(f"mirrorlib: configuration error: {exc}", file=sys.stderr)
        if args.verbose:
            traceback.print_exc()
        return EXIT_CONFIG
    except MirrorError as exc:
        print(f"mirrorlib: {exc}", file=sys.stderr)
        if args.verbose:
            traceback.print_exc()
        return EXIT_FAILURE
    except OSError as exc:
        print(f"mirrorlib: {exc}", file=sys.stderr)
        if args.verbose:
            traceback.print_exc()
        return EXIT_FAILURE
    except KeyboardInterrupt:
        return EXIT_FAILURE


if __name__ == "__main__":
    sys.exit(main())
