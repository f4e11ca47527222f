"""The timer's protocol (DESIGN.md "The timer", worker/timer/timer.h) for Python callables, and the
judge's output comparison (worker/judge/compare.h) for their results.

Timing, on CUDA: warm-up calls first; then each rep writes a buffer of at least twice the L2,
waits for it, and times one call between two CUDA events. The wait keeps the host's launch work
inside the timed interval (launch-bound calls such as eager decode pay it in real use; the C++
timer lets the host run ahead during the flush instead). The median of at least 20 reps is the
result, with min, max and interquartile range; short calls get more reps. On a CPU (only for
exercising the harness without a GPU) reps are wall-clock times and nothing is flushed.

Comparison: an element passes when |candidate - reference| <= atol + rtol * |reference|, an
output when also ||candidate - reference|| / ||reference|| <= rel_norm (float32 1e-4 for all
three, bfloat16/float16 1e-2). With a float64 reference, both bounds are widened by twice eager's
own error against it, as the judge does: a result as accurate as eager always passes. Without one,
eager itself is the reference.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Callable, Sequence

import torch

MIN_REPS = 20
MAX_REPS = 200
WARMUP_CALLS = 5
# Short calls get more reps: enough that the reps together run at least this long.
TARGET_TIMED_MS = 100.0
MIN_FLUSH_BYTES = 128 << 20


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th quantile (0 <= q <= 1), interpolating linearly between the nearest ranks."""
    if not values:
        return 0.0
    ordered = sorted(values)
    position = q * (len(ordered) - 1)
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


@dataclasses.dataclass
class Timing:
    reps_ms: list[float]
    median_ms: float
    min_ms: float
    max_ms: float
    p25_ms: float
    p75_ms: float
    spread: float  # interquartile range over the median

    @staticmethod
    def of(reps_ms: Sequence[float]) -> "Timing":
        median = percentile(reps_ms, 0.5)
        p25, p75 = percentile(reps_ms, 0.25), percentile(reps_ms, 0.75)
        return Timing(list(reps_ms), median, min(reps_ms), max(reps_ms), p25, p75,
                      (p75 - p25) / median if median > 0 else 0.0)

    def to_json(self) -> dict:
        return dataclasses.asdict(self) | {"reps": len(self.reps_ms)}


def reps_for(estimate_ms: float) -> int:
    if estimate_ms <= 0:
        return MAX_REPS
    return max(MIN_REPS, min(MAX_REPS, math.ceil(TARGET_TIMED_MS / estimate_ms)))


class CudaTimer:
    def __init__(self, device: torch.device | str = "cuda"):
        self.device = torch.device(device)
        l2_bytes = torch.cuda.get_device_properties(self.device).L2_cache_size
        self.l2_bytes = l2_bytes
        self.flush_buffer = torch.empty(max(2 * l2_bytes, MIN_FLUSH_BYTES) // 4,
                                        dtype=torch.int32, device=self.device)

    @property
    def flush_bytes(self) -> int:
        return self.flush_buffer.numel() * 4

    def _rep(self, fn: Callable[[], object]) -> tuple[torch.cuda.Event, torch.cuda.Event]:
        self.flush_buffer.fill_(0x5A5A5A5A)
        torch.cuda.synchronize(self.device)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        return start, end

    def time(self, fn: Callable[[], object], reps: int | None = None) -> Timing:
        warmup = [self._rep(fn) for _ in range(WARMUP_CALLS)]
        torch.cuda.synchronize(self.device)
        estimate = percentile([s.elapsed_time(e) for s, e in warmup[1:]], 0.5)
        events = [self._rep(fn) for _ in range(reps or reps_for(estimate))]
        torch.cuda.synchronize(self.device)
        return Timing.of([start.elapsed_time(end) for start, end in events])

    def synchronize(self) -> None:
        torch.cuda.synchronize(self.device)

    def describe(self) -> dict:
        return {"kind": "cuda events", "l2_bytes": self.l2_bytes, "flush_bytes": self.flush_bytes,
                "warmup_calls": WARMUP_CALLS, "min_reps": MIN_REPS, "max_reps": MAX_REPS,
                "target_timed_ms": TARGET_TIMED_MS}

    def copy_bandwidth(self, size_bytes: int = 2 << 30) -> float:
        """Device-to-device copy bandwidth (bytes read plus written per second), same protocol."""
        source = torch.empty(size_bytes // 4, dtype=torch.int32, device=self.device).fill_(1)
        target = torch.empty_like(source)
        timing = self.time(lambda: target.copy_(source), reps=MIN_REPS)
        return 2 * size_bytes / (timing.median_ms / 1e3)


class CpuTimer:
    """Wall-clock reps on the host, no flush: for exercising the harness without a GPU."""

    def time(self, fn: Callable[[], object], reps: int | None = None) -> Timing:
        estimates = []
        for _ in range(WARMUP_CALLS):
            started = time.perf_counter()
            fn()
            estimates.append((time.perf_counter() - started) * 1e3)
        reps_ms = []
        for _ in range(reps or reps_for(percentile(estimates[1:], 0.5))):
            started = time.perf_counter()
            fn()
            reps_ms.append((time.perf_counter() - started) * 1e3)
        return Timing.of(reps_ms)

    def synchronize(self) -> None:
        pass

    def describe(self) -> dict:
        return {"kind": "host wall clock (no GPU)", "warmup_calls": WARMUP_CALLS,
                "min_reps": MIN_REPS, "max_reps": MAX_REPS, "target_timed_ms": TARGET_TIMED_MS}


def make_timer(device: torch.device | str) -> CudaTimer | CpuTimer:
    return CudaTimer(device) if torch.device(device).type == "cuda" else CpuTimer()


def timed_first_call(fn: Callable[[], object], timer) -> tuple[float, object]:
    """(seconds, result) of one synchronized call: for torch.compile, the compile time."""
    timer.synchronize()
    started = time.perf_counter()
    result = fn()
    timer.synchronize()
    return time.perf_counter() - started, result


# ---------------------------------------------------------------------------------------------
# Output comparison
# ---------------------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class Tolerance:
    atol: float
    rtol: float
    rel_norm: float


def tolerance_for(dtype: torch.dtype) -> Tolerance | None:
    """The judge's per-dtype tolerance; None for dtypes compared exactly (integers, bool)."""
    if dtype == torch.float64:
        return Tolerance(1e-7, 1e-7, 1e-7)
    if dtype == torch.float32:
        return Tolerance(1e-4, 1e-4, 1e-4)
    if dtype in (torch.float16, torch.bfloat16):
        return Tolerance(1e-2, 1e-2, 1e-2)
    if dtype.is_floating_point:
        return Tolerance(1e-1, 1e-1, 1e-1)  # float8
    return None


@dataclasses.dataclass
class OutputCheck:
    passed: bool
    elements: int = 0
    mismatches: int = 0
    max_abs_error: float = 0.0
    rel_norm_error: float = 0.0
    rel_norm_bound: float = 0.0
    failure: str = ""


@dataclasses.dataclass
class Check:
    passed: bool
    reference: str  # "float64" or "eager"
    outputs: list[OutputCheck]

    @property
    def failure(self) -> str:
        return "; ".join(f"output {i}: {o.failure}" for i, o in enumerate(self.outputs)
                         if not o.passed)

    def to_json(self) -> dict:
        return {"passed": self.passed, "reference": self.reference, "failure": self.failure,
                "outputs": [dataclasses.asdict(o) for o in self.outputs]}


def as_tensors(result) -> list[torch.Tensor]:
    if isinstance(result, torch.Tensor):
        return [result]
    return [tensor for item in result for tensor in as_tensors(item)]


CHUNK_ELEMENTS = 1 << 24  # compared a chunk at a time: float64 copies of outputs of many GB


def _index(flat_index: int, shape: Sequence[int]) -> list[int]:
    index = []
    for size in reversed(shape):
        index.append(flat_index % size if size else 0)
        flat_index //= max(size, 1)
    return index[::-1]


def compare_output(candidate: torch.Tensor, eager: torch.Tensor,
                   reference: torch.Tensor | None = None) -> OutputCheck:
    """One output against the float64 `reference` (bounds widened by eager's error against it),
    or against `eager` when there is no reference."""
    if candidate.shape != eager.shape or candidate.dtype != eager.dtype:
        return OutputCheck(False, failure=f"{tuple(candidate.shape)} {candidate.dtype} where eager "
                                          f"gives {tuple(eager.shape)} {eager.dtype}")
    tolerance = tolerance_for(eager.dtype)
    if tolerance is None:
        mismatches = int((candidate != eager).sum())
        return OutputCheck(mismatches == 0, candidate.numel(), mismatches,
                           failure=f"{mismatches} elements differ from eager" if mismatches else "")
    truth = eager if reference is None else reference
    candidate_flat, eager_flat = candidate.reshape(-1), eager.reshape(-1)
    truth_flat = truth.reshape(-1)
    mismatches, max_abs, first_failure = 0, 0.0, None
    error_sq = truth_sq = eager_error_sq = 0.0
    for begin in range(0, candidate_flat.numel(), CHUNK_ELEMENTS):
        chunk = slice(begin, begin + CHUNK_ELEMENTS)
        got, want = candidate_flat[chunk].double(), truth_flat[chunk].double()
        error = (got - want).abs()
        bound = tolerance.atol + tolerance.rtol * want.abs()
        if reference is not None:
            eager_error = (eager_flat[chunk].double() - want).abs()
            bound = bound + 2 * torch.where(eager_error.isfinite(), eager_error, 0)
            finite_eager = eager_error.isfinite() & want.isfinite()
            eager_error_sq += float(eager_error[finite_eager].square().sum())
        # NaN matches NaN; an infinity matches the same infinity; anything else within the bound.
        same_special = (got.isnan() & want.isnan()) | (got.isinf() & (got == want))
        failed = ~(same_special | (error <= bound))
        count = int(failed.sum())
        if count and first_failure is None:
            first_failure = begin + int(failed.nonzero()[0, 0])
        mismatches += count
        finite = got.isfinite() & want.isfinite()
        if bool(finite.any()):
            max_abs = max(max_abs, float(error[finite].max()))
        error_sq += float(error[finite].square().sum())
        truth_sq += float(want[finite].square().sum())
    rel_norm = math.sqrt(error_sq / truth_sq) if truth_sq > 0 else 0.0
    norm_bound = tolerance.rel_norm
    if reference is not None and truth_sq > 0:
        norm_bound = max(norm_bound, 2 * math.sqrt(eager_error_sq / truth_sq))
    check = OutputCheck(True, candidate.numel(), mismatches, max_abs, rel_norm, norm_bound)
    if mismatches:
        index = _index(first_failure, candidate.shape)
        check.passed = False
        check.failure = (f"{mismatches} of {candidate.numel()} elements outside the tolerance, "
                         f"first at {index}: {float(candidate_flat[first_failure])} vs "
                         f"{float(truth_flat[first_failure])}")
    elif rel_norm > norm_bound:
        check.passed = False
        check.failure = f"relative norm error {rel_norm:.3g} over the bound {norm_bound:.3g}"
    return check


def relative_norm_error(values: torch.Tensor, reference: torch.Tensor) -> float:
    """||values - reference|| / ||reference|| over elements finite in both (0 for a zero norm)."""
    error_sq = reference_sq = 0.0
    values_flat, reference_flat = values.reshape(-1), reference.reshape(-1)
    for begin in range(0, values_flat.numel(), CHUNK_ELEMENTS):
        got = values_flat[begin:begin + CHUNK_ELEMENTS].double()
        want = reference_flat[begin:begin + CHUNK_ELEMENTS].double()
        finite = got.isfinite() & want.isfinite()
        error_sq += float((got - want)[finite].square().sum())
        reference_sq += float(want[finite].square().sum())
    return math.sqrt(error_sq / reference_sq) if reference_sq > 0 else 0.0


def check_outputs(candidate, eager, reference=None) -> Check:
    """Every output of a call against eager's (and the float64 reference's, when given)."""
    got, want = as_tensors(candidate), as_tensors(eager)
    truth = as_tensors(reference) if reference is not None else [None] * len(want)
    name = "eager" if reference is None else "float64"
    if len(got) != len(want):
        return Check(False, name, [OutputCheck(False, failure=f"{len(got)} outputs where eager "
                                                             f"gives {len(want)}")])
    outputs = [compare_output(g, w, t) for g, w, t in zip(got, want, truth)]
    return Check(all(o.passed for o in outputs), name, outputs)
