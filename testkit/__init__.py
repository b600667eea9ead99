"""testkit: what users install for their own test suites: the pytest plugin (`kafka_broker` fixtures,
entry point `pytest11: kcoord`), the launcher that forks test brokers, and BrokerProcess.

May import everything in kcoord, tools included. Nothing imports testkit.
"""
