#include "compiler/graph/task_digest.h"

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/digest/sha256.h"
#include "common/proto_io/deterministic.h"

namespace forge::graph {
namespace {

using ::forge::v1::Argument;
using ::forge::v1::Graph;

class Renamer {
 public:
  void Define(const std::string& name) {
    names_.try_emplace(name, absl::StrCat("%", names_.size()));
  }
  void Rename(std::string* name) const {
    auto it = names_.find(*name);
    if (it != names_.end()) *name = it->second;
  }

 private:
  absl::flat_hash_map<std::string, std::string> names_;
};

void RenameArgument(const Renamer& renamer, Argument& argument) {
  switch (argument.value_case()) {
    case Argument::kTensor:
      renamer.Rename(argument.mutable_tensor());
      break;
    case Argument::kOptionalTensor:
      if (argument.optional_tensor().has_value_name()) {
        renamer.Rename(argument.mutable_optional_tensor()->mutable_value_name());
      }
      break;
    case Argument::kTensors:
      for (std::string& name : *argument.mutable_tensors()->mutable_value_names()) {
        renamer.Rename(&name);
      }
      break;
    case Argument::kOptionalTensors:
      for (auto& item : *argument.mutable_optional_tensors()->mutable_items()) {
        if (item.has_value_name()) renamer.Rename(item.mutable_value_name());
      }
      break;
    default:
      break;
  }
}

}  // namespace

Graph CanonicalGroup(const Graph& group) {
  Renamer renamer;
  for (const auto& input : group.inputs()) renamer.Define(input.value_name());
  for (const auto& node : group.nodes()) {
    for (const std::string& output : node.outputs()) renamer.Define(output);
  }

  Graph canonical;
  for (const auto& input : group.inputs()) {
    auto* copy = canonical.add_inputs();
    copy->set_kind(input.kind());
    copy->set_value_name(input.value_name());
    renamer.Rename(copy->mutable_value_name());
  }
  // Values in definition order (inputs, then node outputs), not the order the group lists them.
  absl::flat_hash_map<std::string, const forge::v1::Value*> values;
  for (const auto& value : group.values()) values.emplace(value.name(), &value);
  auto add_value = [&](const std::string& name) {
    auto* copy = canonical.add_values();
    copy->set_name(name);
    if (auto it = values.find(name); it != values.end()) {
      *copy->mutable_tensor() = it->second->tensor();
      copy->mutable_tensor()->clear_device();
    }
    renamer.Rename(copy->mutable_name());
  };
  for (const auto& input : group.inputs()) add_value(input.value_name());
  for (const auto& node : group.nodes()) {
    auto* copy = canonical.add_nodes();
    copy->set_op(node.op());
    copy->set_overload(node.overload());
    *copy->mutable_arguments() = node.arguments();
    for (Argument& argument : *copy->mutable_arguments()) RenameArgument(renamer, argument);
    for (const std::string& output : node.outputs()) {
      add_value(output);
      std::string* name = copy->add_outputs();
      *name = output;
      renamer.Rename(name);
    }
  }
  for (const auto& output : group.outputs()) {
    auto* copy = canonical.add_outputs();
    copy->set_kind(output.kind());
    copy->set_value_name(output.value_name());
    renamer.Rename(copy->mutable_value_name());
  }
  return canonical;
}

namespace {

std::string DeterministicDigest(const Graph& graph) {
  return Sha256Hex(SerializeDeterministic(graph));
}

}  // namespace

std::string TaskDigest(const Graph& group) { return DeterministicDigest(CanonicalGroup(group)); }

std::string ModelDigest(const Graph& graph) { return DeterministicDigest(graph); }

}  // namespace forge::graph
