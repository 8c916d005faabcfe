"""The settings of the sessions mirrorlib creates (no Spark needed)."""

from __future__ import annotations

from mirrorlib.spark.session import DAEMON_MODULE, DRIVER_JAVA_OPTIONS, session_defaults

DAEMON = {"spark.python.daemon.module": DAEMON_MODULE}
C1 = {"spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS}


def test_a_local_session_forks_workers_from_mirrorlibs_daemon_and_runs_c1_only() -> None:
    assert session_defaults(None, {}, "") == DAEMON | C1
    assert session_defaults("local[2]", {}, "") == DAEMON | C1


def test_a_cluster_master_keeps_pysparks_daemon() -> None:
    assert session_defaults("spark://host:7077", {}, "") == C1
    by_args = {"PYSPARK_SUBMIT_ARGS": "--master yarn pyspark-shell"}
    assert session_defaults(None, by_args, "") == C1
    assert session_defaults(None, {}, "spark.master  k8s://https://kube:6443\n") == C1


def test_the_users_driver_java_options_are_left_alone() -> None:
    by_submit_args = {"PYSPARK_SUBMIT_ARGS": "--driver-java-options -Dx=1 pyspark-shell"}
    by_conf = {"PYSPARK_SUBMIT_ARGS": "--conf spark.driver.extraJavaOptions=-Dx=1 pyspark-shell"}
    defaults = "spark.driver.extraJavaOptions  -Dlog4j.configurationFile=x.xml\n"
    for env, text in ((by_submit_args, ""), (by_conf, ""), ({}, defaults)):
        assert session_defaults("local[1]", env, text) == DAEMON


def test_a_jvm_started_by_spark_submit_is_left_alone() -> None:
    assert session_defaults(None, {"PYSPARK_GATEWAY_PORT": "41234"}, "") == {}
