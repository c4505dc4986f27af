"""Run the hostile-input corpus: one child process per core, each case in-process.

The input kinds are shared out over ``--jobs`` lanes (two by default, one per core); each
lane is one child process that imports simtrain once (from ``--repo``, default this
checkout), caps its address space (``RLIMIT_AS``) and runs the CLI entry point ``run_app``
on each case in turn, in the case's own folder, with a per-case alarm. It reports every case
on a private pipe. The parent kills a child that stops answering (a case stuck in C code
where the alarm cannot reach it), records a hang, and starts a new child at the next case.

Every case gets one or more of these outcomes (the issue's six, plus ``clean``):

* ``traceback``: an exception escaped ``run_app`` (or the child crashed);
* ``hang``: the case ran past the time limit;
* ``memory``: the case's peak RSS went over the memory limit or it hit the address-space cap;
* ``exit0``: the command succeeded on input that is wrong;
* ``not_one_line``: stderr is not exactly one ``error:`` line naming the case's field, or the
  exit code is not 2;
* ``outside``: a file appeared outside the case's output folder.

Usage::

    python tests/hostile/runner.py                         # this checkout, summary + slowest ten
    python tests/hostile/runner.py --repo /tmp/base --json before.json   # another checkout
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import pickle
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
OUTCOMES = ("traceback", "hang", "memory", "exit0", "not_one_line", "outside")
TIMEOUT_S = 10.0
"""Wall-time limit of one case (the issue's 10 s to reject an input)."""
MEMORY_LIMIT_BYTES = 1 << 30
"""Peak RSS allowed while rejecting one input (the issue's 1 GB)."""
ADDRESS_SPACE_HEADROOM_BYTES = 3 << 30
"""RLIMIT_AS of a child: its size after importing simtrain plus this."""
WARM_UP = (
    "simtrain.api",
    "simtrain.sweep.run",
    "simtrain.sweep.planner",
    "simtrain.reliability",
    "simtrain.traceio.run",
    "simtrain.traceio.chakra",
    "simtrain.topology",
    "matplotlib.pyplot",
)
"""Modules a child imports before its first case."""
GRACE_S = 8.0
"""Extra time the parent waits before it kills a child whose alarm did not fire."""


# ---------------------------------------------------------------------------------------------
# child side


class CaseTimeout(BaseException):
    """Raised by the alarm inside a case (a BaseException, so ``except Exception`` misses it)."""


def _status(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _reset_peak() -> None:
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
    except OSError:
        pass


def _fill(text: str, where: dict[str, str]) -> str:
    for key, value in where.items():
        text = text.replace("{" + key + "}", value)
    return text


def _lay_out(files: dict[str, Any], folder: Path, where: dict[str, str]) -> None:
    folder.mkdir(parents=True)
    for rel, content in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if content is None:
            path.mkdir(exist_ok=True)
        elif content == "__fifo__":
            os.mkfifo(path)
        elif isinstance(content, dict) and "symlink" in content:
            path.symlink_to(content["symlink"])
        elif isinstance(content, dict) and "repeat" in content:
            with open(path, "wb") as handle:
                handle.write(content["prefix"])
                handle.write(content["repeat"] * content["times"])
                handle.write(content["suffix"])
        elif isinstance(content, dict) and "sparse" in content:
            with open(path, "wb") as handle:
                handle.truncate(content["sparse"])
        elif isinstance(content, str):
            path.write_text(_fill(content, where), encoding="utf-8")
        else:
            path.write_bytes(content)


def _folder_name(case: dict[str, Any]) -> str:
    return f"{case['kind']}-{case['name']}".replace("/", "_")[:80]


def _tree(folder: Path) -> set[str]:
    found: set[str] = set()
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        for name in dirnames + filenames:
            found.add(os.path.relpath(os.path.join(dirpath, name), folder))
    return found


def _one_line_naming(stderr: str, field: str) -> bool:
    lines = stderr.splitlines()
    return len(lines) == 1 and lines[0].startswith("error: ") and field in lines[0]


def run_case(case: dict[str, Any], root: Path, run_app: Any, timeout_s: float) -> dict[str, Any]:
    """Run one case in-process; return its outcomes, wall time, peak RSS and stderr."""
    import io

    folder = root / _folder_name(case)
    where = {"in": str(folder / "in"), "out": str(folder / "out"), "case": str(folder)}
    _lay_out(case["files"], folder / "in", where)
    (folder / "work").mkdir()
    before = _tree(folder)
    above_before = set(os.listdir(root)), set(os.listdir(root.parent))
    argv = [_fill(a, where) for a in case["argv"]]
    saved = sys.stdout, sys.stderr, os.getcwd()
    out, err = io.StringIO(), io.StringIO()
    outcomes: list[str] = []
    code: Any = None
    detail = ""

    def alarm(signum: int, frame: Any) -> None:
        raise CaseTimeout

    signal.signal(signal.SIGALRM, alarm)
    os.chdir(folder / "work")
    _reset_peak()
    began = time.perf_counter()
    try:
        sys.stdout, sys.stderr = out, err
        signal.setitimer(signal.ITIMER_REAL, timeout_s)
        try:
            code = run_app(argv)
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
    except CaseTimeout:
        outcomes.append("hang")
    except MemoryError:
        outcomes.append("memory")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException as exc:  # the corpus is looking for exactly these
        outcomes.append("traceback")
        detail = f"{type(exc).__name__}: {str(exc)[:300]}"
    finally:
        sys.stdout, sys.stderr = saved[0], saved[1]
        os.chdir(saved[2])
    wall_s = time.perf_counter() - began
    peak = _status("VmHWM")
    stderr = err.getvalue()
    if "Traceback (most recent call last)" in stderr and "traceback" not in outcomes:
        outcomes.append("traceback")
    if peak > MEMORY_LIMIT_BYTES and "memory" not in outcomes:
        outcomes.append("memory")
    if code == 0:
        outcomes.append("exit0")
    if code != 2 or not _one_line_naming(stderr, case["field"]):
        outcomes.append("not_one_line")
    new = {p for p in _tree(folder) - before if not p.startswith("out")}
    new |= {f"../{p}" for p in set(os.listdir(root)) - above_before[0]}
    new |= {f"../../{p}" for p in set(os.listdir(root.parent)) - above_before[1]}
    if new:
        outcomes.append("outside")
    _remove(folder)
    for extra in set(os.listdir(root)) - above_before[0]:
        _remove(root / extra)
    for extra in set(os.listdir(root.parent)) - above_before[1]:
        _remove(root.parent / extra)
    return {
        "kind": case["kind"],
        "name": case["name"],
        "code": code,
        "outcomes": outcomes,
        "wall_s": wall_s,
        "peak_rss_bytes": peak,
        "stderr": stderr[:600],
        "detail": detail or ", ".join(sorted(new))[:300],
    }


def _remove(path: Path) -> None:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path, ignore_errors=True)


def child_main(args: argparse.Namespace) -> None:
    """Child process: import simtrain from the repo, cap memory, run cases from ``--start``."""
    import resource

    report = os.fdopen(args.report_fd, "w", buffering=1)
    sys.path.insert(0, str(Path(args.repo).resolve()))
    os.environ.setdefault("MPLBACKEND", "Agg")
    import simtrain.cli  # noqa: F401  (registers the commands)
    from simtrain.cli.app import run_app

    # Import once what the commands import lazily, so a case's time is the time to refuse
    # its input, not the first import of pandas or matplotlib (seconds on a loaded machine).
    for module in WARM_UP:
        with contextlib.suppress(ImportError):
            importlib.import_module(module)

    headroom = args.address_space_headroom
    cap = _status("VmSize") + headroom
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
    with open(args.cases, "rb") as handle:
        cases = pickle.load(handle)
    root = Path(args.root)
    for index in range(args.start, len(cases)):
        report.write(json.dumps({"start": index}) + "\n")
        result = run_case(cases[index], root, run_app, args.timeout)
        report.write(json.dumps({"index": index, "result": result}) + "\n")
    report.write(json.dumps({"done": True}) + "\n")


# ---------------------------------------------------------------------------------------------
# parent side


def run_kind(
    label: str,
    cases: list[dict[str, Any]],
    repo: Path,
    workdir: Path,
    timeout_s: float = TIMEOUT_S,
) -> list[dict[str, Any]]:
    """Run cases in child processes, one after another; a child that hangs is replaced."""
    case_file = workdir / f"{label}.pickle"
    with open(case_file, "wb") as handle:
        pickle.dump(cases, handle)
    root = workdir / "sandbox" / label / "cases"
    root.mkdir(parents=True, exist_ok=True)
    results: dict[int, dict[str, Any]] = {}
    start = 0
    while start < len(cases):
        read_fd, write_fd = os.pipe()
        env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}
        env["MPLBACKEND"] = "Agg"
        env["PYTHONPATH"] = str(repo)
        log = open(workdir / f"{label}.log", "ab")  # noqa: SIM115  (closed after the child)
        child = subprocess.Popen(
            [
                sys.executable,
                str(HERE),
                "--child",
                "--cases",
                str(case_file),
                "--repo",
                str(repo),
                "--root",
                str(root),
                "--start",
                str(start),
                "--timeout",
                str(timeout_s),
                "--report-fd",
                str(write_fd),
            ],
            pass_fds=(write_fd,),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=log,
            start_new_session=True,
            env=env,
            cwd=str(workdir),
        )
        os.close(write_fd)
        current, began = None, time.monotonic()
        buffer = b""
        finished = False
        deadline_s = 60.0  # interpreter start-up and imports
        while True:
            ready, _, _ = select.select([read_fd], [], [], 1.0)
            if ready:
                chunk = os.read(read_fd, 1 << 16)
                if not chunk:
                    break
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    message = json.loads(line)
                    if "start" in message:
                        current, began = message["start"], time.monotonic()
                        deadline_s = timeout_s + GRACE_S
                    elif "result" in message:
                        results[message["index"]] = message["result"]
                        current = None
                    elif message.get("done"):
                        finished = True
            if time.monotonic() - began > deadline_s:
                os.killpg(child.pid, signal.SIGKILL)
                break
        os.close(read_fd)
        child.wait()
        log.close()
        if finished:
            break
        failed = current if current is not None else start
        if failed not in results and failed < len(cases):
            killed = time.monotonic() - began > deadline_s
            case = cases[failed]
            results[failed] = {
                "kind": case["kind"],
                "name": case["name"],
                "code": None,
                "outcomes": ["hang" if killed else "traceback", "not_one_line"],
                "wall_s": time.monotonic() - began,
                "peak_rss_bytes": 0,
                "stderr": "",
                "detail": "killed by the parent"
                if killed
                else f"child died (exit {child.returncode})",
            }
            if not killed and child.returncode in (-signal.SIGKILL, -signal.SIGSEGV):
                results[failed]["outcomes"].append("memory")
        shutil.rmtree(root / _folder_name(cases[failed]), ignore_errors=True)
        start = failed + 1
    return [results[i] for i in sorted(results)]


def run_corpus(
    repo: Path | None = None,
    kinds: list[str] | None = None,
    timeout_s: float = TIMEOUT_S,
    jobs: int = 2,
) -> list[dict[str, Any]]:
    """Generate the corpus and run it against ``repo`` (default: this checkout)."""
    from concurrent.futures import ThreadPoolExecutor

    sys.path.insert(0, str(HERE.parents[2]))
    from tests.hostile.corpus import KINDS, all_cases

    repo = (repo or HERE.parents[2]).resolve()
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for case in all_cases():
        if kinds is None or case.kind in kinds:
            by_kind.setdefault(case.kind, []).append(case.to_dict())
    with tempfile.TemporaryDirectory(prefix="simtrain-hostile-") as tmp:
        workdir = Path(tmp)
        # One child per lane (a core), each running whole kinds one after another: an
        # interpreter start-up and the imports cost seconds, a case milliseconds.
        lanes: list[list[str]] = [[] for _ in range(max(1, jobs))]
        for kind in sorted(by_kind, key=lambda k: -len(by_kind[k])):
            min(lanes, key=lambda lane: sum(len(by_kind[k]) for k in lane)).append(kind)
        with ThreadPoolExecutor(max_workers=len(lanes)) as pool:
            futures = [
                pool.submit(
                    run_kind,
                    f"lane{i}",
                    [case for kind in lane for case in by_kind[kind]],
                    repo,
                    workdir,
                    timeout_s,
                )
                for i, lane in enumerate(lanes)
                if lane
            ]
            done = [r for future in futures for r in future.result()]
    order = {k: i for i, k in enumerate(KINDS)}
    return sorted(done, key=lambda r: order[r["kind"]])


def summary(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts of every outcome, of clean cases, and the cases by kind."""
    counts = Counter(o for r in results for o in set(r["outcomes"]))
    return {
        "cases": len(results),
        "by_kind": dict(Counter(r["kind"] for r in results)),
        "outcomes": {o: counts.get(o, 0) for o in OUTCOMES},
        "clean": sum(not r["outcomes"] for r in results),
    }


def slowest(results: list[dict[str, Any]], n: int = 10) -> list[dict[str, Any]]:
    """The ``n`` slowest cases."""
    return sorted(results, key=lambda r: -r["wall_s"])[:n]


def main() -> None:
    """Command line: run the corpus (or, with ``--child``, be one child)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repo", default=str(HERE.parents[2]), help="checkout to test")
    parser.add_argument("--kinds", default="", help="comma-separated kinds (default: all)")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help="seconds per case")
    parser.add_argument("--jobs", type=int, default=2, help="children at once")
    parser.add_argument("--json", default="", help="write every case's result here")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--cases", help=argparse.SUPPRESS)
    parser.add_argument("--root", help=argparse.SUPPRESS)
    parser.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--report-fd", type=int, help=argparse.SUPPRESS)
    parser.add_argument(
        "--address-space-headroom",
        type=int,
        default=ADDRESS_SPACE_HEADROOM_BYTES,
        help=argparse.SUPPRESS,
    )
    args = parser.parse_args()
    if args.child:
        child_main(args)
        return
    began = time.perf_counter()
    kinds = [k for k in args.kinds.split(",") if k] or None
    results = run_corpus(Path(args.repo), kinds, args.timeout, args.jobs)
    info = summary(results)
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": info, "results": results}, indent=1))
    print(f"{info['cases']} cases against {args.repo} in {time.perf_counter() - began:.0f} s")
    print("by kind: " + ", ".join(f"{k} {v}" for k, v in info["by_kind"].items()))
    for outcome in OUTCOMES:
        print(f"  {outcome:14s} {info['outcomes'][outcome]:5d}")
    print(f"  {'clean':14s} {info['clean']:5d}")
    print("slowest ten:")
    for r in slowest(results):
        print(
            f"  {r['wall_s']:7.2f} s {r['peak_rss_bytes'] / 2**20:7.0f} MiB  "
            f"{r['kind']}/{r['name'][:60]}  {','.join(r['outcomes']) or 'clean'}"
        )


if __name__ == "__main__":
    main()
