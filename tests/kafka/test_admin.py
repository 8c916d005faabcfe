"""ClusterAdmin against two real local clusters A -> B: snapshot, plan, apply, re-snapshot.

Runs on the shared session clusters ``A``/``B`` of the mirrorlib pytest plugin, so every test
uses its own topic-name prefix and a flow filter that only accepts its own topics.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

import pytest

from mirrorlib.core.config.filters import DefaultConfigPropertyFilter
from mirrorlib.core.config.keys import CONFIG_PROPERTIES_EXCLUDE_DEFAULT
from mirrorlib.core.plans import (
    ConfigOp,
    ConfigPlan,
    CreatePartitions,
    CreateTopic,
    TopicConfigEntry,
    TopicPlan,
    TopicSnapshot,
    plan_acls,
    plan_topic_configs,
    plan_topics,
)
from mirrorlib.core.policy import DefaultReplicationPolicy
from mirrorlib.errors import ClusterError, KafkaRequestError, PlanApplyError
from mirrorlib.kafka.admin import ClusterAdmin
from tests.kafka._util import eventually, unique

pytestmark = pytest.mark.integration

POLICY = DefaultReplicationPolicy()


class Flow:
    """A -> B for the topics of one test (prefix), with both admins."""

    def __init__(self, a, b, prefix: str, **options) -> None:
        self.a_cluster, self.b_cluster = a, b
        self.a = ClusterAdmin(a.admin_client_config(), alias="A", timeout=15)
        self.b = ClusterAdmin(b.admin_client_config(), alias="B", timeout=15)
        self.prefix = prefix
        default_filter = DefaultConfigPropertyFilter.from_config({})
        self.options = {
            "use_defaults_from": "target",
            "config_filter": default_filter.should_replicate_config_property,
            **options,
        }

    def accepts(self, topic: str) -> bool:
        return topic.startswith(self.prefix)

    def remote(self, topic: str) -> str:
        return POLICY.format_remote_topic("A", topic)

    def source(self) -> dict[str, TopicSnapshot]:
        return self.a.snapshot([t for t in self.a.list_topics() if self.accepts(t)])

    def target(self) -> dict[str, TopicSnapshot]:
        return self.b.snapshot(
            [t for t in self.b.list_topics() if t.startswith("A." + self.prefix)]
        )

    def topic_plan(self) -> TopicPlan:
        return plan_topics(
            self.source(),
            self.b.list_topics(),
            source_alias="A",
            policy=POLICY,
            should_replicate=self.accepts,
            replication_factor=1,
            target_alias="B",
            config_filter=self.options["config_filter"],
            use_defaults_from=self.options["use_defaults_from"],
        )

    def config_plan(self) -> ConfigPlan:
        return plan_topic_configs(
            self.source(),
            self.target(),
            source_alias="A",
            policy=POLICY,
            should_replicate=self.accepts,
            target_alias="B",
            config_filter=self.options["config_filter"],
            use_defaults_from=self.options["use_defaults_from"],
        )

    def sync(self) -> None:
        """One full round: topics, then configs (what the replicator does periodically)."""
        self.b.apply(self.topic_plan())
        eventually(self._all_created)
        self.b.apply(self.config_plan())

    def _all_created(self) -> None:
        assert self.topic_plan().creates == ()

    def wait_stable(self) -> None:
        def check() -> None:
            assert self.topic_plan().is_empty, self.topic_plan().describe()
            assert self.config_plan().is_empty, self.config_plan().describe()

        eventually(check)


def alter(cluster, topic: str, ops: list[tuple[str, str, str | None]]) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    entries = [
        ConfigEntry(k, v, incremental_operation=getattr(AlterConfigOpType, op)) for k, op, v in ops
    ]
    admin = cluster.admin_client()
    futures = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)]
    )
    for f in futures.values():
        f.result(30)


def grow(cluster, topic: str, total: int) -> None:
    from confluent_kafka.admin import NewPartitions

    admin = cluster.admin_client()
    for f in admin.create_partitions([NewPartitions(topic, total)]).values():
        f.result(30)


@pytest.fixture
def flow(two_clusters) -> Callable[..., Flow]:
    a, b = two_clusters

    def make(**options) -> Flow:
        return Flow(a, b, unique("adm"), **options)

    return make


def configs_of(snapshot: TopicSnapshot) -> dict[str, str | None]:
    """The topic-level overrides of a snapshot."""
    return {k: v.value for k, v in snapshot.configs.items() if v.is_topic_override}


# -- snapshots ----------------------------------------------------------------------------------


def test_snapshot_reads_partitions_and_configs(flow) -> None:
    f = flow()
    name = f.prefix + "-orders"
    f.a_cluster.create_topic(name, 3, config={"retention.ms": "3600000"})
    snap = f.a.snapshot([name, "no-such-topic"])
    assert set(snap) == {name}
    assert snap[name].partitions == 3
    retention = snap[name].configs["retention.ms"]
    assert retention == TopicConfigEntry("3600000", source="DYNAMIC_TOPIC_CONFIG")
    segment = snap[name].configs["segment.bytes"]
    assert segment.is_default and segment.source == "DEFAULT_CONFIG"
    assert f.a.list_topics()[name] == 3
    assert "__consumer_offsets" not in f.a.list_topics()
    assert "__consumer_offsets" in f.a.list_topics(include_internal=True)
    assert f.a.describe_configs([]) == {}
    assert f.a.describe_configs(["no-such-topic"]) == {}
    bare = f.a.snapshot([name], configs=False)
    assert bare == {name: TopicSnapshot(name, 3)}


def test_describe_cluster(two_clusters) -> None:
    a, _ = two_clusters
    desc = ClusterAdmin(a.admin_client_config(), alias="A").describe_cluster()
    assert desc.cluster_id
    assert len(desc.brokers) == 1
    assert f"{desc.brokers[0].host}:{desc.brokers[0].port}" == a.bootstrap_servers
    assert desc.controller_id is not None


# -- topics and configs A -> B --------------------------------------------------------------------


def test_plan_apply_resnapshot(flow) -> None:
    f = flow()
    orders, plain = f.prefix + "-orders", f.prefix + "-plain"
    f.a_cluster.create_topic(orders, 3, config={
        "retention.ms": "3600000", "cleanup.policy": "compact", "min.insync.replicas": "1",
        "max.message.bytes": "200000",
    })  # fmt: skip
    f.a_cluster.create_topic(plain, 1)

    plan = f.topic_plan()
    assert plan.steps == (
        CreateTopic(
            f.remote(orders),
            3,
            1,
            {"retention.ms": "3600000", "cleanup.policy": "compact", "max.message.bytes": "200000"},
            source_topic=orders,
        ),
        CreateTopic(f.remote(plain), 1, 1, {}, source_topic=plain),
    )
    result = f.b.apply(plan)
    assert result.ok and [o.status for o in result.outcomes] == ["applied", "applied"]

    def created() -> dict[str, TopicSnapshot]:
        target = f.target()
        assert set(target) == {f.remote(orders), f.remote(plain)}
        return target

    target = eventually(created)
    assert target[f.remote(orders)].partitions == 3
    assert configs_of(target[f.remote(orders)]) == {
        "retention.ms": "3600000", "cleanup.policy": "compact", "max.message.bytes": "200000",
    }  # fmt: skip
    # min.insync.replicas is excluded: the target keeps its own
    assert not target[f.remote(orders)].configs["min.insync.replicas"].is_topic_override
    assert target[f.remote(plain)].partitions == 1 and configs_of(target[f.remote(plain)]) == {}
    # a second round has nothing to do: no topic to create, no config op that changes anything
    f.wait_stable()
    # applying the same creation plan again is harmless
    again = f.b.apply(plan)
    assert [o.status for o in again.outcomes] == ["unchanged", "unchanged"]


def test_config_changes_follow_the_source(flow) -> None:
    f = flow()
    name = f.prefix + "-cfg"
    remote = f.remote(name)
    f.a_cluster.create_topic(name, 1, config={"retention.ms": "3600000"})
    f.sync()
    f.wait_stable()

    # a changed source override is SET on the target
    alter(f.a_cluster, name, [("retention.ms", "SET", "7200000")])
    plan = eventually(lambda: _nonempty(f.config_plan()))
    assert [a.ops for a in plan.alters] == [(ConfigOp("retention.ms", "SET", "7200000"),)]
    f.b.apply(plan)
    f.wait_stable()
    assert configs_of(f.target()[remote]) == {"retention.ms": "7200000"}

    # a removed source override is DELETEd: the target goes back to its own default
    # (testReplicateTargetDefault), and a target-only override of a synced config is wiped,
    # but target overrides of excluded configs are kept
    alter(f.a_cluster, name, [("retention.ms", "DELETE", None)])
    alter(f.b_cluster, remote, [("segment.ms", "SET", "3600000"),
                                ("min.insync.replicas", "SET", "1")])  # fmt: skip
    plan = eventually(lambda: _nonempty(f.config_plan(), ops=2))
    assert [a.ops for a in plan.alters] == [
        (ConfigOp("retention.ms", "DELETE"), ConfigOp("segment.ms", "DELETE"))
    ]
    f.b.apply(plan)
    f.wait_stable()
    assert configs_of(f.target()[remote]) == {"min.insync.replicas": "1"}


def _nonempty(plan: ConfigPlan, ops: int = 1) -> ConfigPlan:
    assert sum(len(a.ops) for a in plan.alters) == ops, plan.describe()
    return plan


def test_use_defaults_from_source(flow) -> None:
    # testReplicateSourceDefault: the source's defaults are written to the target, except
    # excluded configs, which keep the target's own overrides
    f = flow(
        use_defaults_from="source",
        config_filter=DefaultConfigPropertyFilter.from_config(
            {
                "config.properties.exclude": CONFIG_PROPERTIES_EXCLUDE_DEFAULT
                + r", delete\.retention\.ms"
            }
        ).should_replicate_config_property,
    )
    name = f.prefix + "-src"
    remote = f.remote(name)
    f.a_cluster.create_topic(name, 1)
    f.sync()
    f.wait_stable()
    alter(f.b_cluster, remote, [("delete.retention.ms", "SET", "2000"),
                                ("retention.bytes", "SET", "2000")])  # fmt: skip
    plan = eventually(lambda: _nonempty(f.config_plan()))
    assert [a.ops for a in plan.alters] == [(ConfigOp("retention.bytes", "SET", "-1"),)]
    f.b.apply(plan)
    f.wait_stable()
    target = f.target()[remote].configs
    assert target["retention.bytes"].value == "-1"
    assert target["delete.retention.ms"].value == "2000"


def test_partitions_grow_on_target(flow) -> None:
    f = flow()
    name = f.prefix + "-grow"
    f.a_cluster.create_topic(name, 1)
    f.sync()
    f.wait_stable()
    grow(f.a_cluster, name, 3)
    plan = eventually(lambda: _grows(f.topic_plan()))
    assert plan.steps == (CreatePartitions(f.remote(name), 3, 1, source_topic=name),)
    assert f.b.apply(plan).outcomes[0].status == "applied"
    eventually(lambda: _partitions(f, f.remote(name), 3))
    f.wait_stable()
    # re-applying: INVALID_PARTITIONS is swallowed, as MM2 does
    assert f.b.apply(plan).outcomes[0].status == "unchanged"
    # more partitions on the target than on the source: nothing happens, never a shrink
    grow(f.b_cluster, f.remote(name), 5)
    eventually(lambda: _partitions(f, f.remote(name), 5))
    f.wait_stable()


def _grows(plan: TopicPlan) -> TopicPlan:
    assert plan.grows, plan.describe()
    return plan


def _partitions(f: Flow, topic: str, n: int) -> None:
    assert f.b.list_topics().get(topic) == n


def test_never_deletes(flow) -> None:
    f = flow()
    name = f.prefix + "-del"
    f.a_cluster.create_topic(name, 1)
    f.sync()
    f.wait_stable()
    admin = f.a_cluster.admin_client()
    for fut in admin.delete_topics([name]).values():
        fut.result(30)
    eventually(lambda: _gone(f, name))
    f.wait_stable()
    assert f.remote(name) in f.b.list_topics()


def _gone(f: Flow, name: str) -> None:
    assert name not in f.a.list_topics()


# -- ACLs with no authorizer ----------------------------------------------------------------------


def test_acl_sync_skips_cleanly_without_authorizer(flow, caplog) -> None:
    f = flow()
    with caplog.at_level(logging.DEBUG, logger="mirrorlib.kafka.admin"):
        assert f.a.describe_acls() is None
        assert f.a.describe_acls() is None
    infos = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(infos) == 1
    assert "No ACL authorizer is configured on cluster A" in infos[0].getMessage()
    assert "sync.topic.acls.enabled" in infos[0].getMessage()
    plan = plan_acls(f.a.describe_acls(), f.b.describe_acls(), source_alias="A", policy=POLICY,
                     should_replicate=f.accepts)  # fmt: skip
    assert plan.is_empty
    assert f.b.apply(plan).outcomes == ()


# -- internal topics, errors ---------------------------------------------------------------------


def test_create_compacted_topic_is_idempotent(two_clusters) -> None:
    _, b = two_clusters
    admin = ClusterAdmin(b.admin_client_config(), alias="B")
    name = f"mm2-offset-syncs.{unique('x')}.internal"
    assert admin.create_compacted_topic(name, 1) is True
    assert admin.create_compacted_topic(name, 1) is False
    snap = eventually(lambda: _exists(admin, name))
    assert snap.partitions == 1
    assert snap.configs["cleanup.policy"].value == "compact"


def _exists(admin: ClusterAdmin, name: str) -> TopicSnapshot:
    snap = admin.snapshot([name])
    assert name in snap
    return snap[name]


def test_errors_name_cluster_and_topic(two_clusters) -> None:
    _, b = two_clusters
    admin = ClusterAdmin(b.admin_client_config(), alias="B")
    name = unique("rf")
    with pytest.raises(KafkaRequestError) as info:
        admin.create_compacted_topic(name, 3)  # one broker only
    assert info.value.cluster == "B" and info.value.resource == name
    assert "cluster B" in str(info.value) and name in str(info.value)
    assert info.value.code == "INVALID_REPLICATION_FACTOR"

    plan = TopicPlan([CreateTopic(name, 1, 3)])
    with pytest.raises(PlanApplyError) as failed:
        admin.apply(plan)
    assert "cluster B" in str(failed.value) and name in str(failed.value)
    result = admin.apply(plan, raise_errors=False)
    (outcome,) = result.failures
    assert not result.ok and outcome.subject == name
    assert isinstance(outcome.error, KafkaRequestError)


def test_unreachable_cluster_times_out(flow) -> None:
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    admin = ClusterAdmin({"bootstrap.servers": f"127.0.0.1:{port}", "log_level": "0"},
                         alias="Z", timeout=1.0)  # fmt: skip
    for call in (admin.list_topics, lambda: admin.describe_configs(["x"]), admin.describe_acls):
        with pytest.raises(ClusterError, match="cluster Z"):
            call()


# -- FreshAdmin: refused requests retried with fresh metadata (issue 34), no broker needed ---------


class EpochAdmin:
    """An ``AdminClient`` stand-in whose ListOffsets answers FENCED_LEADER_EPOCH for the
    partitions in ``stale`` (as librdkafka's admin client does for ever after a broker restart,
    until its metadata is refreshed); ``refresh_clears``: whether a metadata request clears it."""

    def __init__(
        self,
        stale: set[int],
        *,
        refresh_clears: bool = True,
        code: int | None = None,
        no_offset: bool = False,
    ) -> None:
        from confluent_kafka import KafkaError

        self.no_offset = no_offset  # answer offset -1001 and no error instead (a leader down)
        self.stale = set(stale)
        self.refresh_clears = refresh_clears
        self.code = KafkaError.FENCED_LEADER_EPOCH if code is None else code
        self.asked: list[list[int]] = []
        self.metadata_requests = 0

    def list_topics(self, timeout: float | None = None) -> object:
        self.metadata_requests += 1
        if self.refresh_clears:
            self.stale.clear()
        return object()

    def list_offsets(self, request: dict[object, object], **_: object) -> dict[object, object]:
        from confluent_kafka import KafkaError, KafkaException

        from mirrorlib.testing.fakes import FakeFuture

        self.asked.append(sorted(tp.partition for tp in request))  # type: ignore[attr-defined]
        out: dict[object, object] = {}
        for tp in request:
            p = tp.partition  # type: ignore[attr-defined]
            if p in self.stale and self.no_offset:
                out[tp] = FakeFuture(type("Info", (), {"offset": -1001})())
            elif p in self.stale:
                out[tp] = FakeFuture(error=KafkaException(KafkaError(self.code)))
            else:
                out[tp] = FakeFuture(type("Info", (), {"offset": 100 + p})())
        return out


def _latest() -> object:
    from confluent_kafka.admin import OffsetSpec  # type: ignore[attr-defined]

    return OffsetSpec.latest()  # type: ignore[no-untyped-call]


def test_a_stale_leader_epoch_is_retried_with_fresh_metadata() -> None:
    from mirrorlib.kafka.admin import FreshAdmin, list_offsets

    client = EpochAdmin({1})
    admin = FreshAdmin(alias="B", client=client, base=0.01, cap=0.05)
    got = list_offsets(admin, {("t", 0): _latest(), ("t", 1): _latest()}, timeout=10)
    assert got == {("t", 0): 100, ("t", 1): 101}
    # one metadata refresh, then only the refused partition asked again, on the same client
    assert client.asked == [[0, 1], [1]]
    assert client.metadata_requests == 1 and admin.new_clients == 0


def test_a_stale_epoch_that_a_refresh_does_not_clear_gets_a_new_client() -> None:
    from mirrorlib.core.retry import NEW_CLIENT_AFTER
    from mirrorlib.kafka.admin import FreshAdmin, list_offsets

    old = EpochAdmin({0, 1}, refresh_clears=False)
    new = EpochAdmin(set())
    admin = FreshAdmin(alias="B", client=old, new_client=lambda: new, base=0.01, cap=0.05)
    got = list_offsets(admin, {("t", 0): _latest(), ("t", 1): _latest()}, timeout=10)
    assert got == {("t", 0): 100, ("t", 1): 101}
    assert len(old.asked) == NEW_CLIENT_AFTER and old.metadata_requests == 1
    assert admin.new_clients == 1 and admin.client is new and new.asked == [[0, 1]]


def test_a_stale_epoch_that_never_clears_fails_by_the_deadline_naming_the_partition() -> None:
    import time

    from mirrorlib.kafka.admin import FreshAdmin, list_offsets

    clients: list[EpochAdmin] = []

    def new_client() -> EpochAdmin:
        clients.append(EpochAdmin({3}, refresh_clears=False))
        return clients[-1]

    admin = FreshAdmin(alias="B", new_client=new_client, base=0.05, cap=0.2)
    started = time.monotonic()
    with pytest.raises(KafkaRequestError) as raised:
        list_offsets(admin, {("mm2-offsets.A.internal", 3): _latest()}, timeout=1.0,
                     action="list end offsets of mm2-offsets.A.internal")  # fmt: skip
    elapsed = time.monotonic() - started
    assert 1.0 <= elapsed < 2.0  # bounded by the deadline, not a loop for ever
    text = str(raised.value)
    assert "mm2-offsets.A.internal-3" in text and "cluster B" in text
    assert "FENCED_LEADER_EPOCH" in text and "still refused after" in text
    assert raised.value.code == "FENCED_LEADER_EPOCH" and raised.value.retriable
    attempts = sum(len(c.asked) for c in clients)
    assert 3 <= attempts <= 1.0 / 0.05 + 1  # retried, with a back-off (no busy loop)
    # the next call starts with a client of its own
    assert admin.client is clients[-1] and clients[-1].asked == []


def test_a_client_that_keeps_timing_out_is_replaced() -> None:
    """A long-lived client's DescribeGroups timed out for minutes after a broker restart, fresh
    metadata or not; a new client was answered at once."""
    import time

    from mirrorlib.core.retry import NEW_CLIENT_AFTER
    from mirrorlib.errors import ClusterTimeoutError
    from mirrorlib.kafka.admin import FreshAdmin

    clients: list[object] = []
    calls: list[object] = []

    def new_client() -> object:
        clients.append(object())
        return clients[-1]

    def describe(client: object, seconds: float) -> str:
        calls.append(client)
        if client is clients[0]:  # a client stuck since a broker restart
            raise TimeoutError()
        return "STABLE"

    admin = FreshAdmin(alias="A", new_client=new_client, base=0.01, cap=0.05)
    assert admin.call("describe group g", describe, timeout=10) == "STABLE"
    assert calls == [clients[0]] * NEW_CLIENT_AFTER + [clients[1]]

    # an attempt that takes the whole deadline: given up, and the next call gets a new client
    def slow(client: object, seconds: float) -> str:
        if client is clients[1]:
            time.sleep(seconds)
            raise TimeoutError()
        return "STABLE"

    with pytest.raises(ClusterTimeoutError, match="describe group g on cluster A failed"):
        admin.call("describe group g", slow, timeout=0.2)
    assert len(clients) == 3 and admin.client is clients[2]
    assert admin.call("describe group g", slow, timeout=0.2) == "STABLE"


def test_cluster_admin_lists_offsets_with_fresh_metadata_and_can_collect_what_stays_refused() -> (
    None
):
    from confluent_kafka import KafkaError

    stale = EpochAdmin({1})
    admin = ClusterAdmin(alias="A", client=stale)
    request = {("t", 0): _latest(), ("t", 1): _latest()}
    assert admin.list_offsets(request, timeout=10) == {("t", 0): 100, ("t", 1): 101}
    assert stale.metadata_requests == 1 and stale.asked == [[0, 1], [1]]

    # a partition refused for good (an authorization error) is collected, the others answered
    denied = EpochAdmin({1}, refresh_clears=False, code=KafkaError.TOPIC_AUTHORIZATION_FAILED)
    admin = ClusterAdmin(alias="A", client=denied)
    refused: dict[tuple[str, int], Exception] = {}
    got = admin.list_offsets({("t", 0): _latest(), ("t", 1): _latest()}, refused=refused)
    assert got == {("t", 0): 100}
    assert list(refused) == [("t", 1)] and "TOPIC_AUTHORIZATION_FAILED" in str(refused[("t", 1)])


def test_an_answer_without_an_offset_is_asked_again_not_taken_for_an_end() -> None:
    """On three-node clusters, librdkafka answered offset -1001 and no error for a partition
    whose leader had just been killed: taken as an end offset, a read to the end would stop
    before it started."""
    from mirrorlib.kafka.admin import FreshAdmin, list_offsets

    client = EpochAdmin({0}, no_offset=True)
    admin = FreshAdmin(alias="B", client=client, base=0.01, cap=0.05)
    got = list_offsets(admin, {("t", 0): _latest(), ("t", 1): _latest()}, timeout=10)
    assert got == {("t", 0): 100, ("t", 1): 101}
    assert client.asked == [[0, 1], [0]] and client.metadata_requests == 1

    stuck = FreshAdmin(alias="B", client=EpochAdmin({0}, no_offset=True, refresh_clears=False),
                       base=0.01, cap=0.05)  # fmt: skip
    with pytest.raises(KafkaRequestError, match=r"t-0.*no offset in the answer.*_NO_OFFSET"):
        list_offsets(stuck, {("t", 0): _latest()}, timeout=0.3)
