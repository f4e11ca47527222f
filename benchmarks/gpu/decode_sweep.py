"""Issue 22's decode attention sweep beside eager SDPA, in one run (run_decode_sweep.sh).

  decode_sweep.py GTEST_LOG OUT_DIR

Times eager `F.scaled_dot_product_attention(q, k, v, enable_gqa=True)` (bf16, Llama-3-8B's 32
query heads over 8 K/V heads, D 128, one query) on the shapes flash_attention_gpu_test's
DecodeSweep times, with problems.py's protocol (a >= 2x L2 buffer written before every rep, CUDA
events, warm-up, median of 30), reads the sweep's rows from GTEST_LOG ("| b1 kv2048 | point | us |
GB/s | % of copy |" and the measured copy bandwidth) and writes OUT_DIR/decode_sweep.md: per shape
the fastest judged point, its GB/s and share of the copy bandwidth, eager's time and share, the
ratio, and every point sorted. OUT_DIR/decode_sweep.json holds the same numbers.
"""

import json
import pathlib
import re
import statistics
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from problems import BF16, bench  # noqa: E402

SHAPES = [(1, 2048), (1, 8192), (1, 32768), (8, 2048), (8, 8192), (8, 32768)]
HEADS, KV_HEADS, HEAD_DIM = 32, 8, 128
ROW = re.compile(r"^\| (b\d+ kv\d+) \| (.*?) +\| +([\d.]+) us \| +(\d+) GB/s \| +([\d.]+)% of copy \|")


def min_bytes(batch, kv_len):
    """Q, K, V read and the output written once, bf16: the floor's bytes (as task.min_bytes)."""
    return 2 * (2 * batch * HEADS * HEAD_DIM + 2 * batch * KV_HEADS * kv_len * HEAD_DIM)


def eager_us():
    properties = torch.cuda.get_device_properties(0)
    l2_bytes = getattr(properties, "L2_cache_size", 50 << 20)
    flush = torch.empty(max(2 * l2_bytes, 256 << 20) // 4, dtype=torch.int32, device="cuda")
    times = {}
    for batch, kv_len in SHAPES:
        q = torch.randn(batch, HEADS, 1, HEAD_DIM, dtype=BF16, device="cuda")
        k = torch.randn(batch, KV_HEADS, kv_len, HEAD_DIM, dtype=BF16, device="cuda")
        v = torch.randn(batch, KV_HEADS, kv_len, HEAD_DIM, dtype=BF16, device="cuda")
        with torch.no_grad():
            reps = bench(lambda: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), flush)
        times[f"b{batch} kv{kv_len}"] = 1e3 * statistics.median(reps)
        del q, k, v
    return times


def main():
    log, out = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])
    text = log.read_text(errors="replace") if log.exists() else ""
    copy = re.search(r"copy bandwidth (\d+) GB/s", text)
    copy_bps = float(copy.group(1)) * 1e9 if copy else 0.0
    points = {}
    for line in text.splitlines():
        match = ROW.match(line)
        if match:
            points.setdefault(match.group(1), []).append(
                {"point": match.group(2).strip(), "us": float(match.group(3))})
    eager = eager_us()
    lines = [f"# Decode attention sweep (bf16, H32 / Hkv 8, D 128, one query), "
             f"{torch.cuda.get_device_name(0)}, copy bandwidth {copy_bps / 1e9:.0f} GB/s", "",
             "| shape | best point | us | GB/s | % of copy | eager us | eager % of copy | "
             "vs eager |", "|---|---|---|---|---|---|---|---|"]
    summary = {"copy_bandwidth_bytes_per_s": copy_bps, "shapes": {}}
    for batch, kv_len in SHAPES:
        shape = f"b{batch} kv{kv_len}"
        rows = sorted(points.get(shape, []), key=lambda row: row["us"])
        nbytes = min_bytes(batch, kv_len)
        share = (lambda us: 100 * nbytes / (us * 1e-6) / copy_bps if copy_bps and us else 0.0)
        summary["shapes"][shape] = {"min_bytes": nbytes, "eager_us": eager[shape], "points": rows}
        if not rows:
            lines.append(f"| {shape} | (no judged point in the log) | | | | {eager[shape]:.2f} | "
                         f"{share(eager[shape]):.1f}% | |")
            continue
        best = rows[0]
        lines.append(f"| {shape} | {best['point']} | {best['us']:.2f} | "
                     f"{nbytes / (best['us'] * 1e-6) / 1e9:.0f} | {share(best['us']):.1f}% | "
                     f"{eager[shape]:.2f} | {share(eager[shape]):.1f}% | "
                     f"{eager[shape] / best['us']:.2f}x |")
    lines += ["", "Every judged point, fastest first:", ""]
    for shape, data in summary["shapes"].items():
        for row in data["points"]:
            us = row["us"]
            lines.append(f"- {shape}: {us:8.2f} us, "
                         f"{100 * data['min_bytes'] / (us * 1e-6) / copy_bps if copy_bps else 0:5.1f}% "
                         f"of copy: {row['point']}")
    (out / "decode_sweep.md").write_text("\n".join(lines) + "\n")
    (out / "decode_sweep.json").write_text(json.dumps(summary, indent=1))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
