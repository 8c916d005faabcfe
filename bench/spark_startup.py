"""Start-up of a Spark job to its first record on the target (issue 13: ≤ 10 s).

``flock /work/bench.lock python -m bench.spark_startup [--runs N] [--variant NAME=SRC[;ARGS]]``

Starts two local clusters, preloads ``--records`` records of 100 B in 4 partitions, then runs
``python -m mirrorlib.spark mm2.properties --backfill --master local[2]`` as a fresh process per
run, alternating the variants, and records the seconds from the process start to the first
record on the target, and to the end of the job. A variant is a ``src/`` directory to run
mirrorlib from (e.g. ``/work/main/src`` against a worktree's) and optional extra
``PYSPARK_SUBMIT_ARGS``. The driver's log (INFO, with mirrorlib's start-up timings) of each run
is kept next to the JSON result.

``--cache NAME=fresh`` gives each run of variant NAME a new, empty cache directory (the first
job of a fresh installation: no class-data archive; it writes one as it exits);
``--cache NAME=prepared`` the same, after ``python -m mirrorlib.spark --prepare`` wrote the
archive into it (timed apart). Other variants use the user's cache directory.
``--prop NAME:KEY=VALUE`` adds a property to variant NAME's ``mm2.properties`` (e.g.
``small:A.consumer.queued.min.messages=5000``); ``--partitions`` and ``--master`` set the data
set's partitions (4) and the job's master (``local[2]``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from bench import kio
from bench.contenders import SPARK_SUBMIT_ARGS, mirrorlib_src
from mirrorlib.testing import JvmOptions, mm2_properties, start_clusters
from mirrorlib.testing.config import render_properties

ROOT = Path(__file__).resolve().parent.parent


def _variant(spec: str) -> tuple[str, str, str]:
    name, _, rest = spec.partition("=")
    src, _, args = rest.partition(";")
    return name, str(mirrorlib_src(src or str(ROOT / "src"))), args


def run_once(
    name: str, src: str, args: str, props: Path, topic: str, records: int, ob: kio.Offsets,
    work: Path, k: int, cache: str | None = None, master: str = "local[2]",
) -> dict[str, Any]:  # fmt: skip
    chk = work / f"chk-{name}-{k}"
    log_path = work / f"driver-{name}-{k}.log"
    env = dict(os.environ)
    env.update(
        PYTHONPATH=src,
        PYSPARK_PYTHON=sys.executable,
        PYSPARK_SUBMIT_ARGS=f"{args} {SPARK_SUBMIT_ARGS}".strip(),
    )
    prepare_s = None
    if cache is not None:  # a new, empty cache directory for this run
        env["XDG_CACHE_HOME"] = str(work / f"cache-{name}-{k}")
        if cache == "prepared":
            began = time.monotonic()
            subprocess.run([sys.executable, "-m", "mirrorlib.spark", "--prepare"], env=env,
                           check=True, stdout=subprocess.DEVNULL)  # fmt: skip
            prepare_s = round(time.monotonic() - began, 2)
    cmd = [
        sys.executable, "-m", "mirrorlib.spark", str(props), "--checkpoint-location", str(chk),
        "--master", master, "--backfill", "--log-level", "INFO",
    ]  # fmt: skip
    remote = f"A.{topic}"
    started = time.monotonic()
    started_wall = time.time()
    with log_path.open("w") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)  # fmt: skip
        try:
            first = ob.wait_total(remote, 1, 120, interval=0.02)
            last = ob.wait_total(remote, records, 120, interval=0.05)
            status = proc.wait(120)
            ended = time.monotonic()
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            else:  # the JVM, if it outlived the driver
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
    row = {
        "variant": name,
        "run": k,
        "first_record_s": None if first is None else round(first - started, 2),
        "last_record_s": None if last is None else round(last - started, 2),
        "job_s": round(ended - started, 2),
        "exit_status": status,
        "cache": cache or "user",
        "prepare_s": prepare_s,
        "started_utc": time.strftime("%H:%M:%S", time.gmtime(started_wall))
        + f".{int(started_wall % 1 * 1000):03d}",
        "log": str(log_path),
        "load_average": os.getloadavg(),
    }
    print(json.dumps(row), flush=True)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.spark_startup")
    p.add_argument("--runs", type=int, default=3, help="runs per variant (alternated)")
    p.add_argument("--records", type=int, default=20_000)
    p.add_argument("--variant", action="append", default=[], help="NAME=SRC[;SUBMIT_ARGS]")
    p.add_argument("--out", default=str(ROOT / "bench/results"))
    p.add_argument("--cache", action="append", default=[], help="NAME=fresh|prepared")
    p.add_argument("--prop", action="append", default=[], help="NAME:KEY=VALUE")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--master", default="local[2]")
    args = p.parse_args(argv)
    props_of: dict[str, dict[str, str]] = {}
    for spec in args.prop:
        name, _, kv = spec.partition(":")
        key, _, value = kv.partition("=")
        props_of.setdefault(name, {})[key] = value
    caches = dict(c.split("=", 1) for c in args.cache)
    if set(caches.values()) - {"fresh", "prepared"}:
        p.error("--cache takes NAME=fresh or NAME=prepared")
    variants = [_variant(v) for v in args.variant] or [_variant("current=")]
    stamp = time.strftime("%Y-%m-%d-%H%M", time.gmtime())
    work = Path(f"/tmp/spark-startup-{stamp}")
    work.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    with start_clusters(["A", "B"], jvm=JvmOptions(heap="1g", fast_jit=False)) as (a, b):
        ob = kio.Offsets(b.bootstrap_servers)
        for k in range(args.runs):
            for name, src, extra in variants:
                topic = f"startup-{name}-{k}".replace("_", "-")  # a fresh topic per run
                kio.create_topics(a.bootstrap_servers, {topic: args.partitions})
                kio.producer_performance(work, a.bootstrap_servers, topic, args.records, 100)
                props = work / f"{name}-{k}.properties"
                props.write_text(
                    render_properties(
                        {
                            **mm2_properties(
                                {"A": a.java_client_config(), "B": b.java_client_config()},
                                ["A->B"],
                                topics=topic,
                                groups=topic,
                                interval_seconds=1,
                            ),
                            **props_of.get(name, {}),
                        }
                    )
                )
                time.sleep(1.0)
                rows.append(run_once(name, src, extra, props, topic, args.records, ob, work, k,
                                     caches.get(name), args.master))  # fmt: skip
        ob.close()
    doc = {
        "what": "seconds from `python -m mirrorlib.spark --backfill --master local[2]` start to "
        "the first / last record on the target",
        "records": args.records,
        "record_size": 100,
        "partitions": args.partitions,
        "master": args.master,
        "props": props_of,
        "variants": {
            n: {"src": s, "submit_args": x, "cache": caches.get(n, "user")} for n, s, x in variants
        },
        "rows": rows,
    }
    path = Path(args.out) / f"{stamp}-spark-startup.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
