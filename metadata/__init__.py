"""metadata: where cluster metadata lives: topics (names, ids, partition counts, configs), dynamic broker
and group configs, SCRAM credentials, and applying config changes to them. Today small JSON documents
in log.dirs (json_file.py); with the cluster, keys in the metadata store.

May import: protocol, storage, coordinator, txn. The serving path imports metadata.
"""
