"""The benchmark harness's pure parts: statistics, ratio table, targets, JSON shape (no broker)."""

from __future__ import annotations

import json
import math

import pytest

from bench import kio, stats


def test_percentile_interpolates_like_numpy():
    assert stats.percentile([1, 2, 3, 4], 50) == 2.5
    assert stats.percentile([5], 99) == 5
    assert stats.percentile(list(range(101)), 99) == 99
    assert math.isnan(stats.percentile([], 50))
    with pytest.raises(ValueError):
        stats.percentile([1], 101)


def test_latency_summary():
    s = stats.latency_summary([float(x) for x in range(1, 101)])
    assert s == {"count": 100, "p50": 50.5, "p99": 99.01, "max": 100.0}


def test_throughput_row():
    row = stats.throughput(
        stats.MIRRORLIB, record_size=1024, partitions=16, records=100_000, seconds=2.0,
        cpu_s=1.5, peak_rss_mb=80.04, extra_field=1,
    )  # fmt: skip
    assert row["records_per_s"] == 50_000
    assert row["mb_per_s"] == 51.2
    assert row["cpu_s_per_million"] == 15.0
    assert row["peak_rss_mb"] == 80.0
    assert row["extra_field"] == 1
    assert set(stats.THROUGHPUT_KEYS) <= set(row)
    with pytest.raises(ValueError):
        stats.throughput(
            "x", record_size=1, partitions=1, records=1, seconds=0, cpu_s=None, peak_rss_mb=None
        )


def _rows():
    def row(c, rate, cpu):
        return stats.throughput(
            c,
            record_size=1024,
            partitions=1,
            records=int(rate),
            seconds=1.0,
            cpu_s=cpu,
            peak_rss_mb=1,
        )

    return [
        row(stats.MIRRORLIB, 30_000, 0.6),
        row(stats.MM2_TUNED, 20_000, 1.0),
        row(stats.MM2_DEFAULTS, 10_000, 1.0),
        row(stats.BARE_LOOP, 40_000, 0.3),
        row(stats.PLAIN_PRODUCER, 60_000, 2.0),
    ]


def test_ratio_rows_and_targets():
    ratios = stats.ratio_rows(_rows())
    assert len(ratios) == 1
    r = ratios[0]
    assert r["tput_vs_mm2"] == pytest.approx(1.5)
    assert r["tput_vs_mm2_defaults"] == pytest.approx(3.0)
    assert r["tput_vs_loop"] == pytest.approx(0.75)
    assert r["tput_vs_producer"] == pytest.approx(0.5)
    # CPU per million: mirrorlib 0.6/30000 vs MM2 1.0/20000
    assert r["cpu_vs_mm2"] == pytest.approx((0.6 / 30_000) / (1.0 / 20_000))
    scenarios = [
        {
            "contender": stats.MIRRORLIB,
            "latency_ms": {"10000": {"p99": 20.0}},
            "failover": {"reread_settled": 0},
        },
        {
            "contender": stats.MM2_TUNED,
            "latency_ms": {"10000": {"p99": 40.0}},
            "failover": {"reread_settled": 50},
        },
        {
            "contender": stats.MM2_DEFAULTS,
            "latency_ms": {"10000": {"p99": 80.0}},
            "failover": {"reread_settled": 90},
        },
    ]
    t = {x["target"]: x for x in stats.targets(ratios, scenarios)}
    tput = t["throughput ÷ MM2, 1 KiB (worst cell)"]
    assert tput["met"] is True and tput["tasks_max"] == 1  # 1.5 >= 1.2
    assert tput["vs_mm2_defaults"] == pytest.approx(3.0)  # the other baseline beside it
    producer = t["throughput ÷ plain producer into the target, 1 KiB (worst cell)"]
    assert producer["value"] == pytest.approx(0.5) and producer["met"] is False
    assert producer["mm2"] == pytest.approx(1 / 3) and producer["mm2_defaults"] == pytest.approx(
        1 / 6
    )
    cpu = t["CPU per record ÷ MM2 (worst cell)"]
    assert cpu["value"] == pytest.approx(0.4) and cpu["met"] is True
    assert cpu["vs_mm2_defaults"] == pytest.approx((0.6 / 30_000) / (1.0 / 10_000))
    assert t["latency p99 @10k/s, ms"]["met"] is True
    assert t["latency p99 @10k/s ÷ MM2"]["value"] == pytest.approx(0.5)
    assert t["latency p99 @10k/s ÷ MM2"]["vs_mm2_defaults"] == pytest.approx(0.25)
    assert not any("ceiling" in name for name in t)  # a reference mirrorlib can beat is none
    rr = next(x for x in t.values() if x["target"].startswith("re-read"))
    assert rr["met"] is True and rr["value"] == -90


def test_ratio_missing_values():
    assert stats.ratio(1.0, None) is None
    assert stats.ratio(1.0, 0) is None
    assert stats.ratio(None, 1.0) is None
    only_ml = [r for r in _rows() if r["contender"] == stats.MIRRORLIB]
    (r,) = stats.ratio_rows(only_ml)
    assert r["tput_vs_mm2"] is None
    assert "n/a" in stats.ratio_table([r])


def test_document_shape_and_tables():
    scenarios = [
        {
            "contender": stats.MIRRORLIB,
            "latency_ms": {"1000": {"p50": 2.0, "p99": 5.0}, "10000": {"p50": 3.0, "p99": 9.0}},
            "first_checkpoint_s": 2.5,
            "failover": {"reread_settled": 0, "reread_immediate": 12},
            "peak_rss_mb": 70.0,
        }
    ]
    doc = stats.document(
        machine={"cores": 2}, versions={"kafka": "4.3.1"}, settings={"date": "2026-01-01"},
        throughput_rows=_rows(), scenarios=scenarios, notes=["n"],
    )  # fmt: skip
    assert stats.check_document(doc) == []
    assert json.loads(json.dumps(doc))["schema"] == stats.SCHEMA_VERSION
    assert stats.check_document({"throughput": [{"contender": "x"}]})  # problems found
    table = stats.throughput_table(doc["throughput"])
    assert table.count("\n") == 1 + len(_rows())
    assert "1 KiB" in table
    sc = stats.scenario_table(doc["scenarios"])
    assert "9.00" in sc and "2.50" in sc
    assert "met" in stats.targets_table(doc["targets"])


def test_size_label_and_fmt():
    assert stats.size_label(100) == "100 B"
    assert stats.size_label(10240) == "10 KiB"
    assert stats.fmt(None) == "n/a"
    assert stats.fmt(1234.5) == "1,234.50"
    assert stats.fmt(1234) == "1,234"


def test_parse_producer_performance():
    out = (
        "50000 records sent, 49950.0 records/sec (48.78 MB/sec), 10.1 ms avg latency, 300.0 ms max latency.\n"
        "100000 records sent, 81037.277147 records/sec (79.14 MB/sec), 85.56 ms avg latency, "
        "322.00 ms max latency, 79 ms 50th, 200 ms 95th, 250 ms 99th, 300 ms 99.9th.\n"
    )
    res = kio.parse_producer_performance(out)
    assert res["records"] == 100_000
    assert res["records_per_s"] == pytest.approx(81037.277147)
    assert res["p99_latency_ms"] == 250
    with pytest.raises(ValueError):
        kio.parse_producer_performance("nothing")


def _spark_row(cid, started=0.0, first=15.0, last=17.0, cpu_first=20.0, cpu_last=23.0):
    return stats.spark_throughput(
        cid, record_size=1024, partitions=1, records=30_000, started=started, first=first,
        last=last, exited=last + 1.0, cpu_at_first=cpu_first, cpu_at_last=cpu_last,
        peak_rss_mb=900.0,
    )  # fmt: skip


def test_spark_throughput_row_has_both_rates():
    row = _spark_row(stats.SPARK_2)
    assert set(stats.THROUGHPUT_KEYS) <= set(row)
    assert row["records_per_s"] == pytest.approx(1764.7, abs=0.1)
    assert row["startup_s"] == 15.0 and row["copy_s"] == 2.0 and row["job_s"] == 18.0
    assert row["copy_records_per_s"] == 15_000
    assert row["copy_mb_per_s"] == pytest.approx(15.36)
    assert row["cpu_s_per_million"] == pytest.approx(23.0 / 0.03, abs=0.01)  # whole job
    assert row["copy_cpu_s_per_million"] == pytest.approx(100.0)  # 3 CPU-s for 30,000
    same = _spark_row(stats.SPARK_1, first=5.0, last=5.0)  # all records seen in one poll
    assert same["copy_records_per_s"] is None and same["copy_mb_per_s"] is None
    with pytest.raises(ValueError):
        _spark_row(stats.SPARK_1, first=20.0, last=17.0)


def test_spark_rows_compare_with_embedded_and_local1():
    rows = [
        *_rows(),  # mirrorlib: 30,000 rec/s, 20 CPU-s / M at 1 KiB, 1 partition
        _spark_row(stats.SPARK_1, first=10.0, last=13.0),  # copying 10,000 rec/s
        _spark_row(stats.SPARK_2),  # copying 15,000 rec/s
    ]
    sp = stats.spark_rows(rows)
    assert [r["contender"] for r in sp] == [stats.SPARK_1, stats.SPARK_2]
    one, two = sp
    assert one["copy_vs_embedded"] == pytest.approx(1 / 3)
    assert one["copy_vs_local1"] is None
    assert two["copy_vs_embedded"] == pytest.approx(0.5)
    assert two["copy_vs_local1"] == pytest.approx(1.5)
    assert two["cpu_vs_embedded"] == pytest.approx(100.0 / 20.0)
    table = stats.spark_table(sp)
    assert table.count("\n") == 1 + 2 and "spark-2" in table and "1.50" in table
    # the Spark rows do not disturb mirrorlib's ratios, and the document carries them
    assert len(stats.ratio_rows(rows)) == 1
    doc = stats.document(
        machine={}, versions={}, settings={}, throughput_rows=rows, scenarios=[]
    )  # fmt: skip
    assert doc["spark"] == sp and stats.check_document(doc) == []
    assert "spark-1" in stats.throughput_table(rows)


def test_spark_rounds_take_the_median_job_by_copying_rate_and_keep_the_slowest_start_up():
    """A Spark cell's jobs differ mostly in start-up: the row is the job with the median copying
    rate (not the median rate to completion), its CPU the median of the jobs, and the slowest
    start-up stays visible (the start-up target holds for every job)."""
    jobs = [
        _spark_row(stats.SPARK_1, started=0.0, first=6.0, last=9.0),  # 10,000 rec/s copying
        _spark_row(stats.SPARK_1, started=0.0, first=12.0, last=13.0, cpu_last=21.0),  # 30,000
        _spark_row(stats.SPARK_1, started=0.0, first=7.0, last=9.0, cpu_last=25.0),  # 15,000
    ]
    (row,) = stats.combine_rounds([dict(j, round=k) for k, j in enumerate(jobs)])
    assert row["rounds"] == 3 and "round" not in row
    assert row["copy_records_per_s"] == 15_000 and row["startup_s"] == 7.0  # the median job
    assert row["startup_s_max"] == 12.0 and row["rounds_startup_s"] == [6.0, 12.0, 7.0]
    assert row["rounds_copy_records_per_s"] == [10_000, 30_000, 15_000]
    assert row["copy_cpu_s_per_million"] == pytest.approx(100.0)  # of 33.3, 100, 166.7
    (shown,) = stats.spark_rows([row])
    assert shown["rounds"] == 3 and shown["startup_s_max"] == 12.0
    assert "12.00" in stats.spark_table([shown])


def test_scenario_rows_that_did_not_run_say_why():
    row = stats.not_run(stats.SPARK_1, "not run: same engine")
    assert set(stats.SCENARIO_KEYS) <= set(row)
    table = stats.scenario_table([row, {**stats.not_run(stats.SPARK_2, ""), "note": None}])
    assert "not run: same engine" in table and table.count("n/a") >= 8
    assert (
        stats.check_document(
            stats.document(
                machine={}, versions={}, settings={}, throughput_rows=[], scenarios=[row]
            )
        )
        == []
    )


def test_combine_rounds_takes_the_median_round_and_keeps_every_round() -> None:
    rows = [
        {**stats.throughput("mirrorlib", record_size=1024, partitions=1, records=100,
                            seconds=s, cpu_s=c, peak_rss_mb=m), "round": i}
        for i, (s, c, m) in enumerate([(1.0, 0.5, 100.0), (4.0, 0.2, 90.0), (2.0, 0.4, 120.0)])
    ]  # fmt: skip
    rows.append(
        stats.throughput("mm2", record_size=1024, partitions=1, records=100, seconds=1.0,
                         cpu_s=None, peak_rss_mb=None)
    )  # fmt: skip
    combined = {r["contender"]: r for r in stats.combine_rounds(rows)}
    ml = combined["mirrorlib"]
    assert ml["records_per_s"] == 50.0 and ml["seconds"] == 2.0  # the median round
    assert ml["cpu_s_per_million"] == 4000.0  # median of 5000, 2000, 4000 CPU-s per M
    assert ml["peak_rss_mb"] == 120.0 and ml["rounds"] == 3
    assert ml["rounds_records_per_s"] == [100.0, 25.0, 50.0]
    assert "round" not in ml
    assert combined["mm2"]["rounds"] == 1 and combined["mm2"]["cpu_s_per_million"] is None
    table = stats.throughput_table(list(combined.values()))
    assert "100 (5000), 25 (2000), 50 (4000)" in table and "one run" in table


def _cell(cid, size, rate, cpu, parts=1):
    return stats.throughput(
        cid, record_size=size, partitions=parts, records=int(rate), seconds=1.0, cpu_s=cpu,
        peak_rss_mb=1,
    )  # fmt: skip


def test_busy_is_cpu_seconds_per_wall_second_and_rounds_take_its_median():
    row = stats.throughput(
        stats.MIRRORLIB, record_size=100, partitions=1, records=10, seconds=4.0, cpu_s=3.0,
        peak_rss_mb=None,
    )  # fmt: skip
    assert row["busy"] == 0.75
    jvm = stats.throughput(
        stats.PLAIN_PRODUCER, record_size=100, partitions=1, records=10, seconds=4.0, cpu_s=3.0,
        peak_rss_mb=None, cpu_includes_jvm_start=True,
    )  # fmt: skip
    assert jvm["busy"] is None  # its CPU includes the JVM start: no busy fraction
    rounds = [dict(_cell(stats.MIRRORLIB, 100, 1000 * (i + 1), b), round=i) for i, b in
              enumerate((0.5, 0.9, 0.7))]  # fmt: skip
    (combined,) = stats.combine_rounds(rounds)
    assert combined["busy"] == 0.7


def test_targets_per_tasks_max_against_mm2_with_the_same_tasks_max():
    rows = [
        _cell(stats.MIRRORLIB, 100, 130, 0.4), _cell(stats.MM2_TUNED, 100, 100, 1.0),
        _cell(stats.MM2_DEFAULTS, 100, 50, 1.0),
        _cell(stats.MIRRORLIB_2, 100, 200, 0.8), _cell(stats.MM2_TUNED_2, 100, 200, 1.0),
        _cell(stats.MM2_DEFAULTS_2, 100, 80, 1.0),
        _cell(stats.MIRRORLIB, 10240, 150, 0.2), _cell(stats.MM2_TUNED, 10240, 100, 1.0),
    ]  # fmt: skip
    ratios = stats.ratio_rows(rows)
    assert {(r["record_size"], r["tasks_max"]) for r in ratios} == {(100, 1), (100, 2), (10240, 1)}
    two = next(r for r in ratios if r["tasks_max"] == 2)
    assert two["tput_vs_mm2"] == pytest.approx(1.0)  # mirrorlib-t2 against mm2-t2, not mm2
    assert two["tput_vs_mm2_defaults"] == pytest.approx(2.5)
    t = {(x["target"], x.get("tasks_max")): x for x in stats.targets(ratios, [])}
    assert t[("throughput ÷ MM2, 100 B (worst cell)", 1)]["met"] is True  # 1.3 >= 1.2
    assert t[("throughput ÷ MM2, 100 B (worst cell)", 2)]["met"] is False  # 1.0 < 1.2
    ten = t[("throughput ÷ MM2, 10 KiB (worst cell)", 1)]
    assert ten["goal"] == 1.5 and ten["met"] is True
    assert ("throughput ÷ MM2, 10 KiB (worst cell)", 2) not in t  # not measured: no row
    cpu2 = t[("CPU per record ÷ MM2 (worst cell)", 2)]
    assert cpu2["value"] == pytest.approx((0.8 / 200) / (1.0 / 200)) and cpu2["met"] is False
    table = stats.targets_table(stats.targets(ratios, []))
    assert "MM2 defaults" in table and "**missed**" in table


def test_two_tasks_are_compared_with_the_loops_in_two_processes():
    """tasks.max=2 against the loops in two processes, tasks.max=1 against the loops in one; the
    CPU target carries the loops' own CPU ÷ MM2 in mirrorlib's worst cell."""
    rows = [
        _cell(stats.MIRRORLIB, 100, 120, 0.6), _cell(stats.MM2_TUNED, 100, 100, 1.0),
        _cell(stats.BARE_LOOP, 100, 150, 0.5), _cell(stats.ACKED_LOOP, 100, 140, 0.7),
        _cell(stats.MIRRORLIB_2, 100, 120, 1.2), _cell(stats.MM2_TUNED_2, 100, 150, 1.5),
        _cell(stats.BARE_LOOP_2, 100, 200, 1.0), _cell(stats.ACKED_LOOP_2, 100, 160, 1.2),
        _cell(stats.MIRRORLIB_2, 1024, 100, 0.2), _cell(stats.MM2_TUNED_2, 1024, 100, 1.0),
    ]  # fmt: skip
    ratios = {(r["record_size"], r["tasks_max"]): r for r in stats.ratio_rows(rows)}
    one, two = ratios[(100, 1)], ratios[(100, 2)]
    assert one["tput_vs_loop"] == pytest.approx(0.8) and two["tput_vs_loop"] == pytest.approx(0.6)
    assert two["tput_vs_acked_loop"] == pytest.approx(0.75)
    # CPU per record: mirrorlib-t2 0.01, mm2-t2 0.01, bare-t2 0.005, acked-t2 0.0075
    assert two["cpu_vs_mm2"] == pytest.approx(1.0)
    assert two["loop_cpu_vs_mm2"] == pytest.approx(0.5)
    assert two["acked_loop_cpu_vs_mm2"] == pytest.approx(0.75)
    assert ratios[(1024, 2)]["loop_cpu_vs_mm2"] is None  # the loops did not run that cell
    cpu2 = next(
        t for t in stats.targets(list(ratios.values()), [])
        if t["target"].startswith("CPU") and t["tasks_max"] == 2
    )  # fmt: skip
    assert (cpu2["value"], cpu2["loop"], cpu2["acked_loop"]) == pytest.approx((1.0, 0.5, 0.75))
    sc = {r["engine"]: r for r in stats.scaling_rows(rows)}
    assert sc[stats.BARE_LOOP]["speedup"] == pytest.approx(200 / 150)
    assert "acked loop itself" in stats.targets_table(stats.targets(list(ratios.values()), []))


def test_scaling_rows_give_the_speed_up_and_busy_fraction_per_engine():
    rows = [
        _cell(stats.MIRRORLIB, 1024, 100, 0.5), _cell(stats.MIRRORLIB_2, 1024, 170, 1.4),
        _cell(stats.MM2_TUNED, 1024, 100, 1.0), _cell(stats.MM2_TUNED_2, 1024, 120, 1.6),
        _cell(stats.MM2_DEFAULTS, 1024, 50, 1.0),
    ]  # fmt: skip
    sc = {r["engine"]: r for r in stats.scaling_rows(rows)}
    assert sc[stats.MIRRORLIB]["speedup"] == pytest.approx(1.7)
    assert (sc[stats.MIRRORLIB]["busy_1"], sc[stats.MIRRORLIB]["busy_2"]) == (0.5, 1.4)
    assert sc[stats.MM2_TUNED]["speedup"] == pytest.approx(1.2)
    assert sc[stats.MM2_DEFAULTS]["speedup"] is None  # tasks.max=2 not measured
    table = stats.scaling_table(list(sc.values()))
    assert table.count("\n") == 1 + 3 and "1.70" in table
    doc = stats.document(machine={}, versions={}, settings={}, throughput_rows=rows, scenarios=[])
    assert doc["scaling"] and stats.check_document(doc) == []


def test_contenders_with_two_tasks_get_tasks_max_2_and_their_engines_settings():
    from bench import contenders

    class Cluster:
        def java_client_config(self):
            return {"bootstrap.servers": "127.0.0.1:1"}

    a = b = Cluster()
    two = contenders.flow_properties(stats.MM2_TUNED_2, a, b, "S", "T", "x.*")
    one = contenders.flow_properties(stats.MM2_TUNED, a, b, "S", "T", "x.*")
    assert two["tasks.max"] == "2" and one["tasks.max"] == "1"
    assert {k: v for k, v in two.items() if k != "tasks.max"} == {
        k: v for k, v in one.items() if k != "tasks.max"
    }
    ml2 = contenders.flow_properties(stats.MIRRORLIB_2, a, b, "S", "T", "x.*")
    assert ml2["tasks.max"] == "2" and "T.producer.linger.ms" not in ml2
