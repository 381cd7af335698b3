#!/usr/bin/env bash
# Run the project's tests with the clause audit, Redis included.
#
#   bash scripts/test.sh [pytest arguments...]
#
# The Redis tests start a standalone server and a 3-master cluster on free loopback
# ports themselves (from redis-server on PATH, which scripts/setup.sh installs where it
# can) and stop them when the run ends. HICACHE_REDIS_URL / HICACHE_REDIS_CLUSTER_NODES
# point them at servers of yours instead; HICACHE_NO_REDIS=1 starts none (the Redis
# tests then skip, saying why); HICACHE_REQUIRE_REDIS=1 (CI) fails them rather than skip.
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
[ -x "$python" ] || { echo "test.sh: no .venv; run: bash scripts/setup.sh --sglang" >&2; exit 2; }
if [ "${HICACHE_NO_REDIS:-0}" != 1 ] && ! command -v redis-server >/dev/null 2>&1; then
  echo "test.sh: redis-server is not on PATH, so the Redis tests will skip (bash scripts/install_redis.sh says how to install it)" >&2
fi
exec "$python" -m pytest --clause-audit "$@"
