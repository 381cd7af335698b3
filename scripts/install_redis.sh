#!/usr/bin/env bash
# Install a Redis server for the Redis tests where this machine allows it, and say what was done.
#
#   bash scripts/install_redis.sh      (scripts/setup.sh runs it; HICACHE_NO_REDIS=1 skips it)
#
# The tests start their own standalone server and cluster from `redis-server` and
# `redis-cli` on free loopback ports, so only the programs are needed. On a Debian-like
# system, as root or with passwordless sudo, this runs `apt-get update` once and
# `apt-get install -y redis-server` (which brings redis-cli). Otherwise, or when that
# fails, it prints how to install by hand and exits 0: setup goes on, the Redis tests skip.
set -uo pipefail

say() { echo "setup.sh: $*"; }
fallback() {
  say "$1; the Redis tests will skip until redis-server and redis-cli are on PATH."
  say "  to install: ${2:-sudo apt-get update && sudo apt-get install -y redis-server}"
  exit 0
}

if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
  say "redis-server found ($(command -v redis-server)); the Redis tests start their servers from it"
  exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
  fallback "redis-server is not installed and there is no apt-get here" \
    "install Redis (redis-server and redis-cli) with your system's package manager"
fi
if [ "$(id -u)" = 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1; then
  as_root=(sudo -n)
else
  fallback "redis-server is not installed and installing it needs root or passwordless sudo"
fi
say "installing redis-server: apt-get update, then apt-get install -y redis-server"
if ! "${as_root[@]}" apt-get update -qq; then
  fallback "apt-get update failed"
fi
if ! "${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server; then
  fallback "apt-get install -y redis-server failed"
fi
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
  say "installed redis-server ($(command -v redis-server)); the Redis tests start their servers from it"
else
  fallback "apt-get installed redis-server but redis-server or redis-cli is still not on PATH"
fi
