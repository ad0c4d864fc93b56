"""Benchmark the Node State Hub on a copy of this machine's standard library ``Lib/``.

Prints: cold index time against plain hashing of the same files (ratio), the time from a file
write to its committed update (median of 50 edits, polling the store's change seq), and
``get_context`` latency (median, p99) against hashing the same file directly.

Run: ``.venv/bin/python benchmarks/bench_hub.py [--edits 50] [--queries 2000]``
Targets: update committed within 200 ms of the write (median); ``get_context`` under 1 ms (median).
"""

from __future__ import annotations

import argparse
import random
import shutil
import sqlite3
import statistics
import sysconfig
import tempfile
import time
from pathlib import Path

from freshness_magic.freshness.hashing import hash_file
from freshness_magic.hub import daemon
from freshness_magic.hub.client import HubClient
from freshness_magic.hub.ignore import IgnoreRules
from freshness_magic.hub.indexer import Indexer
from freshness_magic.hub.store import connect_writer, db_path


def copy_stdlib(target: Path) -> Path:
    source = Path(sysconfig.get_paths()["stdlib"])
    lib = target / "Lib"
    shutil.copytree(
        source, lib, ignore=shutil.ignore_patterns("site-packages", "__pycache__", "*.pyc")
    )
    return lib


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--edits", type=int, default=50)
    parser.add_argument("--queries", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench_hub_") as tmp:
        lib = copy_stdlib(Path(tmp))
        ignore = IgnoreRules(lib)
        files = sorted(Indexer(lib, sqlite3.connect(":memory:"), ignore).walk())
        py_files = [f for f in files if f.endswith(".py")]
        print(f"tree: {lib} ({len(files)} files, {len(py_files)} Python)")

        started = time.perf_counter()
        for rel in files:
            hash_file(lib / rel)
        plain = time.perf_counter() - started
        print(f"plain hashing of all files:        {plain:8.3f} s")

        conn = connect_writer(lib)
        started = time.perf_counter()
        Indexer(lib, conn, IgnoreRules(lib)).sweep()
        cold = time.perf_counter() - started
        symbols = conn.execute("SELECT count(*) FROM symbols").fetchone()[0]
        conn.close()
        print(
            f"cold index (hash+parse+rules+store): {cold:8.3f} s  ({symbols} symbols)  "
            f"ratio to plain hashing: {cold / plain:.1f}x"
        )
        for suffix in ("", "-wal", "-shm"):
            Path(str(db_path(lib)) + suffix).unlink(missing_ok=True)

        started = time.perf_counter()
        daemon.start(lib)
        start_time = time.perf_counter() - started
        print(f"hub start until caught up (cold, incl. process start): {start_time:8.3f} s")
        try:
            client = HubClient(lib)
            reader = sqlite3.connect(f"file:{db_path(lib)}?mode=ro", uri=True)
            rng = random.Random(7)
            latencies = []
            for n, rel in enumerate(rng.sample(py_files, args.edits)):
                before = int(
                    reader.execute("SELECT value FROM meta WHERE key='last_seq'").fetchone()[0]
                )
                path = lib / rel
                text = path.read_text(encoding="utf-8", errors="replace")
                t0 = time.perf_counter()
                path.write_text(text + f"\n\ndef _bench_edit_{n}():\n    return {n}\n")
                while True:
                    seq = int(
                        reader.execute("SELECT value FROM meta WHERE key='last_seq'").fetchone()[0]
                    )
                    if seq > before:
                        break
                    time.sleep(0.001)
                latencies.append(time.perf_counter() - t0)
                time.sleep(0.05)
            median_ms = statistics.median(latencies) * 1000
            print(
                f"write -> committed update ({args.edits} edits): median {median_ms:.1f} ms, "
                f"p90 {percentile(latencies, 0.9) * 1000:.1f} ms, "
                f"max {max(latencies) * 1000:.1f} ms"
                f"  (target: median < 200 ms: {'met' if median_ms < 200 else 'NOT met'})"
            )

            targets = [
                f"{row[0]}:{row[1]}"
                for row in reader.execute(
                    "SELECT path, qualname FROM symbols ORDER BY node_id LIMIT 5000"
                )
            ]
            sample = [rng.choice(targets) for _ in range(args.queries)]
            times = []
            for target in sample:
                t0 = time.perf_counter()
                client.get_context([target])
                times.append(time.perf_counter() - t0)
            hashing = []
            for target in sample[:500]:
                t0 = time.perf_counter()
                hash_file(lib / target.split(":", 1)[0])
                hashing.append(time.perf_counter() - t0)
            med = statistics.median(times) * 1000
            print(
                f"get_context(path:qualname) x{args.queries}: median {med:.3f} ms, "
                f"p99 {percentile(times, 0.99) * 1000:.3f} ms  (target: median < 1 ms: "
                f"{'met' if med < 1 else 'NOT met'}); hash_file of the same file: median "
                f"{statistics.median(hashing) * 1000:.3f} ms, ratio "
                f"{statistics.median(times) / statistics.median(hashing):.2f}x"
            )
            file_times = []
            for target in sample[:500]:
                t0 = time.perf_counter()
                client.get_context([target.split(":", 1)[0]])
                file_times.append(time.perf_counter() - t0)
            print(
                f"get_context(path, all symbols of the file) x500: median "
                f"{statistics.median(file_times) * 1000:.3f} ms, "
                f"p99 {percentile(file_times, 0.99) * 1000:.3f} ms"
            )
            reader.close()
            client.close()
            daemon.stop(lib)
            started = time.perf_counter()
            daemon.start(lib)
            print(
                f"hub restart until caught up (warm: stat sweep of {len(files)} files): "
                f"{time.perf_counter() - started:8.3f} s"
            )
        finally:
            daemon.stop(lib)


if __name__ == "__main__":
    main()
