"""forge.end_check on the CPU: a correct bfloat16 result that eager's own rounding puts 2 ulps
away at a few elements passes; wrong results (zeros, scaled, shifted, transposed, NaN, one wrong
row) fail, also where eager's own error is large."""

import copy
import json

import pytest
import torch
from torch import nn

from forge import end_check
from forge.optimize import OutputMismatchError, check_outputs

EAGER = end_check.Reference(None, "eager")


class Block(nn.Module):
    """A pre-norm MLP block with a residual, as in a decoder layer."""

    def __init__(self, width=128, hidden=256):
        super().__init__()
        self.norm = nn.RMSNorm(width)
        self.up = nn.Linear(width, hidden, bias=False)
        self.down = nn.Linear(hidden, width, bias=False)

    def forward(self, x):
        return x + self.down(nn.functional.silu(self.up(self.norm(x))))


@pytest.fixture(scope="module")
def decoder():
    """Eight blocks in bfloat16 on a (128, 128) input: eager rounds after every op; the
    "optimized" result is the same module computed in float32 and rounded once at the end, as a
    fused plan with float32 accumulators does."""
    torch.manual_seed(0)
    module = nn.Sequential(*[Block() for _ in range(8)]).eval().to(torch.bfloat16)
    x = torch.randn(128, 128).bfloat16()
    with torch.no_grad():
        eager = module(x)
        optimized = copy.deepcopy(module).float()(x.float()).bfloat16()
    return module, x, eager, optimized, end_check.reference_outputs(module, (x,))


def test_the_reference_is_a_float64_copy_and_the_module_is_untouched(decoder):
    module, x, eager, _, reference = decoder
    assert reference.precision == "float64" and reference.note == ""
    assert reference.outputs[0].dtype == torch.float64
    assert all(p.dtype == torch.bfloat16 for p in module.parameters())
    with torch.no_grad():
        assert torch.equal(module(x), eager)


def test_a_correct_bf16_result_that_differs_from_eager_by_two_ulps_passes(decoder):
    _, _, eager, optimized, reference = decoder
    # Eager's rounding puts some elements 2 bf16 ulps away from the optimized result: over the
    # judge's bound relative to eager (the old end check refused this)...
    against_eager = end_check.compare(optimized, eager, EAGER)
    assert not against_eager.passed
    assert 0 < against_eager.outputs[0].mismatches < 64, against_eager.summary()
    ulp = torch.finfo(torch.bfloat16).eps * optimized.double().abs()
    assert float(((optimized.double() - eager.double()).abs() / ulp).max()) >= 2
    with pytest.raises(OutputMismatchError, match="against eager: FAILED: output 0: .* elements "
                                                  "outside the tolerance"):
        check_outputs(optimized, eager)
    # ...while against float64 the optimized result is the more accurate of the two.
    check = end_check.compare(optimized, eager, reference)
    assert check.passed, check.summary()
    output = check.outputs[0]
    assert output.optimized.rel_norm < output.eager.rel_norm
    assert output.optimized.max_abs < output.eager.max_abs
    assert check_outputs(optimized, eager, reference).passed


def wrong_results(result):
    one_nan = result.clone()
    one_nan[5, 7] = float("nan")
    wrong_row = result.clone()
    wrong_row[3] = result[4]
    return {"zeros": torch.zeros_like(result), "constant": torch.full_like(result, 0.5),
            "half": (0.5 * result.float()).to(result.dtype),
            "shifted": result.roll(1, dims=-1), "transposed": result.t().contiguous(),
            "one NaN": one_nan, "one wrong row": wrong_row}


@pytest.mark.parametrize("name", list(wrong_results(torch.ones(8, 8))))
def test_wrong_results_fail(decoder, name):
    _, _, eager, optimized, reference = decoder
    wrong = wrong_results(optimized)[name]
    check = end_check.compare(wrong, eager, reference)
    assert not check.passed, f"{name}: {check.summary()}"
    assert not end_check.compare(wrong, eager, EAGER).passed


def cancelling_case(offset: float):
    """(x + offset) - offset in bfloat16: eager loses the low bits of x, the float64 run does
    not, so eager's own error grows with the offset (0.06 at 16, 1 at 256, for |x| ~ 1)."""

    class Cancel(nn.Module):
        def forward(self, x):
            return (x + offset) - offset

    torch.manual_seed(1)
    x = torch.randn(64, 64).bfloat16()
    module = Cancel()
    with torch.no_grad():
        eager = module(x)
    return x, eager, end_check.reference_outputs(module, (x,))


def test_a_result_as_accurate_as_eager_passes_by_the_bounded_widening():
    _, eager, reference = cancelling_case(16.0)
    truth = reference.outputs[0]
    # Eager is several tolerances off at some elements, yet as accurate as eager passes...
    tolerances = (eager.double() - truth).abs() / (1e-2 * (1 + truth.abs()))
    assert float(tolerances.max()) > 2
    assert end_check.compare(eager, eager, reference).passed
    # ...and so does a result with 1.5x eager's error on the other side; 3x does not.
    error = eager.double() - truth
    assert end_check.compare((truth - 1.5 * error).bfloat16(), eager, reference).passed
    assert not end_check.compare((truth - 3 * error).bfloat16(), eager, reference).passed


@pytest.mark.parametrize("offset", [16.0, 256.0, 4096.0])
def test_the_widening_is_bounded_where_eager_is_far_off(offset):
    x, eager, reference = cancelling_case(offset)
    for name, wrong in wrong_results(x).items():
        check = end_check.compare(wrong, eager, reference)
        assert not check.passed, f"offset {offset}, {name}: {check.summary()}"
    check = end_check.compare(x, eager, reference)  # the exact result passes
    assert check.passed and check.outputs[0].optimized.max_abs == 0
    bound = check.outputs[0].rel_norm_bound
    assert bound <= (1 + end_check.WIDENING_CAP) * 1e-2
    assert check.outputs[0].eager.rel_norm > (0.1 if offset >= 256 else 0.01)


def test_float32_is_the_fallback_when_float64_cannot_run():
    class NoDouble(nn.Module):
        def forward(self, x):
            if x.dtype == torch.float64:
                raise RuntimeError('"addmm" not implemented for \'Double\'')
            return x * 3

    x = torch.randn(8).bfloat16()
    reference = end_check.reference_outputs(NoDouble(), (x,))
    assert reference.precision == "float32"
    assert reference.note.startswith("float64 run failed: \"addmm\" not implemented")
    assert reference.outputs[0].dtype == torch.float32
    check = end_check.compare(x * 3, x * 3, reference)
    assert check.passed and check.reference == "float32"
    assert "end check against float32 (float64 run failed" in check.summary()[0]


def test_a_nan_result_is_reported_in_valid_json(decoder):
    _, _, eager, optimized, reference = decoder
    check = end_check.compare(wrong_results(optimized)["one NaN"], eager, reference)
    assert check.outputs[0].optimized.worst_index == [5, 7]
    data = json.loads(json.dumps(check.to_json(), allow_nan=False))
    assert data["outputs"][0]["optimized"]["worst_value"] == "NaN"
    assert "1 of 16384 elements outside the tolerance, first at [5, 7]: nan vs" in data["failure"]


def test_exact_dtypes_and_output_counts():
    index = torch.arange(6)
    reference = end_check.Reference([index, torch.ones(3, dtype=torch.float64)], "float64")
    ones = torch.ones(3)
    assert end_check.compare((index, ones), (index, ones), reference).passed
    check = end_check.compare((index + (index == 2), ones), (index, ones), reference)
    assert check.failure == "output 0: 1 elements differ from eager's"
    check = end_check.compare((index,), (index, ones), reference)
    assert "returns 1 tensors, the original 2" in check.failure


def test_the_check_goes_into_the_bundle(decoder, tmp_path):
    _, _, eager, optimized, reference = decoder
    (tmp_path / "report.json").write_text(json.dumps({"tasks": []}))
    (tmp_path / "report.md").write_text("# Report\n\n## Files\n")
    check = end_check.compare(optimized, eager, reference)
    for _ in range(2):  # writing again replaces the section
        end_check.write_to_bundle(check, tmp_path)
    data = json.loads((tmp_path / "end_check.json").read_text())
    assert data["passed"] and data["reference"] == "float64"
    output = data["outputs"][0]
    assert output["optimized"]["rel_norm"] == check.outputs[0].optimized.rel_norm
    assert output["eager"]["max_abs"] == check.outputs[0].eager.max_abs > 0
    assert json.loads((tmp_path / "report.json").read_text())["end_check"] == data
    markdown = (tmp_path / "report.md").read_text()
    assert markdown.count("## End check") == 1 and "against a float64 run" in markdown
    assert "| 0 | bfloat16[128, 128] |" in markdown
