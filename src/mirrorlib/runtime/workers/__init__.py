"""``tasks.max`` > 1: a flow copies in worker processes, one writer per partition, fenced.

* :mod:`~mirrorlib.runtime.workers.supervisor` -- the parent's side: :class:`~mirrorlib.runtime.workers.supervisor.WorkerPlane`, the
  data plane of such a flow, and its :class:`~mirrorlib.runtime.workers.supervisor.Supervisor`, which runs, watches, assigns and stops
  the worker processes (the one-writer-per-partition rule it applies is
  :mod:`mirrorlib.core.handover`; placement by load is :mod:`mirrorlib.core.placement`);
* :mod:`~mirrorlib.runtime.workers.child` -- a worker process (``python -m
  mirrorlib.runtime.workers.child``): the embedded copier, fed and watched through its pipes;
* :mod:`~mirrorlib.runtime.workers.frames` -- the worker protocol's frames
  (:mod:`mirrorlib.core.workerproto`) read from and written to the pipes;
* :mod:`~mirrorlib.runtime.workers.status` -- the workers' state published for ``mirrorlib
  status`` (:mod:`mirrorlib.core.worker_reports`).
"""
