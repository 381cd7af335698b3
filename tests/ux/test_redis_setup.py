"""Redis for the tests on a fresh machine: the install step of setup, and the servers the tests start.

Scenario: scripts/install_redis.sh run with stand-ins for apt-get, sudo and id
on an otherwise empty PATH (root, passwordless sudo, neither, no apt-get, apt
failing, already installed); ``SessionServers`` with no server named (starts
its own on free loopback ports, stops them), with servers named (uses them,
starts nothing), and with nothing it can start.
Expected: the script runs ``apt-get update`` once then ``apt-get install -y
redis-server`` only where it may, says what it did, and exits 0 whatever
happens; the session servers answer on ports nothing else chose and are gone
after ``close``; a named server wins.
Why it matters: the README's test command must run the Redis tests without a
hand-run service script, and setup must never fail for want of root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Optional

import pytest
import redis

from tests.redis_support import SessionServers

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "install_redis.sh"
BASH = shutil.which("bash") or "/bin/bash"
HOW = "setup.sh:   to install: sudo apt-get update && sudo apt-get install -y redis-server"
SKIP = "; the Redis tests will skip until redis-server and redis-cli are on PATH."


def _stub(folder: Path, name: str, body: str) -> None:
    path = folder / name
    path.write_text(f"#!{BASH}\n{body}\n")
    path.chmod(0o755)


def run_install(
    tmp_path: Path,
    *,
    uid: int = 0,
    sudo: Optional[bool] = None,
    apt: bool = True,
    apt_fails: str = "",
    installs: bool = True,
    present: bool = False,
    script: Path = SCRIPT,
) -> tuple[int, str, list[str]]:
    """Run the install script with stand-ins; return its status, output and the commands the stand-ins saw."""
    stubs, log = tmp_path / "bin", tmp_path / "calls.log"
    stubs.mkdir(parents=True, exist_ok=True)
    log.write_text("")
    _stub(stubs, "id", f"echo {uid}")
    if not (stubs / "chmod").exists():
        (stubs / "chmod").symlink_to(shutil.which("chmod") or "/bin/chmod")  # for the apt-get stand-in
    programs = (
        f'for p in redis-server redis-cli; do printf "#!{BASH}\\necho v=7\\n" > "{stubs}/$p"; '
        f'chmod +x "{stubs}/$p"; done'
    )
    if present:
        _stub(stubs, "redis-server", "echo v=7")
        _stub(stubs, "redis-cli", "echo v=7")
    if apt:
        _stub(
            stubs,
            "apt-get",
            f'echo "apt-get $*" >> "{log}"\n'
            f'case "$1 $2" in "{apt_fails}") exit 100 ;; esac\n'
            f'if [ "$1" = install ] && [ {int(installs)} = 1 ]; then {programs}; fi',
        )
        _stub(stubs, "env", 'while [ "${1#*=}" != "$1" ]; do export "$1"; shift; done; exec "$@"')
    if sudo is not None:
        _stub(stubs, "sudo", f'echo "sudo $*" >> "{log}"\n[ "$2" = true ] && exit {0 if sudo else 1}\nshift; exec "$@"')
    done = subprocess.run(
        [BASH, str(script)], capture_output=True, text=True, timeout=60, env={"PATH": str(stubs), "HOME": str(tmp_path)}
    )
    return done.returncode, done.stdout + done.stderr, log.read_text().splitlines()


INSTALL_SAYS = "setup.sh: installing redis-server: apt-get update, then apt-get install -y redis-server"


def check_install_cases(tmp_path: Path, script: Path = SCRIPT) -> None:
    """Every case of the install step, whole output and the commands run."""
    status, out, calls = run_install(tmp_path / "root", script=script)
    assert (status, calls) == (0, ["apt-get update -qq", "apt-get install -y -qq redis-server"]), (out, calls)
    assert out.splitlines() == [
        INSTALL_SAYS,
        f"setup.sh: installed redis-server ({tmp_path}/root/bin/redis-server);"
        " the Redis tests start their servers from it",
    ]

    status, out, calls = run_install(tmp_path / "sudo", uid=1000, sudo=True, script=script)
    assert (status, calls) == (
        0,
        [
            "sudo -n true",
            "sudo -n apt-get update -qq",
            "apt-get update -qq",
            "sudo -n env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server",
            "apt-get install -y -qq redis-server",
        ],
    ), (out, calls)

    status, out, calls = run_install(tmp_path / "user", uid=1000, sudo=False, script=script)
    assert (status, calls) == (0, ["sudo -n true"]), (out, calls)
    assert out.splitlines() == [
        "setup.sh: redis-server is not installed and installing it needs root or passwordless sudo" + SKIP,
        HOW,
    ]

    status, out, calls = run_install(tmp_path / "nosudo", uid=1000, script=script)
    assert (status, calls) == (0, [])

    status, out, calls = run_install(tmp_path / "noapt", apt=False, script=script)
    assert status == 0 and out.splitlines() == [
        "setup.sh: redis-server is not installed and there is no apt-get here" + SKIP,
        "setup.sh:   to install: install Redis (redis-server and redis-cli) with your system's package manager",
    ]

    status, out, calls = run_install(tmp_path / "update", apt_fails="update -qq", script=script)
    assert (status, calls) == (0, ["apt-get update -qq"])
    assert out.splitlines() == [INSTALL_SAYS, "setup.sh: apt-get update failed" + SKIP, HOW]

    status, out, calls = run_install(tmp_path / "install", apt_fails="install -y", script=script)
    assert status == 0 and out.splitlines()[-2:] == ["setup.sh: apt-get install -y redis-server failed" + SKIP, HOW]

    status, out, calls = run_install(tmp_path / "empty", installs=False, script=script)
    assert status == 0 and out.splitlines()[-2] == (
        "setup.sh: apt-get installed redis-server but redis-server or redis-cli is still not on PATH" + SKIP
    )

    status, out, calls = run_install(tmp_path / "present", present=True, script=script)
    assert (status, calls) == (0, [])
    assert (
        out == f"setup.sh: redis-server found ({tmp_path}/present/bin/redis-server); "
        "the Redis tests start their servers from it\n"
    )


def test_install_step_installs_where_it_may_and_never_fails(tmp_path: Path) -> None:
    check_install_cases(tmp_path)


@pytest.mark.parametrize(
    "mutation",
    [
        ("  exit 0\n}", "  exit 1\n}"),  # a fallback that fails setup
        ("&& sudo -n true >/dev/null 2>&1", ""),  # sudo assumed without asking
        ('if ! "${as_root[@]}" apt-get update -qq; then\n  fallback "apt-get update failed"\nfi\n', ""),  # no update
    ],
    ids=["fails-setup", "assumes-sudo", "skips-update"],
)
def test_install_cases_catch_planted_scripts(tmp_path: Path, mutation: tuple[str, str]) -> None:
    text = SCRIPT.read_text()
    assert mutation[0] in text
    planted = tmp_path / "planted.sh"
    planted.write_text(text.replace(mutation[0], mutation[1]))
    with pytest.raises(AssertionError):
        check_install_cases(tmp_path / "run", script=planted)


# ---------------------------------------------------------------- the servers the tests start
def _answers(extra: dict) -> bool:
    if "redis_url" in extra:
        urls = [extra["redis_url"]]
    else:
        urls = [f"redis://{node}/0" for node in extra["redis_cluster_nodes"]]
    for url in urls:
        try:
            client = redis.Redis.from_url(url, socket_timeout=1, socket_connect_timeout=1)
            try:
                client.ping()
            finally:
                client.close()
        except redis.RedisError:
            return False
    return True


def _ports(extra: dict) -> list[int]:
    nodes = [extra["redis_url"].split("//")[1].split("/")[0]] if "redis_url" in extra else extra["redis_cluster_nodes"]
    return [int(node.rpartition(":")[2]) for node in nodes]


@pytest.mark.skipif(
    shutil.which("redis-server") is None or shutil.which("redis-cli") is None,
    reason="needs redis-server and redis-cli (bash scripts/install_redis.sh)",
)
def test_session_servers_start_on_free_ports_and_stop() -> None:
    servers = SessionServers(environ={})
    try:
        standalone, cluster = servers.extra("standalone"), servers.extra("cluster")
        assert isinstance(standalone, dict) and isinstance(cluster, dict), (standalone, cluster)
        assert servers.extra("standalone") is standalone  # resolved once: one server per session
        assert _answers(standalone) and _answers(cluster)
        ports = _ports(standalone) + _ports(cluster)
        assert len(set(ports)) == 4 and not {6379, 6390, 7100, 7101, 7102} & set(ports), ports
        client = redis.RedisCluster.from_url(f"redis://{cluster['redis_cluster_nodes'][0]}", socket_timeout=2)
        assert client.cluster_info()["cluster_state"] == "ok" and len(client.get_primaries()) == 3
        client.close()
    finally:
        servers.close()
    assert not _answers(standalone) and not _answers(cluster)
    assert servers.started == {}


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs redis-server")
def test_a_named_server_wins_and_nothing_is_started() -> None:
    with_own = SessionServers(environ={})
    try:
        own = with_own.extra("standalone")
        named = SessionServers(
            environ={"HICACHE_REDIS_URL": own["redis_url"], "HICACHE_REDIS_CLUSTER_NODES": "127.0.0.1:1"}
        )
        assert named.extra("standalone") == own and named.started == {}
        reason = named.extra("cluster")
        assert isinstance(reason, str) and reason.startswith(
            "no Redis cluster at 127.0.0.1:1 (HICACHE_REDIS_CLUSTER_NODES; "
        ), reason
        assert named.started == {}
    finally:
        with_own.close()


def test_no_server_to_start_is_a_reason_naming_the_fix(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert SessionServers(environ={}).extra("standalone") == (
        "redis-server and redis-cli are not installed, so no standalone Redis server can be started (bash "
        "scripts/setup.sh installs them where it can; or apt-get install redis-server), and HICACHE_REDIS_URL "
        "names none"
    )
    assert SessionServers(environ={"HICACHE_NO_REDIS": "1"}).extra("cluster") == (
        "HICACHE_NO_REDIS=1 and HICACHE_REDIS_CLUSTER_NODES is unset: no cluster Redis server"
    )
    with pytest.raises(ValueError, match="mode must be one of"):
        SessionServers(environ={}).extra("sentinel")
    assert os.environ["PATH"] == str(tmp_path)
