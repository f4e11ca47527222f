#include "worker/judge/inputs.h"

#include <cmath>
#include <cstring>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/dtype/dtype.h"
#include "common/status/status_macros.h"
#include "compiler/ops/op_table.h"
#include "worker/judge/compare.h"

namespace forge::judge {
namespace {

using forge::v1::Argument;
using forge::v1::Node;
using forge::v1::TensorSpec;
using ops::FindArgument;


// The tensor value an argument names, or "" when it names none.
std::string TensorName(const Argument* argument) {
  if (argument == nullptr) return "";
  if (argument->has_tensor()) return argument->tensor();
  if (argument->has_optional_tensor() && argument->optional_tensor().has_value_name()) {
    return argument->optional_tensor().value_name();
  }
  return "";
}

class DomainInference {
 public:
  explicit DomainInference(const forge::v1::KernelTask& task)
      : task_(task), domains_(task.inputs_size()) {
    for (int i = 0; i < task.group().inputs_size() && i < task.inputs_size(); ++i) {
      input_index_[task.group().inputs(i).value_name()] = i;
      specs_[task.group().inputs(i).value_name()] = &task.inputs(i);
    }
    for (const forge::v1::Value& value : task.group().values()) {
      specs_.try_emplace(value.name(), &value.tensor());
    }
  }

  std::vector<InputDomain> Run() {
    for (const Node& node : task_.group().nodes()) Visit(node);
    return std::move(domains_);
  }

 private:
  // The op table says which of the node's inputs have a domain (ops::InputDomainRule).
  void Visit(const Node& node) {
    const ops::OpEntry* entry = ops::FindOp(node);
    if (entry == nullptr) return;
    const std::string& op = node.op();
    switch (entry->domain) {
      case ops::InputDomainRule::kAny: break;
      case ops::InputDomainRule::kClassTarget: {
        const TensorSpec* self = Spec(TensorName(FindArgument(node, "self")));
        if (self != nullptr && self->shape_size() > 0) {
          int64_t classes = self->shape(self->shape_size() >= 2 ? 1 : 0);
          SetRange(TensorName(FindArgument(node, "target")), classes,
                   absl::StrCat("target of ", op, ": classes"));
        }
        break;
      }
      case ops::InputDomainRule::kEmbeddingIndices: {
        const TensorSpec* weight = Spec(TensorName(FindArgument(node, "weight")));
        if (weight != nullptr && weight->shape_size() > 0) {
          SetRange(TensorName(FindArgument(node, "indices")), weight->shape(0),
                   absl::StrCat("indices of ", op, ": rows"));
        }
        break;
      }
      case ops::InputDomainRule::kDimIndex: {
        const TensorSpec* self = Spec(TensorName(FindArgument(node, "self")));
        const Argument* dim = FindArgument(node, "dim");
        if (self != nullptr && dim != nullptr && dim->has_int_value() && self->shape_size() > 0) {
          int64_t axis =
              dim->int_value() < 0 ? dim->int_value() + self->shape_size() : dim->int_value();
          if (axis >= 0 && axis < self->shape_size()) {
            SetRange(TensorName(FindArgument(node, "index")), self->shape(axis),
                     absl::StrCat("index of ", op, " along dim ", axis, ": positions"));
          }
        }
        break;
      }
      case ops::InputDomainRule::kIndexPositions: {
        const TensorSpec* self = Spec(TensorName(FindArgument(node, "self")));
        const Argument* indices = FindArgument(node, "indices");
        if (self != nullptr && indices != nullptr && indices->has_optional_tensors()) {
          const auto& items = indices->optional_tensors().items();
          for (int k = 0; k < items.size() && k < self->shape_size(); ++k) {
            if (items[k].has_value_name()) {
              SetRange(items[k].value_name(), self->shape(k),
                       absl::StrCat("index ", k, " of ", op, ": positions"));
            }
          }
        }
        break;
      }
      case ops::InputDomainRule::kPositiveRunningVar:
        SetPositive(TensorName(FindArgument(node, "running_var")),
                    absl::StrCat("running_var of ", op));
        break;
      case ops::InputDomainRule::kPositiveSelf:
        SetPositive(TensorName(FindArgument(node, "self")), absl::StrCat("operand of ", op));
        break;
    }
  }

  const TensorSpec* Spec(const std::string& name) const {
    auto it = specs_.find(name);
    return it == specs_.end() ? nullptr : it->second;
  }

  void SetRange(const std::string& name, int64_t size, const std::string& what) {
    auto it = input_index_.find(name);
    if (it == input_index_.end() || size <= 0) return;
    InputDomain& domain = domains_[it->second];
    domain.kind = InputDomain::Kind::kIntegerRange;
    domain.range = {0, size};
    domain.reason = absl::StrCat(what, " [0, ", size, ")");
  }

  void SetPositive(const std::string& name, const std::string& what) {
    auto it = input_index_.find(name);
    if (it == input_index_.end()) return;
    InputDomain& domain = domains_[it->second];
    if (domain.kind != InputDomain::Kind::kAny) return;
    domain.kind = InputDomain::Kind::kPositive;
    domain.reason = absl::StrCat(what, ": positive");
  }

  const forge::v1::KernelTask& task_;
  std::vector<InputDomain> domains_;
  absl::flat_hash_map<std::string, int> input_index_;
  absl::flat_hash_map<std::string, const TensorSpec*> specs_;
};

// Which adversarial distributions each task input may get: those every op reading it asks for as a
// data operand, looking through views (ChooseAdversarialDraws).
class AdversarialInference {
 public:
  AdversarialInference(const forge::v1::KernelTask& task, absl::Span<const InputDomain> domains)
      : task_(task), domains_(domains), asked_(task.inputs_size(), ~0u),
        reasons_(task.inputs_size()), read_(task.inputs_size(), false) {
    for (int i = 0; i < task.group().inputs_size() && i < task.inputs_size(); ++i) {
      input_of_[task.group().inputs(i).value_name()] = i;
    }
  }

  std::vector<AdversarialDraw> Run() {
    for (const Node& node : task_.group().nodes()) Visit(node);
    std::vector<AdversarialDraw> draws;
    for (unsigned bit = 1; bit <= ops::kIntegerEdges; bit <<= 1) {
      AdversarialDraw draw;
      draw.kind = static_cast<ops::AdversarialDraw>(bit);
      for (int i = 0; i < task_.inputs_size(); ++i) {
        if ((BitsOf(i) & bit) == 0) continue;
        draw.inputs.push_back(i);
        absl::StrAppend(&draw.reason, draw.reason.empty() ? "" : "; ", "input ", i, " (",
                        DescribeSpec(task_.inputs(i)), "): ",
                        reasons_[i],
                        bit == ops::kIntegerEdges ? absl::StrCat(", ", domains_[i].reason) : "");
      }
      if (!draw.inputs.empty()) draws.push_back(std::move(draw));
    }
    return draws;
  }

 private:
  static bool IsDataOperand(const std::string& name) {
    return name == "self" || name == "input" || name == "other";
  }

  void Visit(const Node& node) {
    const ops::OpEntry* entry = ops::FindOp(node);
    // A view passes its input on: what reads the view reads the input.
    if (entry != nullptr && entry->op_class == ops::OpClass::kView) {
      auto it = input_of_.find(TensorName(FindArgument(node, "self")));
      if (it != input_of_.end()) {
        // Copied first: inserting the outputs may rehash the map and invalidate `it` (a view
        // with many outputs, unbind or split, crashed the sandbox child on hardened Abseil).
        const int input = it->second;
        for (const std::string& output : node.outputs()) input_of_[output] = input;
        return;
      }
    }
    for (const Argument& argument : node.arguments()) {
      // Data operands may get the floating distributions, other arguments the integer edges.
      const unsigned bits = entry == nullptr                 ? 0u
                            : IsDataOperand(argument.name()) ? entry->adversarial & ~kEdges
                                                             : entry->adversarial & kEdges;
      Read(TensorName(&argument), bits, argument.name(), node.op());
      if (argument.has_optional_tensors()) {
        for (const auto& item : argument.optional_tensors().items()) {
          if (item.has_value_name()) Read(item.value_name(), bits, argument.name(), node.op());
        }
      }
    }
  }

  // Notes that `value` is read as argument `argument` of `op`, which asks for `bits`.
  void Read(const std::string& value, unsigned bits, const std::string& argument,
            const std::string& op) {
    auto it = input_of_.find(value);
    if (it == input_of_.end()) return;
    const int i = it->second;
    if (reasons_[i].empty() && bits != 0) reasons_[i] = absl::StrCat(argument, " of ", op);
    asked_[i] &= bits;
    read_[i] = true;
  }

  // The distributions input i gets.
  unsigned BitsOf(int i) const {
    if (!read_[i]) return 0;
    const InputDomain& domain = domains_[i];
    const bool floating = IsFloatingPoint(task_.inputs(i).dtype());
    if (domain.kind == InputDomain::Kind::kIntegerRange) return floating ? 0 : asked_[i] & kEdges;
    if (domain.kind != InputDomain::Kind::kAny || !floating) return 0;
    return asked_[i] & ~kEdges;
  }

  static constexpr unsigned kEdges = ops::kIntegerEdges;

  const forge::v1::KernelTask& task_;
  absl::Span<const InputDomain> domains_;
  std::vector<unsigned> asked_;
  std::vector<std::string> reasons_;
  std::vector<bool> read_;
  absl::flat_hash_map<std::string, int> input_of_;  // value name -> the task input it views
};

enum class Distribution { kNormal, kUniform, kScaledNormal };

Distribution DistributionOf(int draw) { return static_cast<Distribution>(draw % 3); }

uint64_t SeedOf(uint64_t seed, int draw, int input_index) {
  // splitmix64 over the three numbers: nearby arguments give unrelated streams.
  uint64_t state = seed ^ (static_cast<uint64_t>(draw) << 32) ^ static_cast<uint64_t>(input_index);
  state += 0x9E3779B97F4A7C15ull;
  state = (state ^ (state >> 30)) * 0xBF58476D1CE4E5B9ull;
  state = (state ^ (state >> 27)) * 0x94D049BB133111EBull;
  return state ^ (state >> 31);
}

// min(1000, the dtype's largest finite value / 64): logits large enough to overflow exp without
// the max subtracted, which the dtype still holds.
double LargeLogitScale(forge::v1::DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT8_E4M3FN: return 448.0 / 64;
    case forge::v1::DTYPE_FLOAT8_E5M2: return 57344.0 / 64;
    default: return 1000;  // float16's 65504 / 64 exceeds it
  }
}

}  // namespace

std::vector<AdversarialDraw> ChooseAdversarialDraws(const forge::v1::KernelTask& task,
                                                    absl::Span<const InputDomain> domains) {
  if (static_cast<int>(domains.size()) != task.inputs_size()) return {};
  return AdversarialInference(task, domains).Run();
}

std::string DescribeAdversarial(ops::AdversarialDraw kind) {
  switch (kind) {
    case ops::kLargeLogits: return "large logits: normal(0, 1000)";
    case ops::kLargeMean: return "large mean: normal(256, 1)";
    case ops::kTinyVariance: return "tiny variance: normal(0, 0.001)";
    case ops::kCancellation: return "cancellation: pairs 8u and -8u + v";
    case ops::kActivationKinks: return "activation kinks: at and near 0, +-1, +-3, 6";
    case ops::kZerosAndSubnormals: return "zeros and subnormals: +0, -0, subnormals, normal(0, 1)";
    case ops::kIntegerEdges: return "integer edges: the range's ends";
  }
  return "";
}

absl::StatusOr<DrawRule> AdversarialDrawRule(const TensorSpec& spec, const InputDomain& domain,
                                             ops::AdversarialDraw kind, int draw, int input_index,
                                             uint64_t seed) {
  const forge::v1::DType dtype = spec.dtype();
  if ((kind == ops::kIntegerEdges) != (domain.kind == InputDomain::Kind::kIntegerRange) ||
      (kind == ops::kIntegerEdges) == IsFloatingPoint(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("adversarial draw \"", DescribeAdversarial(kind),
                                                   "\" does not suit input ", input_index, " (",
                                                   DescribeSpec(spec), ")"));
  }
  FORGE_ASSIGN_OR_RETURN(const DrawDType draw_dtype, DrawDTypeOf(dtype));
  DrawRule rule;
  rule.dtype = draw_dtype;
  rule.seed = SeedOf(seed ^ (uint64_t{kind} << 48), draw, input_index);
  switch (kind) {
    case ops::kLargeLogits: rule.scale = LargeLogitScale(dtype); break;
    case ops::kLargeMean: rule.mean = 256; break;
    case ops::kTinyVariance: rule.scale = 1e-3; break;
    case ops::kCancellation: rule.distribution = kDrawCancellation; break;
    case ops::kActivationKinks: rule.distribution = kDrawKinks; break;
    case ops::kZerosAndSubnormals: rule.distribution = kDrawZerosAndSubnormals; break;
    case ops::kIntegerEdges:
      rule.distribution = kDrawIntegerEdges;
      rule.low = domain.range.low;
      rule.high = domain.range.high;
      break;
  }
  return rule;
}

absl::StatusOr<HostTensor> DrawAdversarialInput(const TensorSpec& spec, const InputDomain& domain,
                                                ops::AdversarialDraw kind, int draw,
                                                int input_index, uint64_t seed,
                                                ThreadPool& pool) {
  FORGE_ASSIGN_OR_RETURN(const DrawRule rule,
                         AdversarialDrawRule(spec, domain, kind, draw, input_index, seed));
  return DrawTensor(spec, rule, pool);
}

std::vector<InputDomain> InferInputDomains(const forge::v1::KernelTask& task) {
  return DomainInference(task).Run();
}

absl::StatusOr<std::vector<InputDomain>> InputDomainsWith(
    const forge::v1::KernelTask& task, const std::map<int, IntegerRange>& integer_ranges) {
  std::vector<InputDomain> domains = InferInputDomains(task);
  for (const auto& [index, range] : integer_ranges) {
    if (index < 0 || index >= static_cast<int>(domains.size())) {
      return absl::InvalidArgumentError(absl::StrCat("JudgeOptions.integer_ranges names input ",
                                                     index, "; the task has ", domains.size(),
                                                     " inputs"));
    }
    domains[index] = {InputDomain::Kind::kIntegerRange, range,
                      absl::StrCat("caller's range [", range.low, ", ", range.high, ")")};
  }
  return domains;
}

std::string DescribeDraw(int draw) {
  switch (DistributionOf(draw)) {
    case Distribution::kNormal:
      return "normal(0, 1)";
    case Distribution::kUniform:
      return "uniform(-2, 2)";
    case Distribution::kScaledNormal:
      return "normal(0, s_i) with a scale per input";
  }
  return "";
}

double InputScale(int draw, int input_index) {
  if (DistributionOf(draw) != Distribution::kScaledNormal) return 1.0;
  return std::ldexp(1.0, input_index % 5 - 2);
}

absl::StatusOr<DrawDType> DrawDTypeOf(forge::v1::DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT64: return kDrawFloat64;
    case forge::v1::DTYPE_FLOAT32: return kDrawFloat32;
    case forge::v1::DTYPE_FLOAT16: return kDrawFloat16;
    case forge::v1::DTYPE_BFLOAT16: return kDrawBfloat16;
    case forge::v1::DTYPE_FLOAT8_E4M3FN: return kDrawFloat8E4M3;
    case forge::v1::DTYPE_FLOAT8_E5M2: return kDrawFloat8E5M2;
    case forge::v1::DTYPE_INT8: return kDrawInt8;
    case forge::v1::DTYPE_INT16: return kDrawInt16;
    case forge::v1::DTYPE_INT32: return kDrawInt32;
    case forge::v1::DTYPE_INT64: return kDrawInt64;
    case forge::v1::DTYPE_UINT8: return kDrawUint8;
    case forge::v1::DTYPE_BOOL: return kDrawBool;
    default:
      return absl::UnimplementedError(
          absl::StrCat("the judge draws no inputs of dtype ", forge::v1::DType_Name(dtype)));
  }
}

absl::StatusOr<DrawRule> StandardDrawRule(const TensorSpec& spec, const InputDomain& domain,
                                          int draw, int input_index, uint64_t seed) {
  const forge::v1::DType dtype = spec.dtype();
  FORGE_ASSIGN_OR_RETURN(const DrawDType draw_dtype, DrawDTypeOf(dtype));
  DrawRule rule;
  rule.dtype = draw_dtype;
  rule.seed = SeedOf(seed, draw, input_index);
  if (!IsFloatingPoint(dtype)) {
    rule.distribution = kDrawIntegers;
    const IntegerRange range = dtype == forge::v1::DTYPE_BOOL ? IntegerRange{0, 2} : domain.range;
    if (range.high <= range.low) {
      return absl::InvalidArgumentError(absl::StrCat("input ", input_index, " (",
                                                     DescribeSpec(spec), "): empty integer range [",
                                                     range.low, ", ", range.high, ")"));
    }
    rule.low = range.low;
    rule.high = range.high;
    return rule;
  }
  rule.scale = InputScale(draw, input_index);
  if (DistributionOf(draw) == Distribution::kUniform) {
    rule.distribution = kDrawUniform;
    rule.scale = 2;
  }
  rule.positive = domain.kind == InputDomain::Kind::kPositive;
  rule.nonzero = 1;
  return rule;
}

absl::StatusOr<HostTensor> DrawTensor(const TensorSpec& spec, const DrawRule& rule,
                                      ThreadPool& pool) {
  FORGE_ASSIGN_OR_RETURN(HostTensor tensor, HostTensor::Allocate(spec));
  const int element_bytes = DTypeBytes(spec.dtype());
  if (element_bytes != DrawElementBytes(rule.dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("a draw of ", element_bytes,
                                                   "-byte elements for ", DescribeSpec(spec)));
  }
  const bool row_major = IsRowMajor(spec);
  std::byte* const storage = tensor.storage.data();
  pool.ForEachChunk(tensor.element_count(), [&](int64_t, int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const uint64_t bits = DrawElement(rule, i);
      // Little-endian: the element's bytes are the low bytes of `bits`.
      std::memcpy(storage + (row_major ? i : StorageOffsetOf(spec, i)) * element_bytes, &bits,
                  element_bytes);
    }
  });
  return tensor;
}

absl::StatusOr<HostTensor> DrawInput(const TensorSpec& spec, const InputDomain& domain, int draw,
                                     int input_index, uint64_t seed, ThreadPool& pool) {
  FORGE_ASSIGN_OR_RETURN(const DrawRule rule,
                         StandardDrawRule(spec, domain, draw, input_index, seed));
  return DrawTensor(spec, rule, pool);
}

}  // namespace forge::judge
