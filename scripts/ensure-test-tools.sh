#!/usr/bin/env bash
# Installs what the client-compatibility tests need beyond PyPI, idempotently:
#   kafkajs and @platformatic/kafka (npm, into tests/js/node_modules); kcat, chromium, docker-compose,
#   etcd-server (Debian).
# Where a tool truly cannot be had, says so; the tests that need it then skip with that message.
set -u
cd "$(dirname "$0")/.."

if [ -d tests/js/node_modules/kafkajs ] && [ -d tests/js/node_modules/@platformatic/kafka ]; then
  :
elif command -v npm >/dev/null 2>&1; then
  echo "installing kafkajs and @platformatic/kafka (npm) into tests/js ..."
  (cd tests/js && npm install --no-audit --no-fund --no-package-lock --silent) \
    || echo "NOTE: npm install failed; the kafkajs and @platformatic/kafka tests will be skipped."
else
  echo "NOTE: npm not found; the kafkajs tests will be skipped."
fi

# Debian packages: kcat (librdkafka 2.0 client), chromium (report screenshot), docker-compose (validates
# docker/docker-compose.yml; no engine is needed for `config`), etcd-server (the cluster's metadata store,
# kcoord.testkit.etcd; its binary is `etcd`).
missing=()
command -v kcat >/dev/null 2>&1 || missing+=(kcat)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v docker-compose >/dev/null 2>&1 || missing+=(docker-compose)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
if [ ${#missing[@]} -gt 0 ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    echo "installing ${missing[*]} (Debian) ..."
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"; } >/dev/null 2>&1 \
      || echo "NOTE: apt-get install ${missing[*]} failed; tests needing them will be skipped."
  else
    echo "NOTE: ${missing[*]} not installed and cannot be installed here (needs root + apt-get); tests needing them will be skipped."
  fi
fi
exit 0
