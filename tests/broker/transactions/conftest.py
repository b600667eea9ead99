from tests.support.fixtures import (  # noqa: F401  (pytest finds fixtures by name)
    kcoord_broker,
    kcoord_server,
    kcoord_server_factory,
    kcoord_shared_server,
)
