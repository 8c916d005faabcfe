"""An embedded replicator inside your own service.

Instead of running ``connect-mirror-maker.sh`` next to your application, start a
:class:`mirrorlib.Replicator` in it: replication shares the process's lifecycle, logging and
health checks. This example is a small service that

* reads an ``mm2.properties`` file (or builds the config from two bootstrap addresses),
* replicates in background threads,
* answers a health check from :meth:`Replicator.status` (state, lag in records and seconds,
  and with ``--tasks N`` > 1 the N copier worker processes: partitions, rate, restarts),
* stops gracefully on SIGTERM/SIGINT (positions are stored, nothing is copied twice).

Run it: ``python examples/embedded_service.py --source localhost:9092 --target localhost:9093``
(add ``--seconds 30`` to stop by itself, ``--tasks 2`` to copy with two worker processes
(MM2's ``tasks.max``), or pass ``--config mm2.properties``).
"""

from __future__ import annotations

import argparse
import json
import signal
import threading
from typing import Any

from mirrorlib import MirrorConfig, Replicator


class ReplicationService:
    """Owns a Replicator; ``health()`` is what a /health endpoint would return."""

    def __init__(self, config: MirrorConfig) -> None:
        self.replicator = Replicator(config)
        self._stopped = threading.Event()

    def health(self) -> dict[str, Any]:
        flows = []
        for status in self.replicator.status():
            lag_s = [p.lag_seconds for p in status.partitions if p.lag_seconds is not None]
            flows.append(
                {
                    "flow": status.name,
                    "state": str(status.state),
                    "lag_records": status.lag_records,
                    "lag_seconds": max(lag_s) if lag_s else None,
                    "replicated": sum(p.record_count for p in status.partitions),
                    "errors": list(status.errors),
                    # tasks.max > 1: one copier process per slot, supervised by this one
                    "workers": [
                        {
                            "slot": w.slot,
                            "pid": w.pid,
                            "partitions": w.partitions,
                            "records_per_second": w.records_per_second,
                            "restarts": w.restarts,
                        }
                        for w in status.workers
                    ],
                }
            )
        healthy = all(f["state"] in ("starting", "running") for f in flows)
        return {"healthy": healthy, "flows": flows}

    def serve(self, seconds: float | None = None, report_every: float = 5.0) -> dict[str, Any]:
        """Replicate until SIGTERM/SIGINT (or ``seconds``); return the last health report."""
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                signal.signal(sig, lambda *_: self._stopped.set())
        if seconds is not None:
            threading.Timer(seconds, self._stopped.set).start()
        with self.replicator:
            while not self._stopped.wait(report_every):
                print(json.dumps(self.health()), flush=True)
            report = self.health()
        print(json.dumps(report), flush=True)
        return report


def build_config(args: argparse.Namespace) -> MirrorConfig:
    if args.config:
        return MirrorConfig.from_file(args.config)
    return MirrorConfig.from_properties(
        {
            "clusters": "primary, standby",
            "primary.bootstrap.servers": args.source,
            "standby.bootstrap.servers": args.target,
            "primary->standby.enabled": "true",
            "primary->standby.topics": args.topics,
            # single-broker development clusters
            "replication.factor": "1",
            "checkpoints.topic.replication.factor": "1",
            "heartbeats.topic.replication.factor": "1",
            "offset-syncs.topic.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "refresh.topics.interval.seconds": "2",
            "tasks.max": str(args.tasks),
        }
    )


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", help="an mm2.properties file")
    parser.add_argument("--source", default="localhost:9092", help="primary bootstrap servers")
    parser.add_argument("--target", default="localhost:9093", help="standby bootstrap servers")
    parser.add_argument("--topics", default=".*", help="topics to replicate (regex list)")
    parser.add_argument("--seconds", type=float, help="stop after this many seconds")
    parser.add_argument(
        "--tasks", type=int, default=1, help="copier worker processes per flow (tasks.max)"
    )
    parser.add_argument("--report-every", type=float, default=5.0)
    args = parser.parse_args(argv)
    service = ReplicationService(build_config(args))
    return service.serve(args.seconds, args.report_every)


if __name__ == "__main__":
    main()
