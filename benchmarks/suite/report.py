"""The suite's report: per-problem times and ratios, aggregates, the product's targets, and the
BENCHMARKS.md section, from one or more suite.json files (the shards of one run).

  report.py RESULT [RESULT ...] [--md OUT.md] [--summary OUT.json] [--benchmarks BENCHMARKS.md]

RESULT is a suite.json or a directory holding one. Later files win for a problem present twice.

Definitions. Speedup of Forge over a baseline: baseline median / Forge median, both from the same
run. The torch.compile baseline of a problem is its fastest correct mode; when no mode gave a
correct result, eager stands in (what the user would run), marked in the table. fast_p: the share
of ALL selected problems whose Forge result is correct and more than p times faster (a problem
without a Forge result counts as not fast). Geometric means: over the problems with a correct
Forge result. % of floor: roofline floor / median.
"""

from __future__ import annotations

import argparse
import json
import math
import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks.suite.problems import BY_NAME  # noqa: E402

BEGIN_MARKER = "<!-- forge-suite:begin (benchmarks/suite/report.py writes this section) -->"
END_MARKER = "<!-- forge-suite:end -->"
NOT_REACHED = "selected but not reached"
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead")
FAST_THRESHOLDS = (1.0, 1.5)

TARGET_GEOMEAN_VS_EAGER = 2.0
TARGET_GEOMEAN_VS_COMPILE = 1.3
TARGET_FLOOR_FRACTION = 0.85  # memory-bound: within 15% of the floor
DECODE_B1 = "llama3_8b_layer_decode_b1_kv2048_bf16"
TARGET_DECODE_B1_MS = 0.12


def load(path: str | pathlib.Path) -> dict:
    path = pathlib.Path(path)
    if path.is_dir():
        path = path / "suite.json"
    return json.loads(path.read_text())


def merge(results: list[dict]) -> dict:
    """One view of several runs (shards): each run's environment, and every problem's latest
    record in the order the runs selected them."""
    runs, problems = [], {}
    for result in results:
        runs.append({key: value for key, value in result.items()
                     if key not in ("problems", "selected")})
        for record in result["problems"]:
            problems[record["name"]] = record
        for name in result.get("selected", []):
            problems.setdefault(name, {"name": name, "error": NOT_REACHED})
    order = {name: index for index, name in enumerate(BY_NAME)}
    return {"runs": runs,
            "problems": sorted(problems.values(), key=lambda r: order.get(r["name"], len(order)))}


def median_ms(entry: dict | None) -> float | None:
    if not entry or entry.get("status", "ok") != "ok" or "timing" not in entry:
        return None
    return entry["timing"]["median_ms"]


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or denominator is None or denominator <= 0:
        return None
    return numerator / denominator


def problem_row(record: dict) -> dict:
    """The numbers of one problem that the table and the aggregates use."""
    eager = median_ms(record.get("eager"))
    modes = {}
    for mode, entry in record.get("compile", {}).items():
        modes[mode] = {"ms": median_ms(entry), "correct": entry.get("correct"),
                       "status": entry.get("status", "ok"), "compile_s": entry.get("first_call_s")}
    correct_modes = {m: v["ms"] for m, v in modes.items() if v["ms"] is not None and v["correct"]}
    best_mode = min(correct_modes, key=correct_modes.get) if correct_modes else None
    compile_ms = correct_modes[best_mode] if best_mode else None
    compile_baseline = compile_ms if best_mode else eager
    forge_entry = record.get("forge") or {}
    forge_ms = median_ms(forge_entry) if forge_entry.get("status") == "ok" else None
    forge_correct = forge_entry.get("correct") if forge_ms is not None else None
    floor = record.get("floor_ms")
    job = record.get("forge_job") or {}
    return {
        "name": record["name"], "level": record.get("level"), "bound": record.get("bound"),
        "anchor": record.get("anchor", False), "floor_ms": floor, "eager_ms": eager,
        "modes": modes, "best_mode": best_mode, "compile_ms": compile_ms,
        "compile_baseline_ms": compile_baseline, "forge_ms": forge_ms,
        "forge_correct": forge_correct,
        "forge_status": forge_entry.get("status", "not run"),
        "forge_reason": forge_entry.get("reason") or forge_entry.get("error"),
        "vs_eager": ratio(eager, forge_ms), "vs_compile": ratio(compile_baseline, forge_ms),
        "forge_floor_fraction": ratio(floor, forge_ms),
        "compile_floor_fraction": ratio(floor, compile_ms),
        "compile_vs_eager": ratio(eager, compile_ms),
        "candidates_tried": job.get("candidates_tried"),
        "time_to_first_speedup_s": job.get("time_to_first_speedup_s"),
        "time_to_best_s": job.get("time_to_best_s"),
        "error": record.get("error"),
    }


def geomean(values: list[float]) -> float | None:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else None


def speedup_stats(speedups: list[float | None], correct: list[bool], total: int) -> dict:
    """fast_p over `total` problems and the geometric mean over the correct results."""
    valid = [s for s, ok in zip(speedups, correct) if ok and s is not None]
    stats = {"problems": total, "results": len(valid), "geomean": geomean(valid)}
    for threshold in FAST_THRESHOLDS:
        fast = sum(1 for s in valid if s > threshold)
        stats[f"fast_{threshold:g}"] = fast / total if total else None
    return stats


def aggregates(rows: list[dict]) -> dict:
    total = len(rows)
    correct = [row["forge_correct"] is True for row in rows]
    return {
        "forge_vs_eager": speedup_stats([r["vs_eager"] for r in rows], correct, total),
        "forge_vs_compile": speedup_stats([r["vs_compile"] for r in rows], correct, total),
        "compile_vs_eager": speedup_stats([r["compile_vs_eager"] for r in rows],
                                          [r["compile_ms"] is not None for r in rows], total),
        "forge_results": sum(1 for r in rows if r["forge_ms"] is not None),
        "forge_incorrect": sum(1 for r in rows if r["forge_correct"] is False),
    }


def targets(rows: list[dict], totals: dict) -> list[tuple[str, str, str]]:
    """(target, status, detail) for each of the product's targets; status is "met", "not met" or
    "not measured"."""
    measured = [r for r in rows if r["forge_ms"] is not None]
    missing = len(rows) - len(measured)
    partial = f" ({missing} of {len(rows)} problems without a Forge result)" if missing else ""

    def status(ok: bool) -> str:
        if not ok:
            return "not met"
        return "met on the measured problems" if missing else "met"

    result = []
    for key, label, goal in (("forge_vs_eager", "eager", TARGET_GEOMEAN_VS_EAGER),
                             ("forge_vs_compile", "the best torch.compile mode",
                              TARGET_GEOMEAN_VS_COMPILE)):
        mean = totals[key]["geomean"]
        name = f"geometric mean >= {goal:g}x vs {label}"
        if mean is None:
            result.append((name, "not measured", "no correct Forge result"))
        else:
            result.append((name, status(mean >= goal), f"{mean:.2f}x{partial}"))
    memory = [r for r in measured if r["bound"] == "memory"]
    far = [r["name"] for r in memory if not r["forge_correct"]
           or (r["forge_floor_fraction"] or 0) < TARGET_FLOOR_FRACTION]
    name = "every memory-bound problem within 15% of its floor"
    if not memory:
        result.append((name, "not measured", "no Forge result on a memory-bound problem"))
    else:
        detail = f"{len(memory) - len(far)} of {len(memory)} within" + (
            f"; not: {', '.join(far)}" if far else "") + partial
        result.append((name, status(not far), detail))
    decode = next((r for r in rows if r["name"] == DECODE_B1), None)
    name = f"Llama-3-8B decoder layer, batch 1, one token <= {TARGET_DECODE_B1_MS} ms"
    if decode is None or decode["forge_ms"] is None:
        result.append((name, "not measured", "no Forge result"))
    else:
        ok = decode["forge_correct"] and decode["forge_ms"] <= TARGET_DECODE_B1_MS
        result.append((name, "met" if ok else "not met", f"{decode['forge_ms']:.3f} ms"
                       + ("" if decode["forge_correct"] else ", incorrect")))
    slower = [r["name"] for r in measured if r["vs_eager"] is not None and r["vs_eager"] < 1]
    wrong = [r["name"] for r in measured if not r["forge_correct"]]
    for name, failures, ok_text, bad_text in (
            ("no problem slower than eager", slower, "none slower", "slower"),
            ("no incorrect result", wrong, "all correct", "incorrect")):
        if not measured:
            result.append((name, "not measured", "no Forge result"))
        else:
            result.append((name, status(not failures),
                           (f"{bad_text}: {', '.join(failures)}" if failures else ok_text)
                           + partial))
    return result


# ---------------------------------------------------------------------------------------------
# Markdown
# ---------------------------------------------------------------------------------------------

def fmt_ms(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.3f}" if value >= 0.01 else f"{value:.3g}"


def fmt_x(value: float | None) -> str:
    return "—" if value is None else f"{value:.2f}x"


def fmt_pct(value: float | None) -> str:
    return "—" if value is None else f"{value:.0%}"


def fmt_s(value) -> str:
    if value is None:
        return "—"
    return f"{value:.0f}" if value >= 10 else f"{value:.1f}"


def compile_seconds(row: dict) -> str:
    return " / ".join(fmt_s(row["modes"][mode]["compile_s"]) for mode in COMPILE_MODES
                      if mode in row["modes"])


def mode_cell(mode: dict | None) -> str:
    if mode is None:
        return ""
    if mode["ms"] is None:
        return mode["status"]
    return fmt_ms(mode["ms"]) + ("" if mode["correct"] else " (wrong)")


def run_lines(runs: list[dict]) -> list[str]:
    lines = []
    for run in runs:
        ceilings = run.get("ceilings", {})
        peaks = ", ".join(f"{dtype} {value / 1e12:.1f}" for dtype, value in
                          ceilings.get("matmul_flops_per_s", {}).items())
        measured = run.get("measured_copy_bytes_per_s")
        lines.append(
            f"- {run.get('date', '?')}, shard {run.get('shard') or 'all'}: {run.get('card', '?')}, "
            f"commit {run.get('commit', '?')}, torch {run.get('torch', '?')}, "
            f"triton {run.get('triton') or '—'}, Forge budget {run.get('budget') or '—'}; "
            f"reference {run.get('reference', '?')}; floors from copy "
            f"{ceilings.get('copy_bytes_per_s', 0) / 1e12:.2f} TB/s and matmul {peaks} TFLOP/s"
            + (f" (copy measured in this run: {measured / 1e12:.2f} TB/s)" if measured else "")
            + (" — SMALL VARIANTS, not the suite's sizes" if run.get("small") else ""))
    return lines


TABLE_HEADER = ("problem", "level", "bound", "floor ms", "eager ms", "compile ms",
                "max-autotune ms", "reduce-overhead ms", "Forge ms", "vs eager", "vs best compile",
                "Forge % of floor", "best compile % of floor", "correct", "compile s",
                "candidates", "first speedup s", "best s")


def table_cells(row: dict) -> list[str]:
    if row["error"] and not row["modes"] and row["eager_ms"] is None:
        unreached = row["error"] == NOT_REACHED
        return [row["name"], row["level"] or "", "", "", "not reached" if unreached else "error"
                ] + [""] * 13
    modes = row["modes"]
    eager_stands_in = row["best_mode"] is None and row["compile_baseline_ms"] is not None
    forge = fmt_ms(row["forge_ms"]) if row["forge_ms"] is not None else row["forge_status"]
    return [row["name"], row["level"], row["bound"], fmt_ms(row["floor_ms"]),
            fmt_ms(row["eager_ms"]), mode_cell(modes.get("default")),
            mode_cell(modes.get("max-autotune-no-cudagraphs")),
            mode_cell(modes.get("reduce-overhead")), forge, fmt_x(row["vs_eager"]),
            fmt_x(row["vs_compile"]) + (" (eager)" if eager_stands_in else ""),
            fmt_pct(row["forge_floor_fraction"]), fmt_pct(row["compile_floor_fraction"]),
            {True: "yes", False: "NO", None: "—"}[row["forge_correct"]], compile_seconds(row),
            "—" if row["candidates_tried"] is None else str(row["candidates_tried"]),
            fmt_s(row["time_to_first_speedup_s"]), fmt_s(row["time_to_best_s"])]


def problem_notes(record: dict, row: dict) -> list[str]:
    """Why a torch.compile mode or the problem itself has no correct time."""
    notes = []
    for mode, entry in row["modes"].items():
        if entry["status"] == "ok" and entry["correct"]:
            continue
        raw = record["compile"][mode]
        detail = (raw.get("error") or raw.get("check", {}).get("failure")
                  or raw.get("recheck_failure", ""))
        verdict = entry["status"] + ("" if entry["correct"] in (True, None) else ", incorrect")
        notes.append(f"{row['name']}, torch.compile {mode}: {verdict}: {detail[:300]}")
    if row["error"]:
        notes.append(f"{row['name']}: {row['error'][:300]}")
    return notes


def protocol_line(runs: list[dict]) -> str:
    timer = runs[0].get("timer", {}) if runs else {}
    flush = (f"a buffer of {timer['flush_bytes'] / 2**20:.0f} MiB (>= 2x L2) written and waited "
             "for before each rep" if "flush_bytes" in timer else "no L2 flush")
    return (f"Protocol for every column: {timer.get('kind', '?')}, {flush}, "
            f"{timer.get('warmup_calls', '?')} warm-up calls, median of "
            f"{timer.get('min_reps', '?')}-{timer.get('max_reps', '?')} reps (more for short "
            "calls). Compile s: the first call of each torch.compile mode (default / "
            "max-autotune / reduce-overhead). Correctness: the judge's tolerances (float32 1e-4, "
            "bf16/fp16 1e-2, element-wise and relative norm) against a float64 run of the same "
            "module, widened by eager's own error against it.")


def render(merged: dict) -> str:
    """The suite's markdown section: runs, table, aggregates, targets, notes."""
    rows = [problem_row(record) for record in merged["problems"]]
    totals = aggregates(rows)
    runs = merged["runs"]
    cards = sorted({run.get("card", "?") for run in runs})
    lines = [f"## End-to-end suite: Forge against eager and torch.compile ({', '.join(cards)})", ""]
    lines += run_lines(runs) + ["", protocol_line(runs), ""]
    lines += ["| " + " | ".join(TABLE_HEADER) + " |", "|" + "---|" * len(TABLE_HEADER)]
    lines += ["| " + " | ".join(table_cells(row)) + " |" for row in rows]
    lines += ["", "| comparison | results | fast_1 | fast_1.5 | geometric mean |",
              "|---|---|---|---|---|"]
    for key, label in (("forge_vs_eager", "Forge vs eager"),
                       ("forge_vs_compile", "Forge vs best torch.compile mode"),
                       ("compile_vs_eager", "best torch.compile mode vs eager (context)")):
        stats = totals[key]
        lines.append(f"| {label} | {stats['results']} of {stats['problems']} "
                     f"| {fmt_pct(stats['fast_1'])} | {fmt_pct(stats['fast_1.5'])} "
                     f"| {fmt_x(stats['geomean'])} |")
    lines += ["", "fast_p: share of all problems with a correct Forge result more than p times "
              "faster; a problem without one counts as not fast. Geometric means over the correct "
              "results. \"(eager)\": no torch.compile mode gave a correct result, so eager is the "
              "baseline.", "", "Targets:", ""]
    lines += [f"- {name}: **{status}** ({detail})" for name, status, detail in
              targets(rows, totals)]
    reasons = sorted({row["forge_reason"] for row in rows
                      if row["forge_ms"] is None and row["forge_reason"]})
    if reasons:
        lines += ["", "Forge not run: " + "; ".join(reasons) + "."]
    notes = [note for record, row in zip(merged["problems"], rows)
             for note in problem_notes(record, row)]
    if notes:
        lines += ["", "Notes:", ""] + [f"- {note}" for note in notes]
    return "\n".join(lines) + "\n"


def update_benchmarks(path: pathlib.Path, section: str) -> None:
    """Replaces the text between the suite's markers in `path`, or inserts the marked section
    before the first "## " section (the file lists results newest first)."""
    text = path.read_text() if path.exists() else "# Forge benchmarks\n"
    block = f"{BEGIN_MARKER}\n{section.rstrip()}\n{END_MARKER}\n"
    if BEGIN_MARKER in text and END_MARKER in text:
        before, rest = text.split(BEGIN_MARKER, 1)
        after = rest.split(END_MARKER, 1)[1].lstrip("\n")
        text = before + block + ("\n" + after if after else "")
    else:
        index = text.find("\n## ")
        if index < 0:
            text = text.rstrip("\n") + "\n\n" + block
        else:
            text = text[: index + 1] + block + "\n" + text[index + 1:]
    path.write_text(text)


def one_line(record: dict) -> str:
    row = problem_row(record)
    parts = [f"eager {fmt_ms(row['eager_ms'])}"]
    parts += [f"{mode} {mode_cell(entry)}" for mode, entry in row["modes"].items()]
    parts.append(f"forge {fmt_ms(row['forge_ms']) if row['forge_ms'] else row['forge_status']}")
    parts.append(f"floor {fmt_ms(row['floor_ms'])}")
    return f"{row['name']}: " + ", ".join(parts) + (f"; error: {row['error'][:200]}"
                                                      if row["error"] else "")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("results", nargs="+")
    parser.add_argument("--md", type=pathlib.Path)
    parser.add_argument("--summary", type=pathlib.Path, help="aggregates and targets as JSON")
    parser.add_argument("--benchmarks", type=pathlib.Path,
                        help="BENCHMARKS.md whose suite section to regenerate")
    args = parser.parse_args(argv)
    merged = merge([load(path) for path in args.results])
    section = render(merged)
    if args.md:
        args.md.write_text(section)
    if args.summary:
        rows = [problem_row(record) for record in merged["problems"]]
        totals = aggregates(rows)
        args.summary.write_text(json.dumps(
            {"runs": merged["runs"], "rows": rows, "aggregates": totals,
             "targets": [dict(zip(("target", "status", "detail"), t))
                         for t in targets(rows, totals)]}, indent=1))
    if args.benchmarks:
        update_benchmarks(args.benchmarks, section)
    print(section)
    return 0


if __name__ == "__main__":
    sys.exit(main())
