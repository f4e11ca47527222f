#include "worker/judge/inputs.h"

#include <cmath>
#include <cstring>
#include <random>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/dtype/dtype.h"
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

// Whether a floating-point element encodes +0 or -0 (only the sign bit, the top one, may be set).
bool IsEncodedZero(const std::byte* element, int element_bytes) {
  uint64_t bits = 0;
  std::memcpy(&bits, element, element_bytes);  // little-endian: the sign is bit 8*bytes-1
  const uint64_t sign = uint64_t{1} << (8 * element_bytes - 1);
  return (bits & ~sign) == 0;
}

uint64_t SeedOf(uint64_t seed, int draw, int input_index) {
  // splitmix64 over the three numbers: nearby arguments give unrelated streams.
  uint64_t state = seed ^ (static_cast<uint64_t>(draw) << 32) ^ static_cast<uint64_t>(input_index);
  state += 0x9E3779B97F4A7C15ull;
  state = (state ^ (state >> 30)) * 0xBF58476D1CE4E5B9ull;
  state = (state ^ (state >> 27)) * 0x94D049BB133111EBull;
  return state ^ (state >> 31);
}

// A tensor of `spec` filled chunk by chunk in ThreadPool's fixed chunks: fill(generator, begin,
// end, element) writes logical elements [begin, end), element(i) giving the address of element i;
// each chunk draws from its own generator seeded by `draw_seed` and the chunk index (chunk 0 by
// `draw_seed` alone), so the values never depend on the number of threads.
template <typename Fill>
absl::StatusOr<HostTensor> DrawChunks(const TensorSpec& spec, uint64_t draw_seed, ThreadPool& pool,
                                      const Fill& fill) {
  absl::StatusOr<HostTensor> tensor = HostTensor::Allocate(spec);
  if (!tensor.ok()) return tensor.status();
  // Each value is encoded once, straight into its place (the row-major offset unless strided):
  // per element this loop is the judge's first-candidate cost on the largest tasks.
  const int element_bytes = DTypeBytes(spec.dtype());
  const bool row_major = IsRowMajor(spec);
  std::byte* const storage = tensor->storage.data();
  auto element = [&](int64_t i) {
    return storage + (row_major ? i : StorageOffsetOf(spec, i)) * element_bytes;
  };
  pool.ForEachChunk(tensor->element_count(), [&](int64_t chunk, int64_t begin, int64_t end) {
    std::mt19937_64 generator(chunk == 0 ? draw_seed
                                         : SeedOf(draw_seed, 0, static_cast<int>(chunk)));
    fill(generator, begin, end, element);
  });
  return tensor;
}

// Mantissa bits of a floating dtype: its subnormals are the non-zero patterns below them.
int MantissaBits(forge::v1::DType dtype) {
  switch (dtype) {
    case forge::v1::DTYPE_FLOAT64: return 52;
    case forge::v1::DTYPE_FLOAT16: return 10;
    case forge::v1::DTYPE_BFLOAT16: return 7;
    case forge::v1::DTYPE_FLOAT8_E4M3FN: return 3;
    case forge::v1::DTYPE_FLOAT8_E5M2: return 2;
    default: return 23;  // float32
  }
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

absl::StatusOr<HostTensor> DrawAdversarialInput(const TensorSpec& spec, const InputDomain& domain,
                                                ops::AdversarialDraw kind, int draw,
                                                int input_index, uint64_t seed,
                                                ThreadPool& pool) {
  const forge::v1::DType dtype = spec.dtype();
  if ((kind == ops::kIntegerEdges) != (domain.kind == InputDomain::Kind::kIntegerRange) ||
      (kind == ops::kIntegerEdges) == IsFloatingPoint(dtype)) {
    return absl::InvalidArgumentError(absl::StrCat("adversarial draw \"", DescribeAdversarial(kind),
                                                   "\" does not suit input ", input_index, " (",
                                                   DescribeSpec(spec), ")"));
  }
  const uint64_t draw_seed = SeedOf(seed ^ (uint64_t{kind} << 48), draw, input_index);
  const int element_bytes = DTypeBytes(dtype);
  return DrawChunks(spec, draw_seed, pool, [&](std::mt19937_64& generator, int64_t begin,
                                               int64_t end, const auto& element) {
    std::normal_distribution<double> normal(0.0, 1.0);
    std::uniform_int_distribution<int> quarter(0, 3);
    switch (kind) {
      case ops::kLargeLogits:
      case ops::kLargeMean:
      case ops::kTinyVariance: {
        const double mean = kind == ops::kLargeMean ? 256 : 0;
        const double scale = kind == ops::kLargeLogits   ? LargeLogitScale(dtype)
                             : kind == ops::kTinyVariance ? 1e-3
                                                          : 1;
        for (int64_t i = begin; i < end; ++i) {
          EncodeElement(dtype, mean + scale * normal(generator), element(i));
        }
        return;
      }
      case ops::kCancellation:
        // Chunks begin at even indices: every pair lies in one chunk.
        for (int64_t i = begin; i < end; ++i) {
          const double value = i % 2 == 0 ? 8 * normal(generator)
                                          : -DecodeElement(dtype, element(i - 1)) + normal(generator);
          EncodeElement(dtype, value, element(i));
        }
        return;
      case ops::kActivationKinks: {
        constexpr double kKinks[] = {0, 1, -1, 3, -3, 6};
        std::uniform_int_distribution<int> which(0, 5);
        for (int64_t i = begin; i < end; ++i) {
          const double kink = kKinks[which(generator)];
          EncodeElement(dtype, quarter(generator) < 2 ? kink : kink + 0.01 * normal(generator),
                        element(i));
        }
        return;
      }
      case ops::kZerosAndSubnormals: {
        const int mantissa_bits = MantissaBits(dtype);
        std::uniform_int_distribution<uint64_t> mantissa(1, (uint64_t{1} << mantissa_bits) - 1);
        const uint64_t sign = uint64_t{1} << (8 * element_bytes - 1);
        for (int64_t i = begin; i < end; ++i) {
          uint64_t bits = 0;
          switch (quarter(generator)) {
            case 0: break;  // +0
            case 1: bits = sign; break;
            case 2: bits = mantissa(generator) | (generator() % 2 == 0 ? 0 : sign); break;
            default: EncodeElement(dtype, normal(generator), element(i)); continue;
          }
          std::memcpy(element(i), &bits, element_bytes);  // little-endian
        }
        return;
      }
      case ops::kIntegerEdges: {
        const IntegerRange range = domain.range;
        std::uniform_int_distribution<int64_t> integers(range.low, range.high - 1);
        for (int64_t i = begin; i < end; ++i) {
          const int q = quarter(generator);
          const int64_t value = q == 0 ? range.low : q == 1 ? range.high - 1 : q == 2
                                    ? (generator() % 2 == 0 ? range.low : range.high - 1)
                                    : integers(generator);
          EncodeElement(dtype, static_cast<double>(value), element(i));
        }
        return;
      }
    }
  });
}

std::vector<InputDomain> InferInputDomains(const forge::v1::KernelTask& task) {
  return DomainInference(task).Run();
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

absl::StatusOr<HostTensor> DrawInput(const TensorSpec& spec, const InputDomain& domain, int draw,
                                     int input_index, uint64_t seed, ThreadPool& pool) {
  const forge::v1::DType dtype = spec.dtype();
  const double scale = InputScale(draw, input_index);
  const bool positive = domain.kind == InputDomain::Kind::kPositive;
  IntegerRange range = domain.range;
  if (dtype == forge::v1::DTYPE_BOOL) range = {0, 2};
  const int element_bytes = DTypeBytes(dtype);
  return DrawChunks(spec, SeedOf(seed, draw, input_index), pool,
                    [&](std::mt19937_64& generator, int64_t begin, int64_t end,
                        const auto& element) {
    if (!IsFloatingPoint(dtype)) {
      std::uniform_int_distribution<int64_t> integers(range.low, range.high - 1);
      for (int64_t i = begin; i < end; ++i) {
        EncodeElement(dtype, static_cast<double>(integers(generator)), element(i));
      }
      return;
    }
    std::normal_distribution<double> normal(0.0, scale);
    std::uniform_real_distribution<double> uniform(-2.0, 2.0);
    for (int64_t i = begin; i < end; ++i) {
      std::byte* const destination = element(i);
      do {
        double value =
            DistributionOf(draw) == Distribution::kUniform ? uniform(generator) : normal(generator);
        if (positive) value = std::fabs(value) + 0.1 * scale;
        EncodeElement(dtype, value, destination);
      } while (IsEncodedZero(destination, element_bytes));
    }
  });
}

}  // namespace forge::judge
