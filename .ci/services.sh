# Services the test run needs: a standalone Redis and a 3-master Redis Cluster on loopback.
#
# Sourced by .ci/run, which calls `start_services` and traps `stop_services` on exit.
# Everything listens on 127.0.0.1 only, keeps nothing on disk (no RDB, no AOF) and
# lives under /tmp/hicache-redis. Starting again first stops whatever a previous
# run left on the same ports (by its pidfile, or with SHUTDOWN NOSAVE).
#
#   standalone  127.0.0.1:6390           HICACHE_REDIS_URL=redis://127.0.0.1:6390/0
#   cluster     127.0.0.1:7100-7102      HICACHE_REDIS_CLUSTER_NODES=127.0.0.1:7100,127.0.0.1:7101,127.0.0.1:7102
#
# HICACHE_REQUIRE_REDIS=1 makes the Redis tests fail, rather than skip, when a
# server cannot be reached.

HICACHE_REDIS_ROOT=${HICACHE_REDIS_ROOT:-/tmp/hicache-redis}
HICACHE_REDIS_STANDALONE_PORT=6390
HICACHE_REDIS_CLUSTER_PORTS="7100 7101 7102"

_redis_as_root() {
  if [ "$(id -u)" = "0" ]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo -n "$@"
  else
    echo "services: need root (or sudo) to run: $*" >&2
    return 1
  fi
}

_redis_install() {
  if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1; then
    return 0
  fi
  echo "services: installing redis-server and redis-tools from Debian's packages"
  _redis_as_root apt-get update
  DEBIAN_FRONTEND=noninteractive _redis_as_root apt-get install -y redis-server redis-tools
}

# Stop the server on port $1: its pidfile first, then SHUTDOWN NOSAVE for a server we have no pidfile for.
_redis_stop_port() {
  local port=$1 dir="$HICACHE_REDIS_ROOT/$1" pid waited
  if [ -f "$dir/redis.pid" ]; then
    pid=$(cat "$dir/redis.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      kill "$pid" 2>/dev/null || true
      for waited in $(seq 1 50); do
        kill -0 "$pid" 2>/dev/null || break
        sleep 0.1
      done
      kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null || true
    fi
  fi
  if redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1; then
    redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true
    for waited in $(seq 1 50); do
      redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1 || break
      sleep 0.1
    done
  fi
  rm -rf "$dir"
}

# Start a daemonized server on port $1 with any further arguments; wait until it answers PING.
_redis_start_port() {
  local port=$1 dir="$HICACHE_REDIS_ROOT/$1" waited
  shift
  mkdir -p "$dir"
  redis-server --bind 127.0.0.1 --port "$port" --daemonize yes \
    --pidfile "$dir/redis.pid" --dir "$dir" --logfile "$dir/redis.log" \
    --save '' --appendonly no "$@"
  for waited in $(seq 1 100); do
    if redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -q PONG; then
      return 0
    fi
    sleep 0.1
  done
  echo "services: redis-server on port $port did not answer PING" >&2
  cat "$dir/redis.log" >&2 || true
  return 1
}

# Wait until every node of the CI cluster reports cluster_state:ok.
_redis_wait_cluster_ok() {
  local port waited ok
  for waited in $(seq 1 150); do
    ok=1
    for port in $HICACHE_REDIS_CLUSTER_PORTS; do
      redis-cli -h 127.0.0.1 -p "$port" cluster info 2>/dev/null | grep -q 'cluster_state:ok' || ok=0
    done
    [ "$ok" = "1" ] && return 0
    sleep 0.2
  done
  echo "services: the Redis cluster did not reach cluster_state:ok" >&2
  return 1
}

start_services() {
  local port nodes=""
  _redis_install
  for port in $HICACHE_REDIS_STANDALONE_PORT $HICACHE_REDIS_CLUSTER_PORTS; do
    _redis_stop_port "$port"
  done
  mkdir -p "$HICACHE_REDIS_ROOT"

  _redis_start_port "$HICACHE_REDIS_STANDALONE_PORT"

  for port in $HICACHE_REDIS_CLUSTER_PORTS; do
    # require-full-coverage no: when a master is lost, the others keep serving their slots.
    _redis_start_port "$port" --cluster-enabled yes --cluster-config-file nodes.conf \
      --cluster-node-timeout 2000 --cluster-require-full-coverage no
    nodes="$nodes 127.0.0.1:$port"
  done
  # shellcheck disable=SC2086
  redis-cli --cluster create $nodes --cluster-replicas 0 --cluster-yes >"$HICACHE_REDIS_ROOT/cluster-create.log" 2>&1 \
    || { cat "$HICACHE_REDIS_ROOT/cluster-create.log" >&2; return 1; }
  _redis_wait_cluster_ok

  export HICACHE_REDIS_URL="redis://127.0.0.1:$HICACHE_REDIS_STANDALONE_PORT/0"
  export HICACHE_REDIS_CLUSTER_NODES="127.0.0.1:7100,127.0.0.1:7101,127.0.0.1:7102"
  export HICACHE_REQUIRE_REDIS=1
  echo "services: redis standalone at $HICACHE_REDIS_URL, cluster at $HICACHE_REDIS_CLUSTER_NODES"
}

stop_services() {
  local port
  for port in $HICACHE_REDIS_STANDALONE_PORT $HICACHE_REDIS_CLUSTER_PORTS; do
    _redis_stop_port "$port"
  done
  rm -rf "$HICACHE_REDIS_ROOT"
}
