#!/usr/bin/env bash
# Installs what the client-compatibility tests need beyond PyPI, idempotently:
#   kafkajs (npm, into tests/js/node_modules) and kcat (Debian).
# Where a tool truly cannot be had, says so; the tests that need it then skip with that message.
set -u
cd "$(dirname "$0")/.."

if [ -d tests/js/node_modules/kafkajs ]; then
  :
elif command -v npm >/dev/null 2>&1; then
  echo "installing kafkajs (npm) into tests/js ..."
  (cd tests/js && npm install --no-audit --no-fund --silent) \
    || echo "NOTE: npm install of kafkajs failed; the kafkajs tests will be skipped."
else
  echo "NOTE: npm not found; the kafkajs tests will be skipped."
fi

if command -v kcat >/dev/null 2>&1; then
  :
elif command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
  echo "installing kcat (Debian) ..."
  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq kcat; } >/dev/null 2>&1 \
    || echo "NOTE: apt-get install kcat failed; the kcat tests will be skipped."
else
  echo "NOTE: kcat is not installed and cannot be installed here (needs root + apt-get); the kcat tests will be skipped."
fi
exit 0
