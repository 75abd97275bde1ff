"""Team scale for real (issue 44): DuckLake with its catalog on a real PostgreSQL and its data files on a
real S3-compatible server (moto's, tests/helpers/s3_server.py), written by 8 sweeps at once from separate
`gpuledger sweep` processes; then `gpuledger sql`, the weekly report and `gpuledger warehouse maintain`
over the result. The keys reach DuckDB only through the standard AWS variables, and the secret key is
in no output. Then the same with `[warehouse] ingest = "service"`: 8 sweeps land their records in the
bucket and the deployment ingest/team, run by two workers that `gpuledger serve --worker-only` started
against the one PostgreSQL-backed Prefect server, stores every run exactly once.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from helpers.postgres import postgres_cluster, prefect_on_postgres
from helpers.s3_server import s3_server
from helpers.sweep_specs import sweep_spec, trial_script, x_points

from gpuledger.flows.server import stop_process

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1500)]

#: the concurrent sweeps (the issue's check runs 8); GPULEDGER_TEST_TEAM_SWEEPS lowers it for a quick local try
SWEEPS = int(os.environ.get("GPULEDGER_TEST_TEAM_SWEEPS", "8"))
POINTS = (0.1, 0.5)
TRIAL = trial_script("""
for s in range(1, 13):
    log(step=s, loss=2.0 / s + a.x, tokens=100 * s)
log(step=12, eval_loss=abs(a.x - 0.3) + 1, tokens=1200)
""")




@pytest.fixture(scope="module")
def team(tmp_path_factory):
    """A PostgreSQL catalog, a bucket, a Prefect server on PostgreSQL, and the environment that points
    gpuledger at them (the standard AWS variables for the bucket)."""
    home = tmp_path_factory.mktemp("prefect")
    with s3_server() as s3, postgres_cluster("ledger") as conn, prefect_on_postgres(conn, home) as api:
        env = {**os.environ, **s3.env(), "GPULEDGER_WAREHOUSE": f"ducklake:postgres:{conn}",
               "GPULEDGER_WAREHOUSE_DATA": f"s3://{s3.bucket}/ledger/", "PREFECT_API_URL": api,
               "GPULEDGER_LOCK_TIMEOUT_S": "120"}
        yield s3, conn, env


def _cli(args: list[str], env: dict[str, str], cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "gpuledger.cli", *args], env=env, cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def test_eight_sweeps_at_once_store_every_run_once_with_data_in_the_bucket(team, tmp_path):
    s3, _conn, env = team
    procs = []
    for i in range(SWEEPS):
        folder = tmp_path / f"member{i}"
        folder.mkdir()
        (folder / "gpuledger.toml").write_text("", encoding="utf-8")
        spec = sweep_spec(folder, name=f"team-{i}", search="strategy: grid", params=x_points(POINTS), trial=TRIAL)
        procs.append(subprocess.Popen([sys.executable, "-m", "gpuledger.cli", "sweep", str(spec)], env=env, cwd=folder,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    outputs = []
    deadline = time.monotonic() + 900
    for p in procs:
        out, _ = p.communicate(timeout=max(1.0, deadline - time.monotonic()))
        outputs.append(out)
        assert p.returncode == 0, out[-4000:]
    joined = "\n".join(outputs)
    assert s3.secret not in joined

    q = _cli(["sql", "select count(*) as n, count(distinct run_id) as runs, count(distinct sweep_id) as sweeps, "
                     "count_if(status = 'succeeded')::INTEGER as ok from runs", "--format", "json"],
             env, tmp_path)
    assert q.returncode == 0, q.stderr
    row = json.loads(q.stdout)[0]
    assert row == {"n": SWEEPS * len(POINTS), "runs": SWEEPS * len(POINTS), "sweeps": SWEEPS, "ok": SWEEPS * len(POINTS)}
    q = _cli(["sql", "select count(*) as n, count(distinct (run_id, name, seq)) as distinct_points from metrics",
              "--format", "json"], env, tmp_path)
    points = json.loads(q.stdout)[0]
    assert points["n"] == points["distinct_points"] > 0
    keys = s3.keys("ledger/")
    assert any(k.endswith(".parquet") and "/runs/" in k for k in keys) or any(k.endswith(".parquet") for k in keys), keys

    # the weekly report reads the team warehouse (the bucket's files and the catalog's inlined rows)
    week = time.strftime("%G-W%V", time.gmtime())
    rep = _cli(["report", "weekly", "--week", week, "--out", str(tmp_path / "reports"), "--json"], env, tmp_path)
    assert rep.returncode == 0, rep.stdout + rep.stderr
    assert s3.secret not in rep.stdout + rep.stderr

    # maintenance: old points downsampled (every run counts as old with 0 days), files merged; same runs
    m = _cli(["warehouse", "maintain", "--metrics-older-than", "0", "--every", "4", "--json"], env, tmp_path)
    assert m.returncode == 0, m.stdout + m.stderr
    done = json.loads(m.stdout)
    assert done["ok"] and done["backend"] == "ducklake", done
    assert done["runs_downsampled"] == SWEEPS * len(POINTS)
    assert done["metric_rows_after"] < done["metric_rows_before"]
    assert done["files_after"] is not None and done["files_after"] <= max(done["files_before"], 1) + 20
    after = json.loads(_cli(["sql", "select count(*) as n, sum(cost_usd) as usd from runs", "--format", "json"],
                            env, tmp_path).stdout)[0]
    assert after["n"] == SWEEPS * len(POINTS)
    kept = json.loads(_cli(["sql", "select min(points) as lo, max(value_max) >= max(value) as hi from metrics "
                                   "where name = 'loss'", "--format", "json"], env, tmp_path).stdout)[0]
    assert kept["lo"] >= 1 and kept["hi"] is True


def test_a_wrong_endpoint_is_one_line_without_the_key(team, tmp_path):
    """Readers take the catalog's bucket with the endpoint they are given: a wrong one fails in one line
    that names the bucket and endpoint, never the key."""
    s3, _conn, env = team
    (tmp_path / "gpuledger.toml").write_text("", encoding="utf-8")
    ok = _cli(["sql", "select count(*) as n from metrics", "--format", "json"], env, tmp_path, timeout=200)
    assert ok.returncode == 0, ok.stderr  # the control: the right endpoint answers
    bad = {**env, "AWS_ENDPOINT_URL": "http://127.0.0.1:9"}
    r = _cli(["sql", "select count(*) as n from metrics"], bad, tmp_path, timeout=200)
    assert r.returncode != 0
    text = r.stdout + r.stderr
    assert "Traceback" not in text and s3.secret not in text
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr


def _api(url: str, body: dict | None = None) -> object:
    req = urllib.request.Request(url, data=None if body is None else json.dumps(body).encode(), method="GET" if body is None
                                 else "POST", headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:  # loopback only
        return json.loads(resp.read() or b"null")


def _wait(what: str, check, timeout_s: float, procs: list[subprocess.Popen] = ()):
    deadline = time.monotonic() + timeout_s
    while True:
        got = check()
        if got:
            return got
        assert all(p.poll() is None for p in procs), f"a worker exited while waiting for {what}"
        assert time.monotonic() < deadline, f"no {what} within {timeout_s:g} s"
        time.sleep(2)


def test_service_mode_two_workers_ingest_eight_sweeps_each_run_once(team, tmp_path):
    """`[warehouse] ingest = "service"`: 8 sweeps at once land their records in the bucket (not in the
    warehouse); flow runs of ingest/team, taken by two `gpuledger serve --worker-only` workers of the one
    PostgreSQL-backed Prefect server, store every run exactly once; each sweep waited for its records and
    ended 0; the landed files are gone after their commit; the key is in no output."""
    s3, conn, env = team
    api = env["PREFECT_API_URL"]
    svc = {**env, "GPULEDGER_INGEST": "service", "GPULEDGER_INGEST_WAIT_S": "900", "PREFECT_WORKER_QUERY_SECONDS": "2"}
    home = tmp_path / "team"
    made = _cli(["init", str(home)], svc, tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    workers, logs = [], []
    for i in range(2):
        logs.append(tmp_path / f"worker{i}.log")
        workers.append(subprocess.Popen([sys.executable, "-m", "gpuledger.cli", "serve", "--worker-only", "--worker-limit",
                                         "1"], env=svc, cwd=home, stdout=open(logs[-1], "wb"),  # noqa: SIM115
                                        stderr=subprocess.STDOUT, start_new_session=True))
    sweeps: list[subprocess.Popen] = []
    try:
        def on_pool() -> bool:
            try:
                return len(_api(f"{api}/work_pools/gpuledger-local/workers/filter", {})) >= 2
            except urllib.error.HTTPError:  # 404 until a worker made the pool
                return False
        _wait("two workers on the pool", on_pool, 300, workers)
        deployed = subprocess.run([str(Path(sys.executable).parent / "prefect"), "--no-prompt", "deploy", "--name",
                                   "team"], env=svc, cwd=home, capture_output=True, text=True, timeout=300)
        assert deployed.returncode == 0, deployed.stdout[-3000:] + deployed.stderr[-3000:]
        deployment = _api(f"{api}/deployments/name/ingest/team")["id"]
        for i in range(SWEEPS):
            folder = tmp_path / f"svc{i}"
            folder.mkdir()
            (folder / "gpuledger.toml").write_text("", encoding="utf-8")
            spec = sweep_spec(folder, name=f"svc-{i}", search="strategy: grid", params=x_points(POINTS[:1]), trial=TRIAL)
            sweeps.append(subprocess.Popen([sys.executable, "-m", "gpuledger.cli", "sweep", str(spec)], env=svc,
                                           cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
        runs: list[str] = []
        deadline = time.monotonic() + 1200
        while any(p.poll() is None for p in sweeps):  # ingest/team's schedule, made by hand: two runs at a time
            assert time.monotonic() < deadline, "the sweeps did not end within 1200 s"
            states = [_api(f"{api}/flow_runs/{r}")["state_type"] for r in runs]
            if not any(s in ("SCHEDULED", "PENDING", "RUNNING") for s in states):
                runs += [_api(f"{api}/deployments/{deployment}/create_flow_run", {"parameters": {"seconds": 45}})["id"]
                         for _ in range(2)]
            time.sleep(3)
        outputs = [p.communicate(timeout=60)[0] for p in sweeps]
        for p, out in zip(sweeps, outputs, strict=True):
            assert p.returncode == 0, out[-4000:]
        _wait("the last ingest runs to end", lambda: all(_api(f"{api}/flow_runs/{r}")["state_type"]
                                                         not in ("SCHEDULED", "PENDING", "RUNNING") for r in runs), 300)
        completed = [r for r in runs if _api(f"{api}/flow_runs/{r}")["state_type"] == "COMPLETED"]
        assert len(completed) >= 2, [_api(f"{api}/flow_runs/{r}")["state"] for r in runs]

        # both workers took flow runs (the workers' own events, kept by the server)
        def takers() -> set[str]:
            events = _api(f"{api}/events/filter", {"filter": {"event": {"name": ["prefect.worker.submitted-flow-run"]}},
                                                   "limit": 50})["events"]
            return {e["resource"]["prefect.resource.name"] for e in events}
        assert len(_wait("flow runs submitted by both workers", lambda: takers() if len(takers()) >= 2 else None,
                         120)) == 2
    finally:
        for p in sweeps:
            if p.poll() is None:
                p.kill()
        for w in workers:
            stop_process(w, grace_s=20.0, first=signal.SIGTERM)
    joined = "\n".join(outputs) + "\n".join(log.read_text(errors="replace") for log in logs)
    assert s3.secret not in joined
    expected = SWEEPS
    q = _cli(["sql", "select count(*) as n, count(distinct r.run_id) as runs, count(distinct i.record_hash) as hashes "
                     "from runs r left join ingested_records i using (run_id) where r.sweep_id like 'svc-%'",
              "--format", "json"], env, tmp_path)
    assert q.returncode == 0, q.stderr
    assert json.loads(q.stdout)[0] == {"n": expected, "runs": expected, "hashes": expected}
    b = json.loads(_cli(["sql", "select count(*)::INTEGER as batches, sum(stored)::INTEGER as stored, "
                                "max(lag_p99_s) is not null as lag from v_ingest_batches", "--format", "json"],
                        env, tmp_path).stdout)[0]
    assert b["batches"] >= 1 and b["stored"] >= expected and b["lag"] is True, b
    assert s3.keys("ledger-landing/records/") == []  # every landed file removed after its commit
    assert any(k.endswith(".parquet") for k in s3.keys("ledger/"))
    # the Prefect state is in PostgreSQL: the two workers are rows of its `worker` table
    import psycopg2

    pg = psycopg2.connect(conn.replace("dbname=ledger", "dbname=prefect"))
    try:
        with pg.cursor() as cur:
            cur.execute("select count(distinct name) from worker")
            assert cur.fetchone()[0] >= 2
    finally:
        pg.close()
