"""The cluster is an extension: the system names no cluster (issue 24)."""

from __future__ import annotations

import uuid

import pytest

from gactors import ActorSystem, ClusterError
from gactors._provider import LOCAL_PROVIDER
from gactors.cluster import Cluster
from gactors.cluster._extension import ClusterNodeExtension, cluster_node
from gactors.cluster._settings import ClusterSettings

pytestmark = [pytest.mark.timeout(60)]


def test_a_cluster_table_installs_the_node_as_extension_and_ref_provider(redis_url: str) -> None:
    system = ActorSystem(f"t{uuid.uuid4().hex[:10]}", config={"cluster": {"url": redis_url}})
    try:
        assert isinstance(system.settings.extension_tables["cluster"], ClusterSettings)
        assert system.has_extension(ClusterNodeExtension)
        node = cluster_node(system)
        assert system.provider is node
        assert system.address.node == node.node_id
        assert Cluster(system).self_address == system.address
    finally:
        system.terminate()
        assert system.await_termination(30)
    # terminate() ran the extension's shutdown step: a graceful leave
    assert node._leaving


def test_a_plain_system_is_no_cluster_node(actor_system: ActorSystem) -> None:
    assert actor_system.provider is LOCAL_PROVIDER
    with pytest.raises(ClusterError, match="not a cluster node"):
        Cluster(actor_system)
    with pytest.raises(ClusterError, match="no 'cluster' table"):
        cluster_node(actor_system)
    assert not actor_system.has_extension(ClusterNodeExtension)


def test_the_one_per_system_objects_are_extensions(redis_url: str) -> None:
    from gactors._observer import ObserverExtension, observer_for
    from gactors.cluster import ClusterSharding, ClusterSingleton
    from gactors.cluster._cluster import _ClusterExtension
    from gactors.cluster._sharding import _ShardingExtension
    from gactors.cluster._singleton import _SingletonExtension

    system = ActorSystem(f"t{uuid.uuid4().hex[:10]}", config={"cluster": {"url": redis_url}})
    try:
        for make, ext_id in [
            (Cluster, _ClusterExtension),
            (ClusterSharding, _ShardingExtension),
            (ClusterSingleton, _SingletonExtension),
            (observer_for, ObserverExtension),
        ]:
            assert not system.has_extension(ext_id)
            first = make(system)
            assert system.has_extension(ext_id)
            assert make(system) is first is system.extension(ext_id)
    finally:
        system.terminate()
        assert system.await_termination(30)
