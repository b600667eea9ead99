"""kcoord: a Kafka-wire-protocol broker built around a faithful group coordinator.

Installed, kcoord is this one import name. Its subpackages are the repository's top-level folders
(src/kcoord/<name> is a symlink to ../../<name>; a built wheel holds real copies):

    protocol       wire codecs                     storage        partition logs
    coordinator    group coordinator               txn            transaction coordinator
    metadata       cluster metadata stores         broker         the serving path
    observability  metrics export                  tools          the `kcoord` command and its clients
    testkit        the pytest plugin and launcher  analytics      the PySpark pipeline over the logs

Imports point one way (tests/test_layering.py holds the map).
"""
__version__ = "0.1.0"
