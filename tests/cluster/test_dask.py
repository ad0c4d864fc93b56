"""Node work on a real Dask cluster (2 worker processes on 127.0.0.1), the run on the driver."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from freshness_magic.cluster import parse_executor
from freshness_magic.cluster.daskcluster import DaskCluster
from freshness_magic.engine import RunState
from freshness_magic.errors import ClusterError
from freshness_magic.session import open_run, resume_run
from tests.processes import cli, group_alive
from tests.waiting import wait_until


def fan_out(branches: int, command: str, *, extra: str = "", after: str = "done") -> str:
    """A pipeline: start -> fan (parallel) -> b0..bN (tool) -> join -> AFTER -> done."""
    nodes = "\n".join(
        f'  b{i} [shape=parallelogram, tool_command="{command.format(i=i)}"{extra}]'
        for i in range(branches)
    )
    edges = "\n".join(f"  fan -> b{i}; b{i} -> join" for i in range(branches))
    gate = ""
    if after != "done":
        gate = (
            f'  {after} [shape=hexagon, label="Ship it?"]\n'
            f'  {after} -> done [label="[Y] Yes"]\n  {after} -> fan [label="[N] No"]\n'
        )
    return (
        "digraph fan {\n  start [shape=Mdiamond]\n  done [shape=Msquare]\n"
        f"  fan [shape=component, max_parallel={branches}]\n  join [shape=tripleoctagon]\n"
        f"{nodes}\n{gate}  start -> fan\n{edges}\n  join -> {after}\n}}\n"
    )


def evidence_log(run_dir: Path) -> list[dict]:
    lines = (run_dir / "evidence.jsonl").read_text(encoding="utf-8").splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def worker_pids(cluster: DaskCluster) -> dict[str, int]:
    return cluster.client.run(os.getpid)


def test_eight_branch_fan_out_runs_on_the_workers(
    tmp_path: Path, dask_cluster: DaskCluster
) -> None:
    dot = fan_out(8, "echo $PPID > ppid{i}.txt")
    with open_run(dot, workdir=tmp_path, executor=dask_cluster) as run:
        result = run.run()
        assert result.state is RunState.COMPLETED, result.summary()
        run_dir = run.run_dir
    pids = set(worker_pids(dask_cluster).values())
    parents = {int((tmp_path / f"ppid{i}.txt").read_text()) for i in range(8)}
    assert os.getpid() not in parents
    assert parents <= pids  # every tool's parent is a worker process
    names = set(dask_cluster.workers().values())
    records = {r["nodeId"]: r["outcome"]["engine"] for r in evidence_log(run_dir)}
    for i in range(8):
        worker = records[f"b{i}"]["worker"]
        assert worker["worker"] in names
        assert worker["pid"] in pids
        assert worker["executor"] == dask_cluster.label
        status = json.loads((run_dir / "nodes" / f"b{i}" / "status.json").read_text())
        assert status["context_updates"][f"worker.b{i}"]["worker"] == worker["worker"]
        assert status["context_updates"]["tool.exit_code"] == 0
    assert "worker" not in records["join"]  # fan-in and the rest stay on the driver


def test_a_node_marked_local_runs_on_the_driver(tmp_path: Path, dask_cluster: DaskCluster) -> None:
    dot = fan_out(2, "echo $PPID > ppid{i}.txt", extra=', executor="local"')
    with open_run(dot, workdir=tmp_path, executor=dask_cluster) as run:
        assert run.run().state is RunState.COMPLETED
    assert {int((tmp_path / f"ppid{i}.txt").read_text()) for i in range(2)} == {os.getpid()}


def test_a_branch_that_times_out_is_killed_on_the_worker(
    tmp_path: Path, dask_cluster: DaskCluster
) -> None:
    dot = fan_out(2, "echo $$ > pgid{i}.txt; exec sleep 60", extra=', timeout="2s"')
    with open_run(dot, workdir=tmp_path, executor=dask_cluster) as run:
        result = run.run()
    assert result.state is RunState.FAILED
    for i in range(2):
        outcome = run.node_outcomes[f"b{i}"]
        assert "timed out after 2s" in outcome.failure_reason
        pgid = int((tmp_path / f"pgid{i}.txt").read_text())
        wait_until(lambda pgid=pgid: not group_alive(pgid), f"tool group {pgid} killed")


def test_stop_cancels_in_flight_branches(tmp_path: Path, dask_cluster: DaskCluster) -> None:
    dot = fan_out(4, "echo $$ > pgid{i}.txt; exec sleep 60")
    run = open_run(dot, workdir=tmp_path, executor=dask_cluster)
    done: list[object] = []
    driver = threading.Thread(target=lambda: done.append(run.run()))
    driver.start()
    files = [tmp_path / f"pgid{i}.txt" for i in range(4)]
    wait_until(lambda: all(f.exists() and f.read_text().strip() for f in files), "4 tools started")
    groups = [int(f.read_text()) for f in files]
    run.interrupt()
    driver.join(timeout=60)
    assert not driver.is_alive()
    assert run.state is RunState.PAUSED
    for pgid in groups:
        assert not group_alive(pgid)
    events = [json.loads(line) for line in (run.run_dir / "events.jsonl").read_text().splitlines()]
    stopped = {e["node_id"] for e in events if e["type"] == "stage_interrupted"}
    assert {f"b{i}" for i in range(4)} <= stopped
    run.close()


def test_run_paused_at_a_gate_after_a_fan_out_resumes_in_a_new_process(
    tmp_path: Path, dask_cluster: DaskCluster
) -> None:
    dot = fan_out(4, "echo $PPID > ppid{i}.txt", after="ship")
    (tmp_path / "p.dot").write_text(dot)
    with open_run(tmp_path / "p.dot", workdir=tmp_path, executor=dask_cluster) as run:
        assert run.run().state is RunState.WAITING
        run_dir = run.run_dir
    address = dask_cluster.client.scheduler.address
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "freshness_magic",
            "resume",
            str(run_dir),
            "--answer",
            "ship=Y",
            "--executor",
            address.replace("tcp://", "dask://"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    assert f"executor: dask scheduler {address}" in done.stdout
    with resume_run(run_dir, executor="local") as again:
        assert again.state is RunState.COMPLETED
        assert again.completed_nodes[-2:] == ["ship", "done"]


@pytest.mark.parametrize("retries", [0, 1])
def test_a_worker_killed_mid_node_fails_or_retries_the_node(tmp_path: Path, retries: int) -> None:
    """The first attempt's worker is killed; with ``max_retries=1`` a second attempt runs."""
    from tests.cluster.conftest import start_cluster

    local, client = start_cluster()
    try:
        cluster = DaskCluster.attach(client)
        command = (
            "if [ -f tried ]; then exit 0; fi; touch tried; "
            "echo $$ > pgid{i}.txt; echo $PPID > ppid{i}.txt; exec sleep 60"
        )
        dot = fan_out(1, command, extra=f", max_retries={retries}")
        run = open_run(dot, workdir=tmp_path, executor=cluster)
        done: list[object] = []
        driver = threading.Thread(target=lambda: done.append(run.run()))
        driver.start()
        ppid = tmp_path / "ppid0.txt"
        recorded = run.run_dir / "nodes" / "b0" / "pgid"  # the group is on record: reapable
        wait_until(
            lambda: ppid.exists() and ppid.read_text().strip() and recorded.exists(),
            "the tool started",
        )
        os.kill(int(ppid.read_text()), 9)
        driver.join(timeout=120)
        assert not driver.is_alive(), "the run hung after its worker died"
        outcome = run.node_outcomes["b0"]
        pgid = int((tmp_path / "pgid0.txt").read_text())
        if retries:
            assert outcome.status.value == "success", outcome.failure_reason
            assert run.state is RunState.COMPLETED
            events = (run.run_dir / "events.jsonl").read_text()
            assert '"stage_retrying"' in events and "died or was lost" in events
        else:
            assert outcome.status.value == "fail"
            assert "b0" in outcome.failure_reason
            assert "worker" in outcome.failure_reason and "died" in outcome.failure_reason
            assert run.state is RunState.FAILED
        wait_until(
            lambda: not group_alive(pgid),
            f"the orphaned tool group reaped (reason: {outcome.failure_reason})",
        )
        run.close()
    finally:
        client.close()
        local.close()


def test_workers_that_cannot_see_the_workdir_are_named(tmp_path: Path) -> None:
    """A worker in its own mount namespace sees an empty folder at the work directory's path."""
    import distributed

    scheduler = distributed.LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=":0")
    address = scheduler.scheduler_address
    workdir = tmp_path / "work"
    workdir.mkdir()
    worker = subprocess.Popen(
        [
            "unshare",
            "-m",
            "sh",
            "-c",
            f"mount -t tmpfs none {workdir} && exec {sys.executable} "
            "-m distributed.cli.dask_worker "
            f"{address} --name blind --nthreads 1 --no-nanny --host 127.0.0.1 --no-dashboard",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = distributed.Client(address)
    try:
        client.wait_for_workers(1, timeout=60)
        cluster = DaskCluster.attach(client)
        with pytest.raises(ClusterError) as caught:
            open_run(fan_out(1, "true"), workdir=workdir, executor=cluster)
        message = str(caught.value)
        assert "blind" in message and str(workdir) in message
        assert "same path" in message
        assert not (workdir / ".freshness" / "runs").exists() or not any(
            (workdir / ".freshness" / "runs").iterdir()
        )
    finally:
        client.close()
        worker.terminate()
        worker.wait(timeout=30)
        scheduler.close()


@pytest.mark.parametrize(
    ("spec", "kind", "address"),
    [
        ("", "local", ""),
        ("local", "local", ""),
        ("dask", "dask", ""),
        ("dask://10.0.0.5:8786", "dask", "tcp://10.0.0.5:8786"),
        ("DASK", "dask", ""),  # as OPENAI:model is a backend spec
        ("Dask://Sched.example:8786", "dask", "tcp://Sched.example:8786"),
    ],
)
def test_executor_specs(spec: str, kind: str, address: str) -> None:
    parsed = parse_executor(spec)
    assert (parsed.kind, parsed.address) == (kind, address)


@pytest.mark.parametrize("spec", ["spark", "dask://nohost", "dask://host:port"])
def test_bad_executor_specs_say_what_to_write(spec: str) -> None:
    with pytest.raises(ClusterError, match="dask"):
        parse_executor(spec)


@pytest.mark.parametrize(
    ("spec", "meant"),
    [
        ("dsak", "(did you mean 'dask'?)"),
        ("lcoal", "(did you mean 'local'?)"),
        ("dask:127.0.0.1:8786", "(did you mean 'dask://127.0.0.1:8786'?)"),
    ],
)
def test_a_misspelt_executor_gets_the_spec_it_likely_meant(spec: str, meant: str) -> None:
    with pytest.raises(ClusterError) as refused:
        parse_executor(spec)
    assert meant in str(refused.value)


CODERGEN_FAN = """digraph llm {
  start [shape=Mdiamond]  done [shape=Msquare]
  fan [shape=component]  join [shape=tripleoctagon]
  ask1 [shape=box, prompt="Summarise the change"]
  ask2 [shape=box, prompt="List the risks"]
  start -> fan; fan -> ask1; fan -> ask2; ask1 -> join; ask2 -> join; join -> done
}
"""


def test_codergen_calls_run_on_the_workers(tmp_path: Path, dask_cluster: DaskCluster) -> None:
    with open_run(CODERGEN_FAN, workdir=tmp_path, executor=dask_cluster) as run:
        assert run.run().state is RunState.COMPLETED
        records = {r["nodeId"]: r["outcome"]["engine"] for r in evidence_log(run.run_dir)}
        response = (run.run_dir / "nodes" / "ask1" / "response.md").read_text()
    names = set(dask_cluster.workers().values())
    assert {records["ask1"]["worker"]["worker"], records["ask2"]["worker"]["worker"]} <= names
    assert response.strip()


def test_a_handler_that_cannot_be_sent_runs_on_the_driver(
    tmp_path: Path, dask_cluster: DaskCluster
) -> None:
    from freshness_magic.engine import default_registry

    lock = threading.Lock()  # cannot be pickled: the backend stays in this process

    def backend(node: object, prompt: str, context: object) -> str:
        with lock:
            return f"answered in {os.getpid()}"

    registry = default_registry(backend=backend)
    with open_run(CODERGEN_FAN, workdir=tmp_path, executor=dask_cluster, registry=registry) as run:
        assert run.run().state is RunState.COMPLETED
        records = {r["nodeId"]: r["outcome"]["engine"] for r in evidence_log(run.run_dir)}
        response = (run.run_dir / "nodes" / "ask1" / "response.md").read_text()
    assert "worker" not in records["ask1"]
    assert f"answered in {os.getpid()}" in response


def test_output_of_a_node_on_a_worker_arrives_while_it_runs(
    tmp_path: Path, dask_cluster: DaskCluster
) -> None:
    dot = fan_out(1, "echo first line; while [ ! -f go ]; do sleep 0.05; done; echo second line")
    run = open_run(dot, workdir=tmp_path, executor=dask_cluster)
    seen: list[tuple[str, str]] = []
    run.events.subscribe(
        lambda e: (
            seen.append((e.node_id, e.data.get("text", "")))
            if e.type.value == "stage_output"
            else None
        )
    )
    driver = threading.Thread(target=run.run)
    driver.start()
    wait_until(lambda: any("first line" in text for _, text in seen), "live output on the driver")
    assert not any("second line" in text for _, text in seen)
    (tmp_path / "go").write_text("")
    driver.join(timeout=60)
    outputs = [text for node, text in seen if node == "b0"]
    assert "".join(outputs).count("first line") == 1  # not replayed a second time
    assert any("second line" in text for text in outputs)
    assert not list((run.run_dir / "nodes" / "b0").glob("events-*.jsonl"))
    run.close()


def test_validate_checks_the_executor_attribute(tmp_path: Path) -> None:
    path = tmp_path / "bad.dot"
    path.write_text(
        'digraph g { executor="spark"\n start [shape=Mdiamond]\n'
        ' t [shape=parallelogram, tool_command="true", executor="dask"]\n'
        " done [shape=Msquare]\n start -> t -> done }\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "validate", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"{path}:1:13: error executor_valid: graph executor='spark'")
    assert "dask://HOST:PORT" in lines[0]
    assert lines[1].startswith(f"{path}:3:47: warning executor_valid: node `t`")
    assert 'executor="local"' in lines[1]


def test_max_parallel_bounds_branches_in_flight_on_the_cluster(
    tmp_path: Path, dask_cluster: DaskCluster
) -> None:
    (tmp_path / "running").mkdir()
    command = "mkdir running/{i}; ls running | wc -l >> counts; sleep 0.3; rmdir running/{i}"
    dot = fan_out(6, command).replace("max_parallel=6", "max_parallel=2")
    with open_run(dot, workdir=tmp_path, executor=dask_cluster) as run:
        assert run.run().state is RunState.COMPLETED
    counts = [int(n) for n in (tmp_path / "counts").read_text().split()]
    assert len(counts) == 6 and max(counts) <= 2


def test_a_pipeline_may_not_name_a_scheduler_only_the_user_does(
    tmp_path: Path, dask_cluster: DaskCluster
) -> None:
    """Where work is sent is the user's choice, as model endpoints are: a pipeline's
    ``executor="dask://HOST:PORT"`` is refused by validate and by run (the scheduler gets no
    work); the same address given by the user runs the pipeline there."""
    address = dask_cluster.client.scheduler.address.replace("tcp://", "dask://")
    dot = fan_out(2, "echo $PPID > ppid{i}.txt").replace(
        "digraph fan {", f'digraph fan {{\n  executor="{address}"', 1
    )
    (tmp_path / "named.dot").write_text(dot)
    checked = cli("validate", "named.dot", cwd=tmp_path)
    assert checked.returncode == 1, checked.stdout
    assert "named.dot:2:3: error executor_valid: graph executor=" in checked.stdout
    assert "names a scheduler's address" in checked.stdout
    refused = cli("run", "named.dot", "--workdir", str(tmp_path), cwd=tmp_path)
    assert refused.returncode == 2
    assert "names a scheduler's address" in refused.stderr
    assert not list(tmp_path.glob("ppid*.txt"))
    with pytest.raises(ClusterError, match="names a scheduler's address"):
        open_run(tmp_path / "named.dot", workdir=tmp_path, warn=False)
    assert not (tmp_path / ".freshness" / "runs").exists() or not list(
        (tmp_path / ".freshness" / "runs").iterdir()
    )

    (tmp_path / "plain.dot").write_text(fan_out(2, "echo $PPID > ppid{i}.txt"))
    done = cli("run", "plain.dot", "--workdir", str(tmp_path), "--executor", address, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"executor: dask scheduler {address.replace('dask://', 'tcp://')}" in done.stdout
    parents = {int((tmp_path / f"ppid{i}.txt").read_text()) for i in range(2)}
    assert parents <= set(worker_pids(dask_cluster).values())


MAIN_PATH_TOOL = """digraph one {
  start [shape=Mdiamond]
  b0 [shape=parallelogram, tool_command="echo $$ > pgid0.txt; exec sleep 60"]
  done [shape=Msquare]
  start -> b0 -> done
}"""


@pytest.mark.parametrize("where", ["local", "cluster"])
@pytest.mark.parametrize("nodes", ["branches", "main path"])
def test_ctrl_c_in_the_cli_stops_every_running_node(
    tmp_path: Path, dask_cluster: DaskCluster, where: str, nodes: str
) -> None:
    """SIGINT while branches run: each branch node is interrupted (its group killed), the run
    pauses resumable, and the command ends (it used to wait for every branch to finish). A
    node on the main path too: its tool ran on, on the worker of a cluster that outlives the
    command, and a resume started a second one beside it."""
    import signal

    count = 2 if nodes == "branches" else 1
    dot = fan_out(2, "echo $$ > pgid{i}.txt; exec sleep 60") if count == 2 else MAIN_PATH_TOOL
    (tmp_path / "p.dot").write_text(dot)
    executor = "local"
    if where == "cluster":
        executor = dask_cluster.client.scheduler.address.replace("tcp://", "dask://")
    command = [sys.executable, "-m", "freshness_magic", "run", str(tmp_path / "p.dot")]
    process = subprocess.Popen(
        [*command, "--workdir", str(tmp_path), "--executor", executor],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    files = [tmp_path / f"pgid{i}.txt" for i in range(count)]
    records = [f"*/nodes/b{i}/pgid" for i in range(count)]  # the driver's note of each group
    runs = tmp_path / ".freshness" / "runs"

    def started() -> bool:
        """Each tool wrote its group id and its driver noted the group: Ctrl-C from then on
        must end it, however slowly the loaded machine goes on."""
        written = all(f.exists() and f.read_text().strip() for f in files)
        return written and all(any(runs.glob(record)) for record in records)

    wait_until(started, "tools started", timeout=120)
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=120)
    assert process.returncode == 3, out + err  # paused, resumable
    for f in files:
        assert not group_alive(int(f.read_text()))
    run_dir = next((tmp_path / ".freshness" / "runs").iterdir())
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
    interrupted = {e["node_id"] for e in events if e["type"] == "stage_interrupted"}
    ran = {f"b{i}" for i in range(count)}
    assert ran <= interrupted
    assert not any(e["type"] == "stage_completed" and e["node_id"] in ran for e in events)


def _scheduler_with_one_worker(threads: int = 1, nanny: bool = False) -> tuple[object, object]:
    """A scheduler and one plain ``dask worker`` process (returned to be killed by the test)."""
    import distributed

    scheduler = distributed.LocalCluster(n_workers=0, host="127.0.0.1", dashboard_address=":0")
    address = scheduler.scheduler_address
    worker = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "distributed.cli.dask_worker",
            address,
            "--nthreads",
            str(threads),
            "--host",
            "127.0.0.1",
            "--no-dashboard",
            *([] if nanny else ["--no-nanny"]),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    return scheduler, worker


def test_a_run_whose_last_worker_dies_fails_instead_of_hanging(tmp_path: Path) -> None:
    import distributed

    scheduler, worker = _scheduler_with_one_worker()
    client = distributed.Client(scheduler.scheduler_address)  # type: ignore[attr-defined]
    try:
        client.wait_for_workers(1, timeout=60)
        # A short grace for workers to come back: the run fails the same way, sooner.
        cluster = DaskCluster.attach(client, lost_grace=0.5)
        run = open_run(
            fan_out(1, "echo $$ > pgid{i}.txt; exec sleep 60"), workdir=tmp_path, executor=cluster
        )
        driver = threading.Thread(target=run.run)
        driver.start()
        recorded = run.run_dir / "nodes" / "b0" / "pgid"
        pgid_file = tmp_path / "pgid0.txt"
        wait_until(
            lambda: recorded.exists() and pgid_file.exists() and pgid_file.read_text().strip(),
            "the tool started",
        )
        worker.kill()  # type: ignore[attr-defined]
        driver.join(timeout=120)
        assert not driver.is_alive(), "the run hung after the cluster lost its last worker"
        reason = run.node_outcomes["b0"].failure_reason
        assert "no workers left" in reason and "b0" in reason
        assert run.state is RunState.FAILED
        assert not group_alive(int(pgid_file.read_text()))  # the dead worker's command is stopped
        run.close()
    finally:
        client.close()
        worker.kill()  # type: ignore[attr-defined]
        scheduler.close()  # type: ignore[attr-defined]


def test_a_timeout_counts_from_the_start_on_a_worker_not_the_queue(tmp_path: Path) -> None:
    """One worker thread: the quick node waits behind a 3 s one; its 1 s timeout is not spent
    waiting."""
    import distributed

    scheduler, worker = _scheduler_with_one_worker(threads=1)
    client = distributed.Client(scheduler.scheduler_address)  # type: ignore[attr-defined]
    try:
        client.wait_for_workers(1, timeout=60)
        dot = (
            "digraph q {\n  start [shape=Mdiamond]  done [shape=Msquare]\n"
            "  fan [shape=component]  join [shape=tripleoctagon]\n"
            '  slow [shape=parallelogram, tool_command="sleep 3"]\n'
            '  quick [shape=parallelogram, tool_command="echo hi", timeout="1s"]\n'
            "  start -> fan; fan -> slow; fan -> quick; slow -> join; quick -> join\n"
            "  join -> done\n}\n"
        )
        with open_run(dot, workdir=tmp_path, executor=DaskCluster.attach(client)) as run:
            assert run.run().state is RunState.COMPLETED, run.failure_reason
            assert run.node_outcomes["quick"].context_updates["tool.exit_code"] == 0
    finally:
        client.close()
        worker.kill()  # type: ignore[attr-defined]
        scheduler.close()  # type: ignore[attr-defined]


def test_resume_uses_the_executor_the_run_was_opened_with(
    tmp_path: Path, dask_cluster: DaskCluster
) -> None:
    address = dask_cluster.client.scheduler.address.replace("tcp://", "dask://")
    with open_run(fan_out(1, "true", after="ship"), workdir=tmp_path, executor=address) as run:
        assert run.run().state is RunState.WAITING
        run_dir = run.run_dir
    with resume_run(run_dir) as again:
        assert again.dispatch is not None
        assert again.dispatch.label == f"dask scheduler {address.replace('dask://', 'tcp://')}"


def test_a_cluster_started_here_keeps_its_workers_out_of_the_terminal_s_group() -> None:
    """Ctrl-C in a terminal signals its foreground process group: the workers are not in it."""
    from freshness_magic.cluster import ClusterPool

    pool = ClusterPool()
    try:
        cluster = pool.get("dask")
        assert isinstance(cluster, DaskCluster)
        assert not logging.getLogger("distributed.client").isEnabledFor(logging.ERROR)
        assert not logging.getLogger("distributed.scheduler").isEnabledFor(logging.ERROR)
        groups = cluster.client.run(os.getpgid, 0)
        pids = cluster.client.run(os.getpid)
        assert groups and all(groups[a] == pids[a] != os.getpgid(0) for a in groups)
        cluster.client.close()  # lost: the pool opens a new one on the next use
        again = pool.get("dask")
        assert again is not cluster and again is not None and again.unavailable() is None
    finally:
        pool.close()


def test_an_unreachable_scheduler_is_named_with_the_reason(tmp_path: Path) -> None:
    with pytest.raises(
        ClusterError, match=r"no Dask scheduler at tcp://127\.0\.0\.1:1: Connection"
    ) as info:
        open_run(fan_out(1, "true"), workdir=tmp_path, executor="dask://127.0.0.1:1")
    assert str(info.value).endswith(
        "or give the executor dask without an address to start a cluster on this machine"
    )  # the words of no one front end (it said executor="dask" on the command line too)


def test_a_script_that_opens_a_cluster_unguarded_ends_with_what_to_do(tmp_path: Path) -> None:
    """Worker processes import the script again; without the ``__main__`` guard they cannot
    start, and the script ended in Dask's "Nanny failed to start" traceback."""
    script = tmp_path / "unguarded.py"
    script.write_text(
        "from freshness_magic.session import open_run\n"
        f"open_run({fan_out(1, 'true')!r}, workdir={str(tmp_path)!r}, executor='dask')\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 1
    assert done.stderr.rstrip().splitlines()[-1] == (
        "freshness_magic.errors.ClusterError: the Dask workers on this machine could not start "
        "(Nanny failed to start.); a Python script that opens a cluster must do it under "
        '`if __name__ == "__main__":` (each worker process imports the script again)'
    )


def test_a_bad_graph_executor_is_reported_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "p.dot"
    path.write_text(fan_out(1, "true").replace("digraph fan {", 'digraph fan { executor="spark"'))
    done = subprocess.run(
        [sys.executable, "-m", "freshness_magic", "run", str(path), "--workdir", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 2
    assert f"{path}:1:15: error executor_valid: graph executor='spark' is not known" in done.stderr
