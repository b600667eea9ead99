"""The broker's security: each listener's settings (TLS context, SASL mechanisms and users), the SCRAM
credential store and, when authorizer.class.name is set, the authorizer with its ACL store. In cluster
mode (kcoord.etcd.connect set) ACLs and credentials are the cluster's: `cluster` writes them to the
metadata store and follows them from it; the files in log.dirs are not read."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

from kcoord.broker.security import listener_config, tls
from kcoord.broker.security.session import ConnectionSession, ListenerSecurity
from kcoord.metadata.scram_store import ScramStore

if TYPE_CHECKING:
    from kcoord.broker.security.cluster_security import ClusterSecurity


class Security:
    def __init__(self, cfg: Any, log_dir: str) -> None:
        in_cluster = cfg.get("kcoord.etcd.connect") is not None
        self.cluster: ClusterSecurity | None = None  # cluster mode: set as the node joins
        self.scram = ScramStore(log_dir, read_file=not in_cluster)
        self.listeners: dict[str, ListenerSecurity] = {}
        for listener in cfg.listeners:
            name = listener.name
            proto = listener_config.security_protocol(cfg, name)
            sec = ListenerSecurity(name, proto, scram_lookup=self.scram.get)
            if proto in ("SSL", "SASL_SSL"):
                sec.ssl_context = tls.server_context(cfg, name)
            if sec.sasl:
                sec.mechanisms = tuple(listener_config.setting(cfg, name, "sasl.enabled.mechanisms")[1])
                if "PLAIN" in sec.mechanisms:
                    sec.plain_users = listener_config.plain_users(cfg, name)
                sec.reauth_ms = listener_config.setting(cfg, name, "connections.max.reauth.ms")[1]
            self.listeners[name] = sec
        self.authorizer = None
        if cfg.get("authorizer.class.name"):
            from kcoord.broker.security.authorizer import StandardAuthorizer

            self.authorizer = StandardAuthorizer.from_config(cfg, log_dir, read_file=not in_cluster)

    def session(self, listener: str) -> ConnectionSession:
        return ConnectionSession(self.listeners[listener])
