"""``tasks.max`` = 1 (and each worker process): the embedded copier, consume -> produce in a loop.

* :mod:`~mirrorlib.kafka.copier.loop` -- :class:`~mirrorlib.kafka.copier.loop.Copier`: its clients (opened, closed, recreated
  when dead or stuck) and the consume -> produce loop with its per-record hot path, pacing and
  acknowledgements; the delivery guarantees are told there;
* :mod:`~mirrorlib.kafka.copier.assignment` -- how it gets its partitions: the flow's consumer
  group or a :class:`~mirrorlib.kafka.copier.assignment.DirectAssignment` (worker mode), and where each one starts;
* :mod:`~mirrorlib.kafka.copier.parking` -- what it does with a refused or too large record and
  with lost offsets (parking, retrying, resending, data loss);
* :mod:`~mirrorlib.kafka.copier.parts` -- the partition map (:class:`~mirrorlib.kafka.copier.parts.Part`) and the
  :class:`~mirrorlib.kafka.copier.parts.CopierContext` through which assignment and parking work on it;
* :mod:`~mirrorlib.kafka.copier.commit` -- the committers: when acknowledged records become
  stored positions (and, exactly-once, committed transactions).

The copier logs as ``mirrorlib.kafka.copier``. Spark's copy tasks are :mod:`mirrorlib.kafka.ranges`.
"""
