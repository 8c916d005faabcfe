"""Prometheus endpoint for a running :class:`~mirrorlib.Replicator` (extra ``[prometheus]``).

    from mirrorlib.runtime.prometheus import start_http_server
    with Replicator(config) as replicator:
        server = start_http_server(replicator, port=9464)

The metrics follow Prometheus' conventions: counts are counters named ``…_total``, durations are
in seconds, latency and record age are histograms, rates cover the last 30-60 s. Each is
described by :data:`mirrorlib.core.metrics.METRICS` (name, type, HELP text, labels and the MM2
metric it maps to; the table is in ``docs/replicator.md``), prefixed ``mirrorlib_``. Per flow
there are also ``mirrorlib_flow_up`` (1 while a flow is starting, running, degraded or stalled;
0 when failed or stopped) and ``mirrorlib_flow_errors``.

Scrape cost: :class:`Exposition` (what :func:`start_http_server` serves) keeps the text of every
sample between scrapes and writes again only the samples that changed, read through each flow's
:class:`~mirrorlib.core.counters.MetricsCursor`; :class:`ReplicatorCollector` (for a
prometheus-client registry) builds the families from the flows' counters in one pass over the
partitions. Histograms are per remote topic, not per partition.
"""

from __future__ import annotations

import contextlib
import gc
import operator
import threading
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from mirrorlib.core.counters import FamilyDelta, MetricsCursor, Sample, SampleKey, StatsRegistry
from mirrorlib.core.metrics import HistogramValue, MetricSpec
from mirrorlib.core.status import FlowState
from mirrorlib.errors import ConfigError

if TYPE_CHECKING:
    from mirrorlib.runtime.replicator import Replicator

__all__ = ["Exposition", "ReplicatorCollector", "go_float", "go_floats", "start_http_server"]

_UP = (FlowState.STARTING, FlowState.RUNNING, FlowState.DEGRADED, FlowState.STALLED)
_UP_HELP = (
    "1 while the flow is starting, running, degraded or stalled; 0 when it failed or was stopped."
)
_ERRORS_HELP = "Errors the flow reports now (components, clusters, partitions); see the status."
_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_INF = float("inf")
_KEY, _VALUE = operator.itemgetter(0), operator.itemgetter(2)  # of a changed sample
_COUNT = operator.itemgetter(1)  # of a histogram's bucket


def _require() -> Any:
    try:
        import prometheus_client
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ConfigError(
            "the Prometheus endpoint needs prometheus-client: pip install 'mirrorlib[prometheus]'"
        ) from exc
    return prometheus_client


def _family(prefix: str, spec: MetricSpec) -> Any:
    from prometheus_client.core import (
        CounterMetricFamily,
        GaugeMetricFamily,
        HistogramMetricFamily,
    )

    name = f"{prefix}_{spec.name}"
    help_text = spec.help + (f" MM2: {spec.mm2}." if spec.mm2 else "")
    labels = list(spec.labels)
    if spec.kind == "counter":
        return CounterMetricFamily(name.removesuffix("_total"), help_text, labels=labels)
    if spec.kind == "histogram":
        return HistogramMetricFamily(name, help_text, labels=labels)
    return GaugeMetricFamily(name, help_text, labels=labels)


class ReplicatorCollector:
    """A prometheus-client collector reading a replicator's counters at scrape time."""

    def __init__(self, replicator: Replicator, prefix: str = "mirrorlib") -> None:
        self.replicator = replicator
        self.prefix = prefix

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import GaugeMetricFamily

        families: dict[str, Any] = {}
        up = GaugeMetricFamily(f"{self.prefix}_flow_up", _UP_HELP, labels=["source", "target"])
        errors = GaugeMetricFamily(
            f"{self.prefix}_flow_errors", _ERRORS_HELP, labels=["source", "target"]
        )
        for status, flow_families in self.replicator.flow_metrics():
            for fam in flow_families:
                out = families.get(fam.spec.name)
                if out is None:
                    out = families[fam.spec.name] = _family(self.prefix, fam.spec)
                for labels, value in fam.samples:
                    if isinstance(value, HistogramValue):
                        buckets = [
                            ("+Inf" if le == float("inf") else repr(le), n)
                            for le, n in value.buckets
                        ]
                        out.add_metric(list(labels), buckets, value.sum)
                    else:
                        out.add_metric(list(labels), value)
            flow = [status.source, status.target]
            up.add_metric(flow, 1.0 if status.state in _UP else 0.0)
            errors.add_metric(flow, float(len(status.errors)))
        yield from families.values()
        yield up
        yield errors


def go_float(value: float) -> str:
    """``value`` as Prometheus' text format writes it: ``prometheus_client.utils.floatToGoString``
    (Go's formatting: ``1.5``, ``10.0``, ``1.234567e+06``, ``+Inf``, ``NaN``), quicker for the
    finite floats that are most samples."""
    if value.__class__ is int:
        value = float(value)
    if value.__class__ is float:
        if -1e6 < value < 1e6:  # finite, no exponent
            return repr(value)
        if 1e6 <= value < _INF:
            return _go_exponent(repr(value))
    from prometheus_client.utils import floatToGoString

    go: Callable[[float], str] = floatToGoString
    return go(value)


def _go_exponent(text: str) -> str:
    """``repr`` of a finite float at or above a million as Go writes it: Go switches to
    exponents sooner than Python (``1234567.0`` → ``1.234567e+06``)."""
    dot = text.find(".")
    if dot > 6:
        mantissa = f"{text[0]}.{text[1:dot]}{text[dot + 1 :]}".rstrip("0.")
        return f"{mantissa}e+{dot - 1:02d}"
    return text


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused for a scrape: a scrape's short-lived objects
    (freed as soon as it ends, none in a cycle) would otherwise set off collections over all the
    process's objects — over a million for a flow of 100k partitions."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _escape(value: str) -> str:
    return value.replace("\\", r"\\").replace("\n", r"\n").replace('"', r"\"")


def _help(text: str) -> str:
    return text.replace("\\", r"\\").replace("\n", r"\n")


class _Layout:
    """How the samples of one metric are written: names, and the label order (by name)."""

    def __init__(self, name: str, labels: tuple[str, ...], *, bucket: bool = False) -> None:
        self.name = name
        self.labels = labels
        self.order = sorted(range(len(labels)), key=lambda i: labels[i])
        if bucket:  # the bucket's `le` label goes in its sorted place
            self.le_at = sum(1 for n in labels if n < "le")
        self._bounds: dict[float, str] = {}

    def bound(self, le: float) -> str:
        """A bucket's upper bound as its ``le`` label writes it."""
        text = self._bounds.get(le)
        if text is None:
            text = self._bounds[le] = "+Inf" if le == _INF else repr(le)
        return text

    def labelstr(self, values: tuple[str, ...]) -> str:
        return ",".join(f'{self.labels[i]}="{_escape(values[i])}"' for i in self.order)


class Exposition:
    """A replicator's metrics in Prometheus' text format, written directly: the same text as
    ``prometheus_client.generate_latest`` over a :class:`ReplicatorCollector`, at a fraction of
    the cost (no sample objects; a partition's label text is written once for all its metrics,
    and formatted values are remembered).

    ``source`` is a :class:`~mirrorlib.runtime.replicator.Replicator` (anything with
    ``flow_metrics()``). Not thread-safe: one scrape at a time (see :func:`start_http_server`).
    """

    def __init__(self, source: Replicator, prefix: str = "mirrorlib") -> None:
        self.source = source
        self.prefix = prefix
        self._layouts: dict[str, _Layout] = {}
        self._flows: dict[int, _Flow] = {}  # by id() of the flow's StatsRegistry
        self._float: Callable[[float], str] = go_float

    def _layout(self, spec: MetricSpec) -> _Layout:
        layout = self._layouts.get(spec.name)
        if layout is None:
            name = f"{self.prefix}_{spec.name}"
            layout = self._layouts[spec.name] = _Layout(
                name, spec.labels, bucket=spec.kind == "histogram"
            )
        return layout

    def _header(self, spec: MetricSpec) -> str:
        name = f"{self.prefix}_{spec.name}"
        help_text = _help(spec.help + (f" MM2: {spec.mm2}." if spec.mm2 else ""))
        return f"# HELP {name} {help_text}\n# TYPE {name} {spec.kind}\n"

    def _histogram(
        self,
        layout: _Layout,
        labels: tuple[str, ...],
        value: HistogramValue,
        heads: tuple[str, str, str] | None = None,
    ) -> str:
        """The lines of one histogram sample (``heads``: its :meth:`_heads`, if known)."""
        before, after, plain = heads or self._heads(layout, labels)
        number, bound = self._float, layout.bound
        out = [f"{before}{bound(le)}{after}{number(n)}\n" for le, n in value.buckets]
        out.append(f"{layout.name}_count{plain} {number(value.count)}\n")
        out.append(f"{layout.name}_sum{plain} {number(value.sum)}\n")
        return "".join(out)

    @staticmethod
    def _heads(layout: _Layout, labels: tuple[str, ...]) -> tuple[str, str, str]:
        """A histogram sample's text before and after its bucket's ``le``, and its labels."""
        pairs = [f'{layout.labels[i]}="{_escape(labels[i])}"' for i in layout.order]
        before, after = ",".join(pairs[: layout.le_at]), ",".join(pairs[layout.le_at :])
        before = f'{layout.name}_bucket{{{before}{"," if before else ""}le="'
        after = f'"{"," if after else ""}{after}}} '
        plain = "{" + ",".join(pairs) + "}" if pairs else ""
        return before, after, plain

    def render(self, now: float | None = None) -> bytes:
        """The text of one scrape (``now``: its :func:`time.monotonic` time, by default now).

        When the source has ``flow_stats()`` (a :class:`~mirrorlib.runtime.replicator.Replicator`
        does), each flow is read with a :class:`~mirrorlib.core.counters.MetricsCursor` and only
        the samples that changed since the previous scrape are written again; otherwise
        everything is written from ``flow_metrics()``."""
        flow_stats = getattr(self.source, "flow_stats", None)
        if flow_stats is not None:
            with _collector_paused():
                return self._render_changes(flow_stats(), now)
        sections: dict[str, list[str]] = {}
        up: list[str] = []
        errors: list[str] = []
        number = self._float
        for status, families in self.source.flow_metrics():
            # the per-partition metrics share their label tuples: each is written once
            labelstrs: dict[int, str] = {}
            for fam in families:
                spec = fam.spec
                out = sections.get(spec.name)
                if out is None:
                    out = sections[spec.name] = [self._header(spec)]
                layout = self._layout(spec)
                name = layout.name
                for labels, value in fam.samples:
                    if isinstance(value, HistogramValue):
                        out.append(self._histogram(layout, labels, value))
                        continue
                    labelstr = labelstrs.get(id(labels))
                    if labelstr is None:
                        labelstr = labelstrs[id(labels)] = layout.labelstr(labels)
                    out.append(f"{name}{{{labelstr}}} {number(value)}\n")
            flow = f'{{source="{_escape(status.source)}",target="{_escape(status.target)}"}}'
            up.append(f"{self.prefix}_flow_up{flow} {1.0 if status.state in _UP else 0.0}\n")
            errors.append(f"{self.prefix}_flow_errors{flow} {float(len(status.errors))}\n")
        text = [line for lines in sections.values() for line in lines]
        text.append(
            f"# HELP {self.prefix}_flow_up {_help(_UP_HELP)}\n# TYPE {self.prefix}_flow_up gauge\n"
        )
        text += up
        text.append(
            f"# HELP {self.prefix}_flow_errors {_help(_ERRORS_HELP)}\n"
            f"# TYPE {self.prefix}_flow_errors gauge\n"
        )
        text += errors
        return "".join(text).encode()

    def _render_changes(self, registries: list[StatsRegistry], now: float | None) -> bytes:
        flows = {id(stats): self._flows.get(id(stats)) for stats in registries}
        sections: dict[str, list[bytes]] = {}
        up: list[str] = []
        errors: list[str] = []
        for stats in registries:
            flow = flows[id(stats)]
            if flow is None or flow.cursor.registry is not stats:
                flow = flows[id(stats)] = _Flow(stats.cursor())
            summary, deltas = flow.cursor.read(now)
            for delta, section in zip(deltas, flow.sections(deltas), strict=True):
                self._apply(section, delta)
                out = sections.get(delta.spec.name)
                if out is None:
                    out = sections[delta.spec.name] = [self._header(delta.spec).encode()]
                out.append(section.text())
            labels = f'{{source="{_escape(summary.source)}",target="{_escape(summary.target)}"}}'
            up.append(f"{self.prefix}_flow_up{labels} {1.0 if summary.state in _UP else 0.0}\n")
            errors.append(f"{self.prefix}_flow_errors{labels} {float(len(summary.errors))}\n")
        self._flows = {k: v for k, v in flows.items() if v is not None}
        tail = (
            f"# HELP {self.prefix}_flow_up {_help(_UP_HELP)}\n# TYPE {self.prefix}_flow_up gauge\n"
            + "".join(up)
            + f"# HELP {self.prefix}_flow_errors {_help(_ERRORS_HELP)}\n"
            f"# TYPE {self.prefix}_flow_errors gauge\n" + "".join(errors)
        )
        return b"".join(chunk for chunks in sections.values() for chunk in chunks) + tail.encode()

    def _apply(self, section: _Section, delta: FamilyDelta) -> None:
        """Write the changed samples of ``delta`` into ``section``."""
        if delta.keys is not None:
            section.rekey(delta.keys)
        changed = delta.changed
        if not changed:
            return
        section.joined = None
        layout = self._layout(delta.spec)
        if delta.spec.kind == "histogram":
            self._apply_histograms(section, layout, changed)
            return
        at = list(map(section.index.__getitem__, map(_KEY, changed)))
        values = list(map(_VALUE, changed))
        heads, texts, names = section.heads, section.texts, section.names
        if None in values:  # samples gone (unknown now): neither name nor value written
            gone = [j for j, value in enumerate(values) if value is None]
            for j in gone:
                heads[at[j]] = texts[at[j]] = ""
            section.headless.update(at[j] for j in gone)
            keep = [j for j, value in enumerate(values) if value is not None]
            at, values = [at[j] for j in keep], [values[j] for j in keep]
            changed = [changed[j] for j in keep]
        if section.headless and (back := section.headless.intersection(at)):  # new, or back
            section.headless -= back
            for j in [j for j, i in enumerate(at) if i in back]:
                i = at[j]
                if not names[i]:  # the sample's name and labels: the same for its life
                    names[i] = f"{layout.name}{{{layout.labelstr(changed[j][1])}}} "
                heads[i] = names[i]
        deque(map(texts.__setitem__, at, go_floats(values)), maxlen=0)

    def _apply_histograms(self, section: _Section, layout: _Layout, changed: list[Sample]) -> None:
        """Write changed histogram samples (a few lines each; one per topic) into ``section``:
        each line's name and labels are kept per sample, the counts of all of them formatted
        together."""
        written: list[tuple[int, tuple[str, ...]]] = []
        numbers: list[float] = []
        for key, labels, value in changed:
            i = section.index[key]
            if not isinstance(value, HistogramValue):
                section.texts[i] = ""
                continue
            names = section.histogram_names.get(key)
            if names is None or len(names) != len(value.buckets) + 2:
                before, after, plain = self._heads(layout, labels)
                names = section.histogram_names[key] = (
                    *(f"{before}{layout.bound(le)}{after}" for le, _ in value.buckets),
                    f"{layout.name}_count{plain} ",
                    f"{layout.name}_sum{plain} ",
                )
            written.append((i, names))
            numbers += map(_COUNT, value.buckets)
            numbers += (value.count, value.sum)
        texts = go_floats(numbers)
        start = 0
        for i, names in written:
            end = start + len(names)
            section.texts[i] = "\n".join(map(operator.add, names, texts[start:end]))
            start = end


def go_floats(values: Sequence[float]) -> list[str]:
    """:func:`go_float` of each of ``values``: ``repr`` over all of them at C speed, then
    Go's text for the few that need another (at or above a million, infinite, NaN)."""
    texts = list(map(repr, map(float, values)))
    for i in [i for i, value in enumerate(values) if not -1e6 < value < 1e6]:
        value = values[i]
        texts[i] = _go_exponent(texts[i]) if 1e6 <= value < _INF else go_float(value)
    return texts


class _Section:
    """The written samples of one metric of one flow, in columns in sample order: each
    sample's name and labels (``names``, written once, when the sample first appears), the
    same while the sample exists (``heads``; empty when it has no value now) and its value's
    text (``texts``; a histogram's whole text, under an empty head). The section's text is
    joined from the columns in one C-level pass, and kept until a sample changes."""

    __slots__ = (
        "headless", "heads", "histogram_names", "index", "joined", "keys", "names", "texts",
    )  # fmt: skip

    def __init__(self) -> None:
        self.keys: tuple[SampleKey, ...] = ()
        self.index: dict[SampleKey, int] = {}
        self.names: list[str] = []
        self.heads: list[str] = []
        self.headless: set[int] = set()  # indexes of blank heads
        self.texts: list[str] = []
        self.histogram_names: dict[SampleKey, tuple[str, ...]] = {}  # each line's
        self.joined: bytes | None = b""

    def rekey(self, keys: tuple[SampleKey, ...]) -> None:
        """The samples are now ``keys``, in this order: the columns follow, keeping what
        was written of the samples still there (new ones are blank until written)."""
        if keys == self.keys:
            return
        old = self.index
        at = [old.get(key, -1) for key in keys]
        self.names = [self.names[i] if i >= 0 else "" for i in at]
        self.heads = [self.heads[i] if i >= 0 else "" for i in at]
        self.texts = [self.texts[i] if i >= 0 else "" for i in at]
        self.keys = keys
        self.index = {key: i for i, key in enumerate(keys)}
        self.headless = {i for i, head in enumerate(self.heads) if not head}
        self.histogram_names = {
            k: h for k in keys if (h := self.histogram_names.get(k)) is not None
        }
        self.joined = None

    def text(self) -> bytes:
        if self.joined is None:
            lines = "\n".join(filter(None, map(operator.add, self.heads, self.texts)))
            self.joined = (lines + "\n").encode() if lines else b""
        return self.joined


class _Flow:
    """What an :class:`Exposition` keeps of one flow between scrapes."""

    def __init__(self, cursor: MetricsCursor) -> None:
        self.cursor = cursor
        self._sections: dict[str, _Section] = {}

    def sections(self, deltas: list[FamilyDelta]) -> list[_Section]:
        return [self._sections.setdefault(d.spec.name, _Section()) for d in deltas]


def start_http_server(
    replicator: Replicator, port: int = 9464, addr: str = "127.0.0.1", *, registry: Any = None
) -> Any:
    """Serve ``/metrics`` for ``replicator`` on ``addr:port`` in a background thread.

    Returns the server (call ``.shutdown()`` to stop it). Without ``registry`` the replicator's
    metrics are written by :class:`Exposition` (a scrape writes again only the samples whose
    value changed: about 0.15 CPU-s for 100,000 idle partitions, seconds when all of them moved);
    with one, the replicator's collector is registered in it and the whole registry is served by
    prometheus-client.
    """
    prometheus_client = _require()
    if registry is not None:
        registry.register(ReplicatorCollector(replicator))
        server, _thread = prometheus_client.start_http_server(port, addr=addr, registry=registry)
        return server
    return _serve(Exposition(replicator), addr, port)


def _serve(exposition: Exposition, addr: str, port: int) -> ThreadingHTTPServer:
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] not in ("/", "/metrics"):
                self.send_error(404)
                return
            with lock:
                body = exposition.render()
            self.send_response(200)
            self.send_header("Content-Type", _CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass  # no access log on stderr

    server = ThreadingHTTPServer((addr, port), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="mirrorlib-prometheus", daemon=True).start()
    return server
