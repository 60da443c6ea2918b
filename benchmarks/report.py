"""Run the benchmark suites and write a markdown report of medians, throughput and ratios.

Usage: ``python -m benchmarks.report [--output FILE] [--json FILE] [--from-json FILE]
[pytest args...]`` (``make bench-report``). Without ``--from-json`` it runs ``pytest benchmarks
--benchmark-enable --benchmark-only --benchmark-json=FILE`` (extra arguments go to pytest, e.g.
``-k pack``), then reads the JSON and writes ``benchmarks/REPORT.md``.

Generic over groups: every ``benchmark.group`` becomes one table. Within a group, measurements
whose ``extra_info["baseline"]`` is true are the in-run baselines; every other row gets
``baseline median / its median`` against each of them (> 1: we are faster). Other keys read from
``extra_info`` (all optional): ``label`` (row name; default the test name), ``bytes`` (input
bytes: the MB/s column, 10^6 bytes per second), ``output_bytes``, ``targets`` (``{baseline
label: minimum ratio}``), ``max_seconds`` (a limit of the median wall time), ``cpu_seconds``
(CPU time per round), ``peak_rss_bytes`` and ``peak_rss_limit_bytes``, ``other_load``
(cores other processes used meanwhile: the machine may be shared), ``note``, and any
``*_per_second`` rate (shown in the notes column). A later suite (import,
rescore, ...) plugs in by adding ``benchmarks/test_bench_*.py`` with these conventions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUTPUT = ROOT / "benchmarks" / "REPORT.md"
MiB = 1 << 20


@dataclass(frozen=True, slots=True)
class Row:
    """One measurement of the JSON: its group, label, median seconds and extra_info."""

    group: str
    label: str
    name: str
    median: float
    rounds: int
    info: dict

    @property
    def baseline(self) -> bool:
        return bool(self.info.get("baseline"))

    @property
    def throughput(self) -> float | None:
        """MB/s (10^6 bytes) of input, if the benchmark recorded ``bytes``."""
        size = self.info.get("bytes")
        return size / self.median / 1e6 if size and self.median > 0 else None


def load_rows(data: dict) -> list[Row]:
    """The measurements of a pytest-benchmark JSON document, in run order."""
    rows = []
    for bench in data.get("benchmarks", []):
        info = bench.get("extra_info") or {}
        rows.append(
            Row(
                group=bench.get("group") or "(no group)",
                label=info.get("label") or bench["name"],
                name=bench["name"],
                median=bench["stats"]["median"],
                rounds=bench["stats"]["rounds"],
                info=info,
            )
        )
    return rows


def ratios(row: Row, baselines: list[Row]) -> dict[str, float]:
    """``{baseline label: baseline median / row median}`` for every baseline of the group."""
    return {base.label: base.median / row.median for base in baselines if row.median > 0}


def machine_line() -> str:
    """Cores, CPU model, Python, zlib, zstd (library and CLI) of this machine."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    try:
        import zstandard

        zstd = f"zstd {zstandard.ZSTD_VERSION[0]}.{zstandard.ZSTD_VERSION[1]}."
        zstd += f"{zstandard.ZSTD_VERSION[2]} (python-zstandard {zstandard.__version__})"
    except ImportError:
        zstd = "zstd: not installed"
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / (1 << 30)
    return (
        f"{usable} cores ({os.cpu_count()} online), {model}, {memory:.0f} GiB RAM, "
        f"{platform.system()} {platform.release()}; Python {platform.python_version()}; "
        f"zlib {zlib.ZLIB_RUNTIME_VERSION}; {zstd}; {_tool_versions()}"
    )


def _tool_versions() -> str:
    versions = []
    for tool in ("tar", "gzip", "zstd"):
        try:
            out = subprocess.run(
                [tool, "--version"], capture_output=True, text=True, check=False
            ).stdout
            first = out.strip().splitlines()[0] if out.strip() else "?"
        except OSError:
            first = "missing"
        versions.append(first.strip("* ").replace(", by Yann Collet", ""))
    return "CLIs: " + "; ".join(versions)


def _seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.2f} s"
    if value >= 1e-3:
        return f"{value * 1e3:.1f} ms"
    return f"{value * 1e6:.0f} µs"


def _size(value: int | None) -> str:
    if value is None:
        return ""
    return f"{value / 1e6:.1f} MB" if value >= 1e5 else f"{value / 1e3:.1f} kB"


def render(rows: list[Row], machine: str, when: str, note: str = "") -> str:
    """The markdown report of ``rows``."""
    lines = ["# casstore benchmarks", "", f"Machine: {machine}", "", f"Run: {when}"]
    if note:
        lines += ["", note]
    lines += [
        "",
        "Median of the rounds; throughput is input MB (10^6 bytes) per second; the ratio is",
        "baseline median / this median (> 1: faster than that baseline, measured in the same",
        "run). Baselines are in italics.",
    ]
    groups: dict[str, list[Row]] = {}
    for row in rows:
        groups.setdefault(row.group, []).append(row)
    targets = []
    for group, members in groups.items():
        baselines = [row for row in members if row.baseline]
        lines += ["", f"## {_cell(group)}", ""]
        lines += [
            "| measurement | median | rounds | throughput | output | vs baseline | notes |",
            "|---|---:|---:|---:|---:|---|---|",
        ]
        for row in members:
            label = f"*{_cell(row.label)}*" if row.baseline else _cell(row.label)
            speed = f"{row.throughput:.1f} MB/s" if row.throughput is not None else ""
            against = "" if row.baseline else _ratio_text(ratios(row, baselines))
            lines.append(
                f"| {label} | {_seconds(row.median)} | {row.rounds} | {speed} | "
                f"{_size(row.info.get('output_bytes'))} | {_cell(against)} | {_cell(_notes(row))} |"
            )
            targets += _targets(row, baselines)
    if targets:
        lines += ["", "## Targets", "", "| group | target | measured | status |"]
        lines += ["|---|---|---:|---|", *targets]
    return "\n".join(lines) + "\n"


def _ratio_text(values: dict[str, float]) -> str:
    return "; ".join(f"**{value:.2f}x** vs {label}" for label, value in values.items())


def _notes(row: Row) -> str:
    notes = []
    if "peak_rss_bytes" in row.info:
        notes.append(f"peak RSS {row.info['peak_rss_bytes'] / MiB:.1f} MiB")
    if "interpreter_rss_bytes" in row.info:
        rss = row.info["interpreter_rss_bytes"] / MiB
        notes.append(f"(interpreter and imports alone: {rss:.1f} MiB)")
    if "cpu_seconds" in row.info:
        notes.append(f"CPU {_seconds(row.info['cpu_seconds'])} per round")
    for key, value in row.info.items():
        if key.endswith("_per_second") and isinstance(value, int | float):
            notes.append(f"{value:,.1f} {key.removesuffix('_per_second').replace('_', ' ')}/s")
    if row.info.get("other_load") is not None:
        notes.append(f"other processes: {row.info['other_load']:.2f} cores")
    if row.info.get("note"):
        notes.append(str(row.info["note"]))
    return "; ".join(notes)


def _cell(text: str) -> str:
    """``text`` safe inside a markdown table cell (labels such as ``tar | gzip``)."""
    return text.replace("|", "\\|")


def _targets(row: Row, baselines: list[Row]) -> list[str]:
    out = []
    measured = ratios(row, baselines)
    for label, minimum in (row.info.get("targets") or {}).items():
        value = measured.get(label)
        status = "n/a (baseline not run)" if value is None else _status(value >= minimum)
        shown = "" if value is None else f"{value:.2f}x"
        target = _cell(f"{row.label} >= {minimum}x {label}")
        out.append(f"| {row.group} | {target} | {shown} | {status} |")
    if "max_seconds" in row.info:
        limit = row.info["max_seconds"]
        target = _cell(f"{row.label} median <= {_seconds(limit)}")
        out.append(
            f"| {row.group} | {target} | {_seconds(row.median)} | {_status(row.median <= limit)} |"
        )
    if "peak_rss_limit_bytes" in row.info and "peak_rss_bytes" in row.info:
        peak, limit = row.info["peak_rss_bytes"], row.info["peak_rss_limit_bytes"]
        status = _status(peak < limit)
        if row.info.get("note"):
            status += f" ({_cell(str(row.info['note']))})"
        out.append(
            f"| {row.group} | {_cell(row.label)} peak RSS < {limit / MiB:.0f} MiB | "
            f"{peak / MiB:.1f} MiB | {status} |"
        )
    return out


def _status(met: bool) -> str:
    return "met" if met else "**missed**"


def run_benchmarks(json_path: Path, pytest_args: list[str]) -> int:
    """Run the suites under ``benchmarks/`` with benchmarks enabled; pytest's exit code."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        "benchmarks",
        "--benchmark-enable",
        "--benchmark-only",
        f"--benchmark-json={json_path}",
        *pytest_args,
    ]
    print("+", " ".join(command), flush=True)
    return subprocess.run(command, cwd=ROOT, check=False).returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help="markdown file")
    parser.add_argument("--json", type=Path, help="keep pytest-benchmark's JSON here")
    parser.add_argument("--from-json", type=Path, help="render this JSON; run nothing")
    args, pytest_args = parser.parse_known_args(argv)
    code = 0
    note = ""
    if args.from_json is not None:
        json_path = args.from_json
    else:
        json_path = args.json or Path(tempfile.mkstemp(prefix="bench-", suffix=".json")[1])
        code = run_benchmarks(json_path.resolve(), pytest_args)
        if pytest_args:
            note = f"Selection: `pytest benchmarks {' '.join(pytest_args)}`."
        if code != 0:
            note += (
                f"\n\n**pytest exited with status {code}: some benchmarks failed or are missing.**"
            )
    try:
        data = json.loads(json_path.read_text())
    except (OSError, ValueError) as error:
        print(f"no benchmark results in {json_path}: {error}", file=sys.stderr)
        return code or 1
    when = data.get("datetime") or datetime.now(UTC).isoformat(timespec="seconds")
    commit = (data.get("commit_info") or {}).get("id")
    if commit:
        when += f", commit {commit[:12]}"
        if (data.get("commit_info") or {}).get("dirty"):
            when += " (dirty tree)"
    report = render(load_rows(data), machine_line(), when, note)
    args.output.write_text(report)
    print(f"wrote {args.output}")
    if args.json is None and args.from_json is None:
        json_path.unlink(missing_ok=True)
    return code


if __name__ == "__main__":
    sys.exit(main())
