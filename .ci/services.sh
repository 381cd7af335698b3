# Services the test run needs, for .ci/run (which calls `start_services` and traps `stop_services`).
#
# The Redis tests start their own standalone server and 3-master cluster on free
# loopback ports (tests/redis_support.py) and stop them at the end of the run, so
# all CI needs is the programs and the refusal to skip:
#
#   start_services   installs redis-server where missing (scripts/install_redis.sh) and
#                    exports HICACHE_REQUIRE_REDIS=1: a Redis test that cannot reach or
#                    start its server fails rather than skips
#   stop_services    nothing is left running to stop; kept for .ci/run's trap

start_services() {
  bash scripts/install_redis.sh
  command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 \
    || { echo "services: redis-server and redis-cli are needed and could not be installed" >&2; return 1; }
  export HICACHE_REQUIRE_REDIS=1
  echo "services: redis-server $(redis-server --version | sed -n 's/.* v=\([^ ]*\).*/\1/p'); the tests start their servers on free loopback ports; Redis skips are refused"
}

stop_services() {
  :
}
