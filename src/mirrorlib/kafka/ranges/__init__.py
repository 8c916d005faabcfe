"""The Kafka side of the Spark engine (confluent-kafka only, no Spark), split by where it runs.

* :mod:`~mirrorlib.kafka.ranges.driver` -- the Spark driver: :class:`~mirrorlib.kafka.ranges.driver.SourceView` (which source
  partitions are copyable now, their end offsets and where new ones start) and
  :func:`~mirrorlib.kafka.ranges.driver.store_positions` (each batch's last copied offsets, in MM2's offsets topic);
* :mod:`~mirrorlib.kafka.ranges.executor` -- the executors: :func:`~mirrorlib.kafka.ranges.executor.copy_ranges`, the body of a
  copy task (exact upstream offset ranges copied to the remote topics, offset syncs written once
  acknowledged), with the clients a Python worker keeps between tasks (:class:`~mirrorlib.kafka.ranges.executor.TaskClients`).

The driver ships the work to the tasks and gets back a small
:class:`~mirrorlib.kafka.ranges.executor.CopyResult` per task; no record leaves an executor.
The embedded engine is :mod:`mirrorlib.kafka.copier`.
"""
