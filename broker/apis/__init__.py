"""One module per Kafka API. Each registers its handler and version range with `broker.registry.api`;
`broker.registry.load_all()` imports every module here. ApiVersions is built from that registry."""
