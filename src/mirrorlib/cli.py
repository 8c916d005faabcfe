"""The ``mirrorlib`` command line.

``mirrorlib run CONFIG [--clusters ALIAS ...]`` is a drop-in for ``connect-mirror-maker.sh``:
it reads an MM2 properties file and runs every enabled flow (or those targeting ``--clusters``)
until SIGINT/SIGTERM, then stops gracefully (positions stored) and exits 0.

Exit codes: 0 success; 1 runtime failure (a flow failed, e.g. data loss with
``data.loss.action=fail``); 2 bad command line; 3 invalid configuration.
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from mirrorlib.errors import ConfigError, MirrorError

__all__ = ["main"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_CONFIG = 3


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="mirrorlib", description="Kafka MirrorMaker 2 as a Python library and command."
    )
    parser.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING or ERROR")
    parser.add_argument("-v", "--verbose", action="store_true", help="show error details")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="replicate, like connect-mirror-maker.sh")
    run.add_argument("config", help="MM2 properties file (mm2.properties)")
    run.add_argument(
        "--clusters", nargs="+", metavar="ALIAS", help="only flows whose target is one of these"
    )
    return parser


def _run(args: argparse.Namespace) -> int:
    from mirrorlib.config import MirrorConfig
    from mirrorlib.replicator import Replicator
    from mirrorlib.runtime.status import FlowState

    config = MirrorConfig.from_file(args.config)
    for warning in config.warnings:
        logging.getLogger("mirrorlib").warning("%s", warning)
    replicator = Replicator(config, clusters=args.clusters)
    replicator.run()
    failed = [s for s in replicator.status() if s.state is FlowState.FAILED]
    for status in failed:
        print(f"mirrorlib: flow {status.name} failed: {'; '.join(status.errors)}", file=sys.stderr)
    return EXIT_FAILURE if failed else EXIT_OK


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    try:
        if args.command == "run":
            return _run(args)
    except ConfigError as exc:
        print(f"mirrorlib: configuration error: {exc}", file=sys.stderr)
        if args.verbose:
            raise
        return EXIT_CONFIG
    except MirrorError as exc:
        print(f"mirrorlib: {exc}", file=sys.stderr)
        if args.verbose:
            raise
        return EXIT_FAILURE
    parser.error(f"unknown command {args.command}")
    return EXIT_USAGE  # pragma: no cover


if __name__ == "__main__":
    sys.exit(main())
