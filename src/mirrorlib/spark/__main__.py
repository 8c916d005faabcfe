"""``python -m mirrorlib.spark mm2.properties --checkpoint-location DIR [--backfill]``.

``python -m mirrorlib.spark --prepare [--master URL]`` writes the driver's class-data-sharing
archive ahead of the first job (:func:`mirrorlib.spark.session.prepare_archive`), e.g. while
building an image.

Exit status: 0 done, 1 the replication (or the preparation) failed, 2 bad arguments or
configuration.

Also the application file for ``spark-submit`` (it only uses absolute imports)::

    spark-submit --master yarn "$(python -c 'import mirrorlib.spark.__main__ as m; print(m.__file__)')" \\
        mm2.properties --checkpoint-location hdfs:///mirrorlib/chk
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from mirrorlib.core.config import MirrorConfig
from mirrorlib.errors import ConfigError
from mirrorlib.spark import DEFAULT_MAX_RECORDS_PER_BATCH, SparkReplicator


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m mirrorlib.spark",
        description="Run the replication flows of an MM2 properties file on Apache Spark.",
    )
    p.add_argument("config", nargs="?", help="the mm2.properties file")
    p.add_argument(
        "--checkpoint-location",
        help="Spark checkpoint root (one sub-directory per flow); restart with the same one",
    )
    p.add_argument(
        "--prepare",
        action="store_true",
        help="only write the driver's class-data archive that later jobs map (e.g. in an "
        "image build), then exit; no configuration needed",
    )
    p.add_argument(
        "--backfill",
        action="store_true",
        help="copy everything up to the end offsets seen at start, then exit",
    )
    p.add_argument(
        "--clusters", nargs="+", metavar="ALIAS", help="only flows targeting these clusters"
    )
    p.add_argument("--master", help="Spark master URL when not started by spark-submit")
    p.add_argument("--trigger-interval", default="1 second", help="micro-batch interval")
    p.add_argument(
        "--max-records-per-batch",
        type=int,
        default=DEFAULT_MAX_RECORDS_PER_BATCH,
        help="records per micro-batch, shared by the partitions (0: no cap)",
    )
    p.add_argument("--tasks", type=int, help="write tasks per batch (default: executor cores)")
    p.add_argument("--log-level", default="INFO", help="Python log level (default INFO)")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if args.prepare:
        return _prepare(args.master)
    missing = [flag for flag, value in (("config", args.config),
               ("--checkpoint-location", args.checkpoint_location)) if not value]  # fmt: skip
    if missing:
        print(f"error: missing {' and '.join(missing)}", file=sys.stderr)
        return 2
    try:
        config = MirrorConfig.from_file(args.config)
        replicator = SparkReplicator(
            config,
            checkpoint_location=args.checkpoint_location,
            mode="backfill" if args.backfill else "continuous",
            clusters=args.clusters,
            trigger_interval=args.trigger_interval,
            max_records_per_batch=args.max_records_per_batch or None,
            tasks=args.tasks,
            master=args.master,
        )
    except (ConfigError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        replicator.run()
    except Exception as exc:
        logging.getLogger("mirrorlib.spark").error("replication failed: %s", exc)
        return 1
    finally:
        try:
            replicator.close()
        except Exception as exc:  # exiting anyway
            logging.getLogger("mirrorlib.spark").debug("closing the Spark session: %s", exc)
    return 0


def _prepare(master: str | None) -> int:
    from mirrorlib.spark.session import prepare_archive

    try:
        archive = prepare_archive(master)
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        logging.getLogger("mirrorlib.spark").error("preparing the class-data archive: %s", exc)
        return 1
    size = f"{archive.size / 1e6:.0f} MB"
    if archive.written:
        print(f"class-data archive written in {archive.seconds:.1f}s: {archive.path} ({size})")
    else:
        print(f"class-data archive already there: {archive.path} ({size})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
