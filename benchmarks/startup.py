"""Start-up time of the commands a user or a pre-commit hook runs most, as ratios to ``python -c pass`` in the
same run.

    python benchmarks/startup.py [--runs 15] [--file one-file.yaml] [--compare-ref REF] [--json out.json] [--check]

Measured, one fresh process each, in interleaved rounds (pass, --version, lint, pass, --version, lint, ...) so a
drift of a shared machine hits every command alike:

  - ``python -c pass``, the floor every Python tool pays;
  - ``compatcheck --version`` (goal: <= 3x the floor);
  - ``compatcheck lint FILE``: one file, no --nodes, no config (goal: <= 8x the floor). Without ``--file`` the
    file is 25 mixed workload documents, made by the generator of ``lint_throughput.py`` (the README's "cold
    start" file);
  - ``compatcheck lint FILE --nodes examples/cluster-profile.yaml``, for reference (no goal);
  - ``compatcheck lint FILE --config CONFIG``, a small config file, for reference (no goal);
  - with ``--compare-ref REF`` (a git revision, exported with ``git archive``), ``--version`` and ``lint`` of that
    code and of this checkout, both started the same way (``python -c`` putting the tree first on sys.path and
    calling ``compatcheck.cli.main``), so the change is measured in the same run.

Each figure is the median wall time over the rounds, and the median CPU time (user + system of the child, from
``os.wait4``), which waiting for a core on a busy machine does not inflate. The ratios are of medians of the same
run. The package is byte-compiled first (as ``pip install`` leaves it) and ``PYTHONDONTWRITEBYTECODE`` is dropped
for the children. The user's cache directory is a fresh temporary one, filled by one warm-up run of each command
(as it is after the first run on a machine). ``--check`` exits 1 when a goal is missed by the wall-time ratio.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
GOALS = {"version": 3.0, "lint": 8.0}


def _command() -> list[str]:
    """The ``compatcheck`` console script next to this interpreter (what users run), else ``python -m``."""
    script = Path(sys.executable).parent / "compatcheck"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "compatcheck"]


def _one_file(directory: Path) -> Path:
    sys.path.insert(0, str(HERE))
    from lint_throughput import workload

    rng = random.Random(1)
    path = directory / "one-file.yaml"
    path.write_text("---\n".join(workload(rng, i) for i in range(25)), encoding="utf-8")
    return path


def _config(directory: Path) -> Path:
    """A small config file, as a configured repository's pre-commit hook reads on every commit."""
    path = directory / "compatcheck.yaml"
    path.write_text("apiVersion: compatcheck/v1\nfailOn: error\nexclude: [vendor/**]\n", encoding="utf-8")
    return path


def _launcher(tree: Path) -> list[str]:
    """``compatcheck`` from the source tree ``tree``, whatever is installed."""
    code = (f"import sys; sys.path.insert(0, {str(tree)!r}); from compatcheck.cli import main; "
            "sys.argv[0] = 'compatcheck'; sys.exit(main())")
    return [sys.executable, "-c", code]


def _run(cmd: list[str], env: dict[str, str], cwd: str) -> tuple[float, float]:
    """Wall and CPU seconds of one run of ``cmd`` (its output discarded)."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {proc.returncode}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=15, help="interleaved rounds (default 15)")
    ap.add_argument("--file", help="the file to lint (default: 25 generated workload documents)")
    ap.add_argument("--compare-ref", metavar="REF", help="also measure the code at this git revision")
    ap.add_argument("--json", metavar="FILE", help="also write the figures as JSON")
    ap.add_argument("--check", action="store_true", help="exit 1 when a goal is missed (wall-time ratio)")
    args = ap.parse_args()

    import compatcheck

    subprocess.run([sys.executable, "-m", "compileall", "-q", str(Path(compatcheck.__file__).parent)], check=True)
    with tempfile.TemporaryDirectory(prefix="compatcheck-startup-") as tmp:
        work = Path(tmp)
        target = Path(args.file).resolve() if args.file else _one_file(work)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["XDG_CACHE_HOME"] = str(work / "cache")
        env.pop("COMPATCHECK_NO_CACHE", None)
        cc = _command()
        commands = {
            "pass": [sys.executable, "-c", "pass"],
            "version": [*cc, "--version"],
            "lint": [*cc, "lint", str(target)],
            "lint --nodes": [*cc, "lint", str(target), "--nodes", str(ROOT / "examples" / "cluster-profile.yaml")],
            "lint --config": [*cc, "lint", str(target), "--config", str(_config(work))],
        }
        if args.compare_ref:
            ref_tree = work / "ref"
            ref_tree.mkdir()
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.compare_ref], check=True,
                                     capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(ref_tree)], input=archive, check=True)
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(ref_tree / "compatcheck")], check=True)
            for label, tree in ((args.compare_ref, ref_tree), ("this", ROOT)):
                commands[f"version ({label})"] = [*_launcher(tree), "--version"]
                commands[f"lint ({label})"] = [*_launcher(tree), "lint", str(target)]
        cwd = str(work)  # no .compatcheck.yaml up from here
        for cmd in commands.values():  # warm-up: page cache, the user cache directory
            _run(cmd, env, cwd)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, cmd in commands.items():
                samples[name].append(_run(cmd, env, cwd))
        shutil.rmtree(work / "cache", ignore_errors=True)

    wall = {n: statistics.median(w for w, _ in s) for n, s in samples.items()}
    cpu = {n: statistics.median(c for _, c in s) for n, s in samples.items()}
    print(f"{args.runs} interleaved rounds; median wall / CPU ms; ratio to `python -c pass` of the same run")
    result: dict[str, object] = {"runs": args.runs, "load_average": os.getloadavg()[0], "commands": {}}
    missed = []
    for name in commands:
        rw, rc = wall[name] / wall["pass"], cpu[name] / cpu["pass"]
        goal = GOALS.get(name)
        verdict = "" if goal is None else (f"  goal <= {goal:g}x: " + ("met" if rw <= goal else "MISSED"))
        if goal is not None and rw > goal:
            missed.append(name)
        print(f"  {name:<22} {wall[name] * 1000:7.1f} / {cpu[name] * 1000:7.1f} ms   "
              f"{rw:5.2f}x wall  {rc:5.2f}x CPU{verdict}")
        result["commands"][name] = {  # type: ignore[index]
            "wall_ms": round(wall[name] * 1000, 2), "cpu_ms": round(cpu[name] * 1000, 2),
            "wall_ratio": round(rw, 3), "cpu_ratio": round(rc, 3), "goal": goal}
    print(f"load average {os.getloadavg()[0]:.1f} (the machine's other work; compare within a run)")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
