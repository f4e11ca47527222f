"""Error of the scan family's float32 cumsum against a float64 prefix sum, for the judge's
tolerances: the kernels' order of float32 additions emulated exactly in numpy.

row_scan (scan.h): per tile of threads x items elements, each thread adds its items in order,
the warp scans the threads' totals by Hillis-Steele steps (lane l adds lane l - d for d = 1, 2,
..., 16), the row's warps' totals are scanned the same way, the carry of the earlier tiles is a
Kahan-compensated float32 sum. col_scan: one Kahan-compensated running sum per column.

    python compiler/codegen/tools/scan_accuracy.py [LENGTH]

prints, per input draw, the largest error and the judge's bound at that element (float32: atol
1e-4 scaled by the reference's RMS when above 1, rtol 1e-4), and the ratio of the two.
"""
import sys

import numpy as np

F = np.float32


def warp_scan(values):
    """Inclusive Hillis-Steele scan along the last axis (32 lanes), float32."""
    values = values.copy()
    delta = 1
    while delta < values.shape[-1]:
        shifted = values.copy()
        shifted[..., delta:] = values[..., :-delta] + values[..., delta:]
        values = shifted
        delta *= 2
    return values


def kahan_add(state, x):
    total, compensation = state
    y = F(x - compensation)
    t = F(total + y)
    return t, F(F(t - total) - y)


def row_scan(row, threads=256, items=16):
    tile = threads * items
    out = np.empty_like(row)
    carry = (F(0), F(0))
    for start in range(0, row.size, tile):
        x = np.zeros(tile, F)
        part = row[start:start + tile]
        x[:part.size] = part
        local = np.cumsum(x.reshape(threads, items), axis=1, dtype=F)  # sequential in float32
        totals = local[:, -1].reshape(threads // 32, 32)
        inclusive = warp_scan(totals)  # per warp
        warp_totals = inclusive[:, -1]
        warp_inclusive = warp_scan(warp_totals[None, :])[0] if threads > 32 else warp_totals
        up = np.zeros_like(inclusive)
        up[:, 1:] = inclusive[:, :-1]
        before = up.copy()
        for w in range(1, threads // 32):
            before[w, 0] = warp_inclusive[w - 1]
            before[w, 1:] = F(warp_inclusive[w - 1]) + up[w, 1:]
        before = before.reshape(threads)
        prefix = F(carry[0]) + before  # identity + x is exact for the first tile
        y = (prefix[:, None] + local).reshape(tile)
        out[start:start + tile] = y[:part.size]
        carry = kahan_add(carry, warp_inclusive[-1])
    return out


def col_scan(column):
    out = np.empty_like(column)
    state = (F(0), F(0))
    for i, x in enumerate(column):
        state = kahan_add(state, x)
        out[i] = state[0]
    return out


def report(name, got, reference):
    rms = float(np.sqrt(np.mean(reference ** 2)))
    bound = 1e-4 * max(1.0, rms) + 1e-4 * np.abs(reference)
    error = np.abs(got.astype(np.float64) - reference)
    worst = int(np.argmax(error / bound))
    norm = float(np.linalg.norm(error) / np.linalg.norm(reference))
    print(f"{name}: max error {error.max():.3g}, at the worst element {error[worst]:.3g} of bound "
          f"{bound[worst]:.3g} ({error[worst] / bound[worst]:.3f} of it); relative norm {norm:.2g}")


def main():
    length = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 20
    rng = np.random.default_rng(0)
    normal = rng.standard_normal(length).astype(F)
    pairs = np.empty(length, F)  # the judge's cancellation draw: pairs 8u and -8u + v
    pairs[0::2] = 8 * rng.standard_normal(length // 2)
    pairs[1::2] = -pairs[0::2] + rng.standard_normal(length // 2)
    for draw, x in (("normal(0, 1)", normal), ("cancellation", pairs)):
        reference = np.cumsum(x.astype(np.float64))
        report(f"row_scan {draw} {length}", row_scan(x), reference)
        report(f"col_scan {draw} {length}", col_scan(x), reference)
        naive = np.cumsum(x, dtype=F)
        report(f"sequential float32 (no compensation) {draw} {length}", naive, reference)


if __name__ == "__main__":
    main()
