"""The built wheel works on its own: one fresh venv per documented extra, smoke-tested against a
local broker started by the wheel's own ``kgm``.

``python tests/packaging/wheel_smoke.py --build DIST_DIR`` first builds the sdist and the wheel
into an emptied ``DIST_DIR`` with ``python -m build`` (the wheel from the sdist, so the sdist is
proven complete) and runs ``twine check --strict`` on both. Then it takes the one ``*.whl`` in
``DIST_DIR``, reads its metadata, and for no extra, ``spark`` and ``testing`` (each one the wheel
declares; a ``testing`` extra without a ``pytest11`` entry point fails) it:

1. creates a venv in a temporary folder outside the source tree and times
   ``pip install 'WHEEL[extra]'``;
2. from that folder, with no ``PYTHONPATH``: ``kgm --version`` (must equal the wheel's version),
   ``kgm broker start --detach`` and ``kgm broker status`` (state kept in the folder),
   ``smoke_inside.py`` (import, consume/commit round trip, the pytest plugin, a Spark job),
   ``kgm demo --bootstrap-servers ...``, and ``kgm broker stop``.

It prints the wheel's size and a table of install and smoke times; the exit code is 1 when any
step failed. ``--extras`` picks a subset (``none,spark``); ``--keep`` leaves the folders.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from email.parser import HeaderParser
from pathlib import Path

SOURCE_TREE = Path(__file__).resolve().parents[2]
INSIDE_SCRIPT = Path(__file__).with_name("smoke_inside.py")
DOCUMENTED_EXTRAS = ("spark", "testing")
STEP_TIMEOUT_S = 900


class SmokeError(Exception):
    """A step of the smoke test failed; the message says which and shows its output."""


@dataclass(frozen=True)
class WheelFacts:
    path: Path
    version: str
    extras: frozenset[str]
    pytest_plugins: tuple[str, ...]


@dataclass
class Outcome:
    extra: str
    install_s: float = 0.0
    smoke_s: float = 0.0
    error: str | None = None


def build_and_check(dist_dir: Path) -> None:
    """``python -m build`` into an emptied ``dist_dir``, then ``twine check --strict``."""
    shutil.rmtree(dist_dir, ignore_errors=True)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    started = time.monotonic()
    build = [sys.executable, "-m", "build", "--outdir", str(dist_dir), str(SOURCE_TREE)]
    run(build, cwd=SOURCE_TREE, env=env, what="python -m build")
    built = sorted(str(p) for p in dist_dir.iterdir())
    print(f"  built {len(built)} files in {time.monotonic() - started:.1f} s", flush=True)
    output = run(
        [sys.executable, "-m", "twine", "--no-color", "check", "--strict", *built],
        cwd=SOURCE_TREE,
        env=env,
        what="twine check",
    )
    print("  " + output.strip().replace("\n", "\n  "), flush=True)


def read_wheel(dist_dir: Path) -> WheelFacts:
    """Version, declared extras and ``pytest11`` entry points from the wheel's dist-info."""
    wheels = sorted(dist_dir.glob("*.whl"))
    if len(wheels) != 1:
        raise SmokeError(f"expected exactly one wheel in {dist_dir}, found {wheels}")
    with zipfile.ZipFile(wheels[0]) as archive:
        names = archive.namelist()
        metadata_name = next(n for n in names if n.endswith(".dist-info/METADATA"))
        metadata = HeaderParser().parsestr(archive.read(metadata_name).decode())
        entry_name = metadata_name.replace("METADATA", "entry_points.txt")
        entry_text = archive.read(entry_name).decode() if entry_name in names else ""
    plugins: list[str] = []
    section = ""
    for line in entry_text.splitlines():
        line = line.strip()
        if line.startswith("["):
            section = line.strip("[]")
        elif section == "pytest11" and "=" in line:
            plugins.append(line.split("=", 1)[0].strip())
    return WheelFacts(
        path=wheels[0],
        version=metadata["Version"],
        extras=frozenset(metadata.get_all("Provides-Extra") or ()),
        pytest_plugins=tuple(plugins),
    )


def extras_to_test(facts: WheelFacts, wanted: list[str] | None) -> list[str]:
    """``none`` plus each documented extra the wheel declares (or the ``wanted`` subset)."""
    if "testing" in facts.extras and not facts.pytest_plugins:
        raise SmokeError("the wheel has a 'testing' extra but no pytest11 entry point")
    extras = ["none", *(e for e in DOCUMENTED_EXTRAS if e in facts.extras)]
    if wanted is None:
        return extras
    unknown = sorted(set(wanted) - set(extras))
    if unknown:
        raise SmokeError(f"--extras {unknown}: the wheel offers {extras}")
    return [e for e in extras if e in wanted]


def run(command: list[str], *, cwd: Path, env: dict[str, str], what: str) -> str:
    """Run one step; raise :class:`SmokeError` with its output when it fails."""
    print(f"  $ {' '.join(command)}", flush=True)
    try:
        result = subprocess.run(
            command, cwd=cwd, env=env, capture_output=True, text=True, timeout=STEP_TIMEOUT_S
        )
    except subprocess.TimeoutExpired as exc:
        raise SmokeError(f"{what}: no answer in {STEP_TIMEOUT_S} s") from exc
    if result.returncode != 0:
        raise SmokeError(f"{what} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result.stdout


def clean_env(folder: Path, venv: Path) -> dict[str, str]:
    """The caller's environment without anything that points into the source tree."""
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in {"PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME", "KAFKA_BOOTSTRAP_SERVERS"}
        and not key.startswith("TOX_")
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["KGM_STATE_DIR"] = str(folder / "state")
    return env


def smoke_one(facts: WheelFacts, extra: str, outcome: Outcome, keep: bool) -> None:
    folder = Path(tempfile.mkdtemp(prefix=f"kgm-wheel-{extra}-"))
    if SOURCE_TREE in folder.resolve().parents:
        raise SmokeError(f"temporary folder {folder} is inside the source tree")
    venv = folder / "venv"
    env = clean_env(folder, venv)
    python, kgm = str(venv / "bin" / "python"), str(venv / "bin" / "kgm")
    broker_started = False
    try:
        run([sys.executable, "-m", "venv", str(venv)], cwd=folder, env=env, what="venv")
        requirement = str(facts.path) if extra == "none" else f"{facts.path}[{extra}]"
        started = time.monotonic()
        pip = [python, "-m", "pip", "install", "-q"]
        run([*pip, requirement], cwd=folder, env=env, what="pip install")
        outcome.install_s = time.monotonic() - started
        if extra == "testing":
            # A pytest plugin's users have pytest; the extra need not bring it.
            has_pytest = subprocess.run([python, "-c", "import pytest"], env=env).returncode == 0
            if not has_pytest:
                run([*pip, "pytest"], cwd=folder, env=env, what="pip install pytest")

        started = time.monotonic()
        shown = run([kgm, "--version"], cwd=folder, env=env, what="kgm --version").strip()
        if shown != f"kgm {facts.version}":
            raise SmokeError(f"kgm --version printed {shown!r}, the wheel is {facts.version}")
        out = run([kgm, "broker", "start", "--detach"], cwd=folder, env=env, what="broker start")
        broker_started = True
        match = re.search(r"^bootstrap\.servers=(\S+)$", out, flags=re.MULTILINE)
        if match is None:
            raise SmokeError(f"kgm broker start printed no address:\n{out}")
        bootstrap = match.group(1)
        status = run([kgm, "broker", "status"], cwd=folder, env=env, what="broker status")
        if f"bootstrap.servers={bootstrap}" not in status:
            raise SmokeError(f"kgm broker status printed {status!r}, expected {bootstrap}")
        script = Path(shutil.copy(INSIDE_SCRIPT, folder / INSIDE_SCRIPT.name))
        inside = [python, str(script), "--bootstrap", bootstrap, "--extra", extra]
        inside += ["--source-tree", str(SOURCE_TREE)]
        print(run(inside, cwd=folder, env=env, what="smoke_inside.py"), end="", flush=True)
        demo = run(
            [kgm, "demo", "--bootstrap-servers", bootstrap], cwd=folder, env=env, what="kgm demo"
        )
        print("  kgm demo: " + (demo.strip().splitlines() or ["(no output)"])[-1], flush=True)
        outcome.smoke_s = time.monotonic() - started
    finally:
        if broker_started:
            run([kgm, "broker", "stop"], cwd=folder, env=env, what="broker stop")
        if keep:
            print(f"  kept {folder}", flush=True)
        else:
            shutil.rmtree(folder, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dist_dir", type=Path)
    parser.add_argument("--build", action="store_true", help="build and twine-check first")
    parser.add_argument("--extras", default=None, help="comma list of none,spark,testing")
    parser.add_argument("--keep", action="store_true", help="keep the venvs and broker folders")
    args = parser.parse_args(argv)
    try:
        if args.build:
            build_and_check(args.dist_dir)
        facts = read_wheel(args.dist_dir)
        wanted = args.extras.split(",") if args.extras else None
        extras = extras_to_test(facts, wanted)
    except SmokeError as exc:
        print(f"FAILED: {exc}", flush=True)
        return 1
    size_kib = facts.path.stat().st_size / 1024
    print(f"wheel {facts.path.name}: {size_kib:.0f} KiB, extras {sorted(facts.extras)}")
    print(f"pytest11 entry points: {list(facts.pytest_plugins) or 'none'}", flush=True)
    outcomes = []
    for extra in extras:
        print(f"[{extra}]", flush=True)
        outcome = Outcome(extra)
        outcomes.append(outcome)
        try:
            smoke_one(facts, extra, outcome, args.keep)
        except SmokeError as exc:
            outcome.error = str(exc)
            print(f"  FAILED: {exc}", flush=True)
    print(f"\n{'extra':<8} {'install s':>9} {'smoke s':>8}  result")
    for o in outcomes:
        result = "ok" if o.error is None else "FAILED"
        print(f"{o.extra:<8} {o.install_s:>9.1f} {o.smoke_s:>8.1f}  {result}")
    failed = sum(o.error is not None for o in outcomes)
    print(f"wheel smoke: {len(outcomes) - failed} of {len(outcomes)} extras ok", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
