#!/usr/bin/env bash
# Run the project's tests with the clause audit, Redis included.
#
#   bash scripts/test.sh [pytest arguments...]
#
# The Redis tests need a standalone server and a 3-master cluster on loopback
# (.ci/services.sh). When none is reachable, this starts them (installing
# redis-server from Debian's packages if it is missing, which needs root or
# sudo), runs the tests, and stops them again; servers that are already up are
# used as they are. HICACHE_NO_REDIS=1 skips starting them: the Redis tests
# then skip with the reason.
set -euo pipefail
cd "$(dirname "$0")/.."
python=.venv/bin/python
[ -x "$python" ] || { echo "test.sh: no .venv; run: bash scripts/setup.sh --sglang" >&2; exit 2; }
if [ "${HICACHE_NO_REDIS:-0}" != 1 ] && ! "$python" - <<'PY' 2>/dev/null
import os, redis
redis.Redis.from_url(os.environ.get("HICACHE_REDIS_URL") or "redis://127.0.0.1:6390/0", socket_timeout=1,
                     socket_connect_timeout=1).ping()
PY
then
  # shellcheck source=/dev/null
  source .ci/services.sh
  if start_services; then
    trap stop_services EXIT
  else
    echo "test.sh: could not start Redis on loopback; the Redis tests will skip" >&2
    unset HICACHE_REQUIRE_REDIS
  fi
fi
"$python" -m pytest --clause-audit "$@"
