"""The end check: is an optimized module's output as right as the original module's?

Eager is not the truth. A correct plan computes in another order (fused reductions, float32
accumulators rounded once) and so differs from eager by a few ulps at some elements; in bfloat16
that alone can exceed the judge's tolerance *relative to eager* (a decoder layer: 2 of 2,097,152
outputs 2 ulps off eager). So both the optimized output and eager's are measured against a run
of the module in higher precision, and the optimized one is accepted when it is as accurate as
the dtype's tolerance asks, or nearly as accurate as eager itself.

The reference (reference_outputs): a deep copy of the module and the inputs in float64 on the
inputs' device; when that cannot run (an op without a float64 kernel on the device, not enough
memory), in float32, and the check says so; when neither runs, eager's own outputs, and the check
is the judge's comparison against eager (reference "eager").

The rule (compare), per floating output of dtype tolerance t (TOLERANCES: atol = rtol = t), with
r the reference, g the optimized output and e eager's:
  element i passes when |g_i - r_i| <= t (1 + |r_i|) + min(EAGER_MULTIPLE |e_i - r_i|,
                                                           WIDENING_CAP t (1 + |r_i|)),
  and the output passes when also ||g - r|| / ||r|| <= t + min(EAGER_MULTIPLE ||e - r|| / ||r||,
                                                               WIDENING_CAP t)
(norms over the elements finite in both, skipped when ||r|| = 0). A NaN or infinity passes only
where the reference, or eager, has the same one (an overflow that eager also has is as right as
eager). Integers and booleans must equal eager's exactly. With eager as the reference the
widening is zero: the judge's rule.

Why those numbers. EAGER_MULTIPLE = 2: two correct computations in the same precision that differ
only in summation order and rounding points have errors of the same size and distribution; the
optimized one may be twice as unlucky as eager at an element, or over the whole output, and
still be a correct computation (the judge widens its bounds by the same factor). WIDENING_CAP = 8:
the widening follows eager's error only up to 8 tolerances, so all bounds stay under 9 t (0.09
in bfloat16, 9e-4 in float32). Without a cap, a module whose eager is far off the float64 result
would admit anything: 0 has a relative norm error of 1 and alpha * x of |1 - alpha|, both far
over 9 t for any alpha outside [0.91, 1.09] in bfloat16, whatever eager's error is.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import math
import pathlib
from typing import Sequence

import torch
from torch.utils import _pytree as pytree

# The judge's tolerances by dtype (DESIGN.md "The judge"), one value for atol, rtol and the bound
# on the relative norm error; other floating dtypes (float8) get OTHER_FLOAT_TOLERANCE.
TOLERANCES = {torch.float64: 1e-7, torch.float32: 1e-4, torch.float16: 1e-2,
              torch.bfloat16: 1e-2}
OTHER_FLOAT_TOLERANCE = 1e-1
EAGER_MULTIPLE = 2.0
WIDENING_CAP = 8.0
# Outputs are compared a chunk at a time: float64 copies of outputs of many GB do not fit.
CHUNK_ELEMENTS = 1 << 24


def tolerance_for(dtype: torch.dtype) -> float | None:
    """The judge's tolerance for `dtype`; None for dtypes compared exactly (integers, bool)."""
    if dtype in TOLERANCES:
        return TOLERANCES[dtype]
    return OTHER_FLOAT_TOLERANCE if dtype.is_floating_point else None


def tensors(result) -> list[torch.Tensor]:
    """The tensors of a module's result (any nesting of tuples, lists and dicts), in order."""
    return [leaf for leaf in pytree.tree_leaves(result) if isinstance(leaf, torch.Tensor)]


@dataclasses.dataclass
class Reference:
    """The reference outputs and how they were computed."""

    outputs: list[torch.Tensor] | None  # None: eager is the reference
    precision: str  # "float64", "float32" or "eager"
    note: str = ""  # why not float64, when it is not


def _in_precision(value, dtype: torch.dtype):
    if isinstance(value, torch.Tensor) and value.is_floating_point():
        return value.detach().to(dtype)
    return value


def reference_outputs(module: torch.nn.Module, inputs: Sequence) -> Reference:
    """Runs a deep copy of `module` on `inputs` in float64, else float32 (see the file comment).
    The module itself is not touched. Runs under torch.no_grad."""
    notes = []
    for dtype in (torch.float64, torch.float32):
        try:
            with torch.no_grad():
                copied = copy.deepcopy(module).to(dtype)
                converted = pytree.tree_map(lambda v: _in_precision(v, dtype), tuple(inputs))
                outputs = [t.detach() for t in tensors(copied(*converted))]
            del copied, converted
            return Reference(outputs, str(dtype).removeprefix("torch."), "; ".join(notes))
        except (RuntimeError, NotImplementedError, TypeError) as error:  # OOM is a RuntimeError
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            notes.append(f"{str(dtype).removeprefix('torch.')} run failed: {first_line[:200]}")
            if torch.cuda.is_available():
                torch.cuda.empty_cache()
    return Reference(None, "eager", "; ".join(notes))


@dataclasses.dataclass
class Error:
    """One output's error against the reference."""

    max_abs: float = 0.0  # over elements finite in both
    rel_norm: float = 0.0  # ||x - r|| / ||r|| over elements finite in both; 0 when ||r|| = 0
    worst_index: list[int] = dataclasses.field(default_factory=list)  # largest error in tolerances
    worst_value: float = 0.0
    worst_reference: float = 0.0

    def describe(self) -> str:
        where = (f", worst at {self.worst_index}: {self.worst_value:.6g} vs "
                 f"{self.worst_reference:.6g}")
        return (f"max abs {self.max_abs:.3g}, rel norm {self.rel_norm:.3g}"
                + (where if self.worst_index else ""))


@dataclasses.dataclass
class OutputCheck:
    index: int
    dtype: str
    shape: list[int]
    passed: bool = True
    optimized: Error = dataclasses.field(default_factory=Error)
    eager: Error | None = None  # None when eager is the reference
    mismatches: int = 0  # elements over their bound
    rel_norm_bound: float = 0.0
    failure: str = ""


@dataclasses.dataclass
class EndCheck:
    reference: str  # "float64", "float32" or "eager"
    note: str
    outputs: list[OutputCheck]
    result_failure: str = ""  # a failure of the whole result (output count)

    @property
    def passed(self) -> bool:
        return not self.result_failure and all(o.passed for o in self.outputs)

    @property
    def failure(self) -> str:
        """Every failure, "; "-separated; empty when the check passed."""
        parts = [self.result_failure] if self.result_failure else []
        parts += [f"output {o.index}: {o.failure}" for o in self.outputs if not o.passed]
        return "; ".join(parts)

    def summary(self) -> list[str]:
        """Human-readable lines: the verdict, then per output the errors of both."""
        head = (f"end check against {self.reference}"
                + (f" ({self.note})" if self.note else "")
                + (": passed" if self.passed else f": FAILED: {self.failure}"))
        lines = [head]
        for o in self.outputs:
            if o.eager is None and not o.optimized.worst_index and o.passed:
                continue  # exact dtypes that match
            line = f"  output {o.index} {o.dtype}{o.shape}: optimized {o.optimized.describe()}"
            if o.eager is not None:
                line += f"; eager {o.eager.describe()}"
            lines.append(line + f"; rel norm bound {o.rel_norm_bound:.3g}")
        return lines

    def to_json(self) -> dict:
        """As JSON data; non-finite floats spelled "NaN", "Infinity", "-Infinity" (as torch.export
        does), so that the file stays valid JSON."""
        return _json_safe({"passed": self.passed, "reference": self.reference, "note": self.note,
                "rule": {"tolerances": {str(k).removeprefix("torch."): v
                                        for k, v in TOLERANCES.items()},
                         "eager_multiple": EAGER_MULTIPLE, "widening_cap_tolerances": WIDENING_CAP},
                "failure": self.failure,
                "outputs": [dataclasses.asdict(o) for o in self.outputs]})

    def markdown(self) -> str:
        """A short report section (the bundle's report.md)."""
        rows = ["| output | dtype | optimized max abs | optimized rel norm | eager max abs | "
                "eager rel norm | rel norm bound | verdict |", "|---|---|---|---|---|---|---|---|"]
        for o in self.outputs:
            eager = o.eager or Error()
            rows.append(f"| {o.index} | {o.dtype}{o.shape} | {o.optimized.max_abs:.3g} | "
                        f"{o.optimized.rel_norm:.3g} | {eager.max_abs:.3g} | {eager.rel_norm:.3g} "
                        f"| {o.rel_norm_bound:.3g} | {'ok' if o.passed else 'FAILED'} |")
        verdict = "passed" if self.passed else f"FAILED: {self.failure}"
        note = f" ({self.note})" if self.note else ""
        return (f"\n## End check\n\nThe optimized module and eager against a {self.reference} run "
                f"of the module{note}, on the example inputs: {verdict}. Data: end_check.json.\n\n"
                + "\n".join(rows) + "\n")


def _json_safe(data):
    if isinstance(data, float) and not math.isfinite(data):
        return "NaN" if math.isnan(data) else ("Infinity" if data > 0 else "-Infinity")
    if isinstance(data, dict):
        return {key: _json_safe(value) for key, value in data.items()}
    if isinstance(data, list):
        return [_json_safe(value) for value in data]
    return data


def _unravel(flat_index: int, shape: Sequence[int]) -> list[int]:
    return [int(i) for i in torch.unravel_index(torch.tensor(flat_index), tuple(shape))]


class _ErrorSums:
    """Accumulates one output's Error over chunks."""

    def __init__(self):
        self.error_sq = self.reference_sq = self.max_abs = 0.0
        self.worst_units, self.worst_flat = -1.0, -1

    def add(self, begin: int, values: torch.Tensor, reference: torch.Tensor,
            tolerance_bound: torch.Tensor) -> None:
        error = (values - reference).abs()
        finite = values.isfinite() & reference.isfinite()
        if bool(finite.any()):
            self.max_abs = max(self.max_abs, float(error[finite].max()))
        self.error_sq += float(error[finite].square().sum())
        self.reference_sq += float(reference[finite].square().sum())
        same_special = (values.isnan() & reference.isnan()) | (
            values.isinf() & (values == reference))
        units = torch.where(same_special, 0.0, (error / tolerance_bound).nan_to_num(math.inf))
        worst = int(units.argmax()) if units.numel() else -1
        if worst >= 0 and float(units[worst]) > self.worst_units:
            self.worst_units, self.worst_flat = float(units[worst]), begin + worst

    def rel_norm(self) -> float:
        return math.sqrt(self.error_sq / self.reference_sq) if self.reference_sq > 0 else 0.0

    def error(self, values: torch.Tensor, reference: torch.Tensor) -> Error:
        if self.worst_flat < 0:
            return Error(self.max_abs, self.rel_norm())
        return Error(self.max_abs, self.rel_norm(), _unravel(self.worst_flat, values.shape),
                     float(values.reshape(-1)[self.worst_flat]),
                     float(reference.reshape(-1)[self.worst_flat]))


def _check_output(index: int, optimized: torch.Tensor, eager: torch.Tensor,
                  reference: torch.Tensor | None) -> OutputCheck:
    check = OutputCheck(index, str(eager.dtype).removeprefix("torch."), list(eager.shape))
    if optimized.shape != eager.shape or optimized.dtype != eager.dtype:
        check.passed = False
        check.failure = (f"{optimized.dtype}{list(optimized.shape)} where the original gives "
                         f"{eager.dtype}{list(eager.shape)}")
        return check
    tolerance = tolerance_for(eager.dtype)
    if tolerance is None:
        differ = int((optimized.detach().to(eager.device) != eager).sum())
        if differ:
            check.passed, check.mismatches = False, differ
            check.failure = f"{differ} elements differ from eager's"
        return check
    truth = eager if reference is None else reference
    flat = [t.detach().reshape(-1) for t in (optimized, eager, truth)]
    device = truth.device
    sums_optimized, sums_eager = _ErrorSums(), _ErrorSums()
    first_mismatch = -1
    for begin in range(0, flat[0].numel(), CHUNK_ELEMENTS):
        chunk = slice(begin, begin + CHUNK_ELEMENTS)
        got, own, want = (t[chunk].to(device, torch.float64) for t in flat)
        tolerance_bound = tolerance * (1 + want.abs())
        bound = tolerance_bound
        if reference is not None:
            eager_error = (own - want).abs().nan_to_num(math.inf)
            bound = tolerance_bound + torch.minimum(EAGER_MULTIPLE * eager_error,
                                                    WIDENING_CAP * tolerance_bound)
            sums_eager.add(begin, own, want, tolerance_bound)
        sums_optimized.add(begin, got, want, tolerance_bound)
        same_as_reference = (got.isnan() & want.isnan()) | (got.isinf() & (got == want))
        same_as_eager = (got.isnan() & own.isnan()) | (got.isinf() & (got == own))
        failed = ~(same_as_reference | same_as_eager | ((got - want).abs() <= bound))
        count = int(failed.sum())
        if count and first_mismatch < 0:
            first_mismatch = begin + int(failed.nonzero()[0, 0])
        check.mismatches += count
    check.optimized = sums_optimized.error(optimized, truth)
    check.rel_norm_bound = tolerance
    if reference is not None:
        check.eager = sums_eager.error(eager, truth)
        check.rel_norm_bound += min(EAGER_MULTIPLE * check.eager.rel_norm, WIDENING_CAP * tolerance)
    name = "eager" if reference is None else "the reference"
    if check.mismatches:
        at = _unravel(first_mismatch, optimized.shape)
        check.passed = False
        check.failure = (f"{check.mismatches} of {optimized.numel()} elements outside the "
                         f"tolerance, first at {at}: {float(flat[0][first_mismatch]):.6g} vs "
                         f"{float(flat[2][first_mismatch]):.6g} ({name})")
    elif check.optimized.rel_norm > check.rel_norm_bound:
        check.passed = False
        check.failure = (f"relative norm error {check.optimized.rel_norm:.3g} against {name} over "
                         f"the bound {check.rel_norm_bound:.3g}")
    return check


def compare(optimized, eager, reference: Reference) -> EndCheck:
    """The optimized module's result against eager's and the reference (see the file comment).
    `optimized` and `eager`: results of the two modules on the same inputs (any nesting)."""
    got, want = tensors(optimized), tensors(eager)
    truth = reference.outputs
    if len(got) != len(want) or (truth is not None and len(truth) != len(want)):
        counts = f"{len(got)} tensors, the original {len(want)}"
        if truth is not None and len(truth) != len(want):
            counts += f", its {reference.precision} copy {len(truth)}"
        return EndCheck(reference.precision, reference.note, [],
                        result_failure=f"the optimized module returns {counts}")
    precision, note = reference.precision, reference.note
    if truth is not None and any(t.shape != w.shape for t, w in zip(truth, want)):
        truth, precision = None, "eager"
        note = f"the {reference.precision} copy's outputs have other shapes than eager's"
    outputs = [_check_output(i, g, w, None if truth is None else truth[i])
               for i, (g, w) in enumerate(zip(got, want))]
    return EndCheck(precision, note, outputs)


def write_to_bundle(check: EndCheck, bundle: str | pathlib.Path) -> None:
    """Writes end_check.json into the bundle and adds the check to its report: an "end_check"
    member in report.json and an "End check" section at the end of report.md (both written by
    `forge results` before the check runs; absent files are left absent)."""
    bundle = pathlib.Path(bundle)
    data = check.to_json()
    (bundle / "end_check.json").write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
    report_json = bundle / "report.json"
    if report_json.is_file():
        report = json.loads(report_json.read_text())
        report["end_check"] = data
        report_json.write_text(json.dumps(report, indent=2) + "\n")
    report_md = bundle / "report.md"
    if report_md.is_file():
        text = report_md.read_text()
        section = text.find("\n## End check\n")
        report_md.write_text((text if section < 0 else text[:section]) + check.markdown())
