"""ACL sync SRC -> DST between two ACL-enforcing clusters (SASL/PLAIN + StandardAuthorizer).

The two clusters are started for this module only and stopped at its end.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from mirrorlib.core.plans import AclRule, CreateTopic, SkippedAcl, SkipReason, TopicPlan, plan_acls
from mirrorlib.core.policy import DefaultReplicationPolicy
from mirrorlib.errors import AuthorizationError, TopicAuthorizationError
from mirrorlib.kafka.admin import ClusterAdmin
from mirrorlib.kafka.convert import to_acl_binding
from mirrorlib.testing import ClusterFactory, ClusterSet, external_clusters_from_env
from tests.kafka._util import eventually, unique

pytestmark = pytest.mark.integration

POLICY = DefaultReplicationPolicy()
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.fixture(scope="module")
def acl_clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterSet]:
    if external_clusters_from_env() is not None:
        pytest.skip("MIRRORLIB_TEST_CLUSTERS is set: ACL clusters must be started by mirrorlib")
    with ClusterFactory(tmp_path_factory.mktemp("acl-kafka")) as factory:
        yield factory.start(["SRC", "DST"], acl=True, users=USERS)


def create_acls(cluster, rules: list[AclRule]) -> None:
    admin = cluster.admin_client()
    for future in admin.create_acls([to_acl_binding(r) for r in rules]).values():
        future.result(30)


def test_acl_sync(acl_clusters) -> None:
    src_cluster, dst_cluster = acl_clusters
    src = ClusterAdmin(src_cluster.admin_client_config(), alias="SRC", timeout=15)
    dst = ClusterAdmin(dst_cluster.admin_client_config(), alias="DST", timeout=15)
    topic, other = unique("acl"), unique("skip")
    src_cluster.create_topic(topic, 1)
    # with an authorizer and no ACLs yet, the answer is an empty list (not "no authorizer")
    assert src.describe_acls() == []

    rules = [
        AclRule.topic(topic, "User:alice", "READ"),
        AclRule.topic(topic, "User:alice", "WRITE"),  # ALLOW WRITE: dropped
        AclRule.topic(topic, "User:bob", "ALL"),  # ALLOW ALL: becomes READ
        AclRule.topic(topic, "User:bob", "ALTER", "DENY"),  # DENY: copied
        AclRule.topic(topic, "User:alice", "DESCRIBE", host="127.0.0.1"),
        AclRule.topic(topic[:4], "User:alice", "READ", pattern_type="PREFIXED"),  # ignored
        AclRule.topic(other, "User:alice", "READ"),  # topic not replicated
        AclRule("GROUP", "g", "LITERAL", "User:alice", "*", "READ", "ALLOW"),  # not a topic
    ]
    create_acls(src_cluster, rules)
    source_acls = eventually(lambda: _at_least(src.describe_acls(), 7))
    assert set(source_acls) == set(rules[:7])  # topic ACLs only, any pattern type

    def accepts(t: str) -> bool:
        return t == topic

    plan = plan_acls(source_acls, dst.describe_acls(), source_alias="SRC", policy=POLICY,
                     should_replicate=accepts, target_alias="DST")  # fmt: skip
    remote = POLICY.format_remote_topic("SRC", topic)
    expected = {
        AclRule.topic(remote, "User:alice", "READ"),
        AclRule.topic(remote, "User:bob", "READ"),
        AclRule.topic(remote, "User:bob", "ALTER", "DENY"),
        AclRule.topic(remote, "User:alice", "DESCRIBE", host="127.0.0.1"),
    }
    assert set(plan.rules) == expected
    assert set(plan.skipped) == {
        SkippedAcl(rules[1], SkipReason.EXCLUDED),
        SkippedAcl(rules[5], SkipReason.PATTERN),
        SkippedAcl(rules[6], SkipReason.FILTERED),
    }
    result = dst.apply(plan)
    assert [o.status for o in result.outcomes] == ["applied"] * 4

    target_acls = eventually(lambda: _at_least(dst.describe_acls(), 4))
    assert set(target_acls) == expected
    # a second round has nothing to do
    again = plan_acls(src.describe_acls(), dst.describe_acls(), source_alias="SRC",
                      policy=POLICY, should_replicate=accepts)  # fmt: skip
    assert again.is_empty

    # the synced ACLs really work on the target: alice may read the remote topic
    dst.apply(TopicPlan([CreateTopic(remote, 1, 1)]))
    dst_cluster.produce(remote, [b"v"])
    assert [m.value() for m in dst_cluster.consume(remote, 1, user="alice")] == [b"v"]
    # ... but not write it (ALLOW WRITE was not copied)
    from mirrorlib.errors import TestClusterError

    with pytest.raises(TestClusterError):
        dst_cluster.produce(remote, [b"w"], user="alice", timeout=5)


def _at_least(acls: list[AclRule] | None, n: int) -> list[AclRule]:
    assert acls is not None and len(acls) >= n, acls
    return acls


def test_authorization_errors_name_cluster_and_topic(acl_clusters) -> None:
    src_cluster, _ = acl_clusters
    # bob has no cluster or topic rights on SRC for this topic
    bob = ClusterAdmin(src_cluster.admin_client_config(user="bob"), alias="SRC", timeout=15)
    name = unique("denied")
    result = bob.apply(TopicPlan([CreateTopic(name, 1, 1)]), raise_errors=False)
    (failure,) = result.failures
    assert isinstance(failure.error, TopicAuthorizationError)
    assert "cluster SRC" in str(failure.error) and name in str(failure.error)
    assert failure.error.cluster == "SRC" and failure.error.resource == name
    # MM2's createSinglePartitionCompactedTopic treats "not authorized" as "assume it exists"
    assert bob.create_compacted_topic(unique("internal"), 1) is False
    # reading ACLs needs DESCRIBE on the cluster
    with pytest.raises(AuthorizationError, match="cluster SRC"):
        bob.describe_acls()
