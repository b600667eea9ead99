"""One module per Kafka API. Each registers its handler and version range with `kcoord.broker.registry.api`;
`kcoord.broker.registry.load_all()` imports every module here. ApiVersions is built from that registry."""
