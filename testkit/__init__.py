"""testkit: what users install for their own test suites: the pytest plugin (`kafka_broker` fixtures,
entry point `pytest11: kcoord`), the launcher that forks test brokers, and BrokerProcess.

May import the serving path and everything below it, never tools/ (it serves through
kcoord.broker.run and drives the admin endpoint with kcoord.broker.admin_client). Nothing imports testkit.
"""
