"""The settings of the sessions mirrorlib creates (no Spark needed)."""

from __future__ import annotations

from mirrorlib.spark.session import DRIVER_JAVA_OPTIONS, session_defaults


def test_a_session_mirrorlib_launches_runs_the_driver_jvm_with_c1_only() -> None:
    assert session_defaults({}, "") == {"spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS}
    by_args = {"PYSPARK_SUBMIT_ARGS": "--master local[2] --driver-memory 1g pyspark-shell"}
    assert session_defaults(by_args, "") == {"spark.driver.extraJavaOptions": DRIVER_JAVA_OPTIONS}


def test_the_users_driver_java_options_are_left_alone() -> None:
    by_submit_args = {"PYSPARK_SUBMIT_ARGS": "--driver-java-options -Dx=1 pyspark-shell"}
    by_conf = {"PYSPARK_SUBMIT_ARGS": "--conf spark.driver.extraJavaOptions=-Dx=1 pyspark-shell"}
    defaults = "spark.driver.extraJavaOptions  -Dlog4j.configurationFile=x.xml\n"
    for env, text in ((by_submit_args, ""), (by_conf, ""), ({}, defaults)):
        assert session_defaults(env, text) == {}


def test_a_jvm_started_by_spark_submit_is_left_alone() -> None:
    assert session_defaults({"PYSPARK_GATEWAY_PORT": "41234"}, "") == {}
