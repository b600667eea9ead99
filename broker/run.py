"""`kcoord serve` without the command line: load a BrokerConfig from an optional server.properties file
and overrides, set up logging, and serve in the foreground until SIGINT / SIGTERM.

`kcoord serve` (tools/cli.py) and the test kit's launcher (testkit/launcher.py, a forked child per test
broker) both call `serve_properties`, so a test broker starts exactly as the command does.
"""
from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

from kcoord.broker.config import BrokerConfig, ConfigError

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def serve_properties(properties: str | os.PathLike | None = None, overrides: Mapping[str, str] | None = None,
                     log_level: str = "INFO") -> int:
    """Serve until a signal; the exit status (2 with one line naming the problem on a configuration
    error, as `kcoord serve` reports it)."""
    try:
        cfg = BrokerConfig.load(properties, overrides)
        logging.basicConfig(level=log_level.upper(), format=LOG_FORMAT, stream=sys.stderr)
        for key in cfg.ignored:
            logging.getLogger("kcoord.config").info("ignoring %s (no meaning on a single-node broker)", key)
        from kcoord.broker.app import serve

        return serve(cfg)
    except ConfigError as exc:
        print(f"kcoord: configuration error: {exc}", file=sys.stderr)
        return 2
