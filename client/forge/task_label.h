// Names of kernel tasks for people, for the axes and keys of the bundle's plots: what a task
// computes ("softmax", "layer_norm+gelu", "linear+add") instead of its digest.
//
// A task's label is its compute ops (OpSummary: the group's ops without its views, or the views
// when that is all there is) in node order, each op once: "mul+mul+add" is "mul+add". A label over
// `max_chars` keeps the ops that fit and says how many more there are: "pow+mean+add (+3 ops)".
// Tasks whose labels coincide are told apart by their digests' first hex digits, six or as many as
// it takes: "linear (c19a2d)", "linear (d9ada4)".
#ifndef FORGE_CLIENT_FORGE_TASK_LABEL_H_
#define FORGE_CLIENT_FORGE_TASK_LABEL_H_

#include <cstddef>
#include <string>
#include <vector>

#include "forge/v1/task.pb.h"

namespace forge::client {

// The label of one task, without the digest.
std::string OpLabel(const forge::v1::KernelTask& task, std::size_t max_chars = 32);

// The labels of `tasks`, in their order, duplicates told apart by digest.
std::vector<std::string> TaskLabels(const std::vector<const forge::v1::KernelTask*>& tasks,
                                    std::size_t max_chars = 32);

}  // namespace forge::client

#endif  // FORGE_CLIENT_FORGE_TASK_LABEL_H_
