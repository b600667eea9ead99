"""Several nodes (issue #26): Kafka's ZooKeeper-era split with etcd in ZooKeeper's place, and Kafka 4's
way of learning roles by following the metadata.

What lives here: the etcd implementation of the metadata store (the interface and its in-process
implementation are kcoord.metadata.store, so nothing below the serving path imports etcd), the
controller (elections, ISR and reassignment rules, as KRaft's PartitionChangeBuilder computes them),
replica placement, replication (followers fetch with Kafka's Fetch) and the inter-broker client.
Without `kcoord.etcd.connect` none of it runs: a node is a cluster of one.
"""
