// Checks the forge.v1 protocol as a whole through reflection: every message survives the binary and
// JSON encodings with every field set, every element carries a comment, and the services offer the
// RPCs that clients and workers are written against.
#include <algorithm>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "forge/v1/graph.pb.h"
#include "forge/v1/service.pb.h"
#include "forge/v1/task.pb.h"
#include "gmock/gmock.h"
#include "google/protobuf/descriptor.h"
#include "google/protobuf/descriptor.pb.h"
#include "google/protobuf/message.h"
#include "google/protobuf/util/json_util.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"

namespace forge::v1 {
namespace {

using google::protobuf::Descriptor;
using google::protobuf::DescriptorPool;
using google::protobuf::FieldDescriptor;
using google::protobuf::FileDescriptor;
using google::protobuf::FileDescriptorProto;
using google::protobuf::FileDescriptorSet;
using google::protobuf::Message;
using google::protobuf::MessageFactory;
using google::protobuf::Reflection;
using google::protobuf::SourceLocation;
using google::protobuf::util::MessageDifferencer;
using testing::ElementsAre;
using testing::ElementsAreArray;
using testing::IsEmpty;

constexpr const char* kPackageFiles[] = {"forge/v1/graph.proto", "forge/v1/task.proto",
                                         "forge/v1/service.proto"};
// How many messages the three files define (nested ones included, map entries not). The walk must
// reach at least this many, so a walk that silently finds nothing fails.
constexpr size_t kMessagesDefined = 60;

// The package's files as compiled into the generated code. Naming a message of each file keeps
// that file's code in the link, and that code is what registers the file.
std::vector<const FileDescriptor*> PackageFiles() {
  return {Graph::descriptor()->file(), Job::descriptor()->file(), JobEvent::descriptor()->file()};
}

void CollectMessages(const Descriptor* message, std::vector<const Descriptor*>* messages) {
  if (message->options().map_entry()) {
    return;  // synthesized by protoc for a map field; covered through that field
  }
  messages->push_back(message);
  for (int i = 0; i < message->nested_type_count(); ++i) {
    CollectMessages(message->nested_type(i), messages);
  }
}

// Full names of every message of the package.
std::vector<std::string> PackageMessages() {
  std::vector<const Descriptor*> messages;
  for (const FileDescriptor* file : PackageFiles()) {
    for (int i = 0; i < file->message_type_count(); ++i) {
      CollectMessages(file->message_type(i), &messages);
    }
  }
  std::vector<std::string> names;
  for (const Descriptor* message : messages) {
    names.push_back(message->full_name());
  }
  return names;
}

// How many fills it takes to set each field of each of the message's oneofs once.
int OneofBranches(const Descriptor* message) {
  int branches = 1;
  for (int i = 0; i < message->real_oneof_decl_count(); ++i) {
    branches = std::max(branches, message->oneof_decl(i)->field_count());
  }
  return branches;
}

// The fields a fill sets: all, except that of each oneof only the field at `branch` (modulo the
// oneof's size) is set.
std::vector<const FieldDescriptor*> FieldsToSet(const Descriptor* message, int branch) {
  std::vector<const FieldDescriptor*> fields;
  for (int i = 0; i < message->field_count(); ++i) {
    const FieldDescriptor* field = message->field(i);
    const google::protobuf::OneofDescriptor* oneof = field->real_containing_oneof();
    if (oneof == nullptr || oneof->field(branch % oneof->field_count()) == field) {
      fields.push_back(field);
    }
  }
  return fields;
}

// True when `field` holds a message of a type already being filled further up: a recursive type
// would otherwise never finish, so such fields stay unset (each type gets its own fill anyway).
bool ReentersOpenType(const FieldDescriptor* field, const std::vector<const Descriptor*>& open) {
  return field->message_type() != nullptr &&
         std::find(open.begin(), open.end(), field->message_type()) != open.end();
}

// Sets every field of a message, recursively, to a value other than its default; repeated fields
// and maps get two elements. Values differ from field to field, so a value read back into the
// wrong field shows up as a difference.
class Filler {
 public:
  explicit Filler(int oneof_branch) : oneof_branch_(oneof_branch) {}

  void Fill(Message* message) {
    const Descriptor* type = message->GetDescriptor();
    open_types_.push_back(type);
    for (const FieldDescriptor* field : FieldsToSet(type, oneof_branch_)) {
      if (ReentersOpenType(field, open_types_)) {
        continue;
      }
      const int values = field->is_repeated() ? 2 : 1;
      for (int i = 0; i < values; ++i) {
        Put(message, field);
      }
    }
    open_types_.pop_back();
  }

 private:
  // Sets a singular field, or appends to a repeated one. Numbers stay small and positive so that
  // they are valid everywhere, including in google.protobuf.Timestamp.
  void Put(Message* message, const FieldDescriptor* field) {
    const Reflection* reflection = message->GetReflection();
    const bool repeated = field->is_repeated();
    const int n = ++values_made_;
    switch (field->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        repeated ? reflection->AddInt32(message, field, n)
                 : reflection->SetInt32(message, field, n);
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        repeated ? reflection->AddInt64(message, field, n)
                 : reflection->SetInt64(message, field, n);
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        repeated ? reflection->AddUInt32(message, field, n)
                 : reflection->SetUInt32(message, field, n);
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        repeated ? reflection->AddUInt64(message, field, n)
                 : reflection->SetUInt64(message, field, n);
        break;
      case FieldDescriptor::CPPTYPE_DOUBLE:  // n + 0.5 is exact in binary and in JSON's decimal
        repeated ? reflection->AddDouble(message, field, n + 0.5)
                 : reflection->SetDouble(message, field, n + 0.5);
        break;
      case FieldDescriptor::CPPTYPE_FLOAT:
        repeated ? reflection->AddFloat(message, field, n + 0.5f)
                 : reflection->SetFloat(message, field, n + 0.5f);
        break;
      case FieldDescriptor::CPPTYPE_BOOL:
        repeated ? reflection->AddBool(message, field, true)
                 : reflection->SetBool(message, field, true);
        break;
      case FieldDescriptor::CPPTYPE_ENUM: {
        // The last value: every enum of the package has a zero value first, so this one is not 0.
        const google::protobuf::EnumDescriptor* type = field->enum_type();
        const int number = type->value(type->value_count() - 1)->number();
        repeated ? reflection->AddEnumValue(message, field, number)
                 : reflection->SetEnumValue(message, field, number);
        break;
      }
      case FieldDescriptor::CPPTYPE_STRING: {
        // Bytes fields get bytes that are not UTF-8, which JSON must carry as base64.
        std::string value = field->type() == FieldDescriptor::TYPE_BYTES
                                ? std::string("\0\xff", 2) + std::to_string(n)
                                : field->name() + "-" + std::to_string(n);
        repeated ? reflection->AddString(message, field, std::move(value))
                 : reflection->SetString(message, field, std::move(value));
        break;
      }
      case FieldDescriptor::CPPTYPE_MESSAGE:
        Fill(repeated ? reflection->AddMessage(message, field)
                      : reflection->MutableMessage(message, field));
        break;
    }
  }

  const int oneof_branch_;
  std::vector<const Descriptor*> open_types_;  // the types being filled, outermost first
  int values_made_ = 0;
};

// Paths of the fields a fill with `branch` sets that `message` lacks, recursively.
void CollectUnsetFields(const Message& message, int branch, const std::string& path,
                        std::vector<const Descriptor*>* open_types,
                        std::vector<std::string>* unset) {
  const Reflection* reflection = message.GetReflection();
  open_types->push_back(message.GetDescriptor());
  for (const FieldDescriptor* field : FieldsToSet(message.GetDescriptor(), branch)) {
    if (ReentersOpenType(field, *open_types)) {
      continue;
    }
    const std::string field_path = path + "." + field->name();
    if (field->is_repeated()) {
      const int size = reflection->FieldSize(message, field);
      if (size == 0) {
        unset->push_back(field_path);
      }
      for (int i = 0; field->message_type() != nullptr && i < size; ++i) {
        CollectUnsetFields(reflection->GetRepeatedMessage(message, field, i), branch,
                           field_path + "[" + std::to_string(i) + "]", open_types, unset);
      }
    } else if (!reflection->HasField(message, field)) {
      unset->push_back(field_path);
    } else if (field->message_type() != nullptr) {
      CollectUnsetFields(reflection->GetMessage(message, field), branch, field_path, open_types,
                         unset);
    }
  }
  open_types->pop_back();
}

std::vector<std::string> UnsetFields(const Message& message, int branch) {
  std::vector<const Descriptor*> open_types;
  std::vector<std::string> unset;
  CollectUnsetFields(message, branch, message.GetDescriptor()->name(), &open_types, &unset);
  return unset;
}

testing::AssertionResult SameMessage(const Message& expected, const Message& actual) {
  MessageDifferencer differencer;
  std::string differences;
  differencer.ReportDifferencesToString(&differences);
  if (differencer.Compare(expected, actual)) {
    return testing::AssertionSuccess();
  }
  return testing::AssertionFailure() << differences;
}

TEST(ProtocolPackageTest, WalkFindsTheThreeFilesAndEveryMessageDefined) {
  std::vector<std::string> file_names;
  for (const FileDescriptor* file : PackageFiles()) {
    EXPECT_EQ(file->package(), "forge.v1") << file->name();
    file_names.push_back(file->name());
  }
  EXPECT_THAT(file_names, ElementsAreArray(kPackageFiles));
  // EveryMessageTest below is instantiated over exactly this list.
  EXPECT_GE(PackageMessages().size(), kMessagesDefined);
}

// Parameterized by full message name, which gtest prints readably (a descriptor would print as
// an address).
class EveryMessageTest : public testing::TestWithParam<std::string> {};

TEST_P(EveryMessageTest, SurvivesBinaryAndJsonWithEveryFieldSet) {
  const Descriptor* type = DescriptorPool::generated_pool()->FindMessageTypeByName(GetParam());
  ASSERT_NE(type, nullptr);
  const Message* prototype = MessageFactory::generated_factory()->GetPrototype(type);
  ASSERT_NE(prototype, nullptr);
  for (int branch = 0; branch < OneofBranches(type); ++branch) {
    SCOPED_TRACE("oneof branch " + std::to_string(branch));
    std::unique_ptr<Message> original(prototype->New());
    Filler(branch).Fill(original.get());

    std::string wire;
    ASSERT_TRUE(original->SerializeToString(&wire));
    std::unique_ptr<Message> from_wire(prototype->New());
    ASSERT_TRUE(from_wire->ParseFromString(wire));
    EXPECT_THAT(UnsetFields(*from_wire, branch), IsEmpty());
    EXPECT_TRUE(SameMessage(*original, *from_wire));

    std::string json;
    const auto printed = google::protobuf::util::MessageToJsonString(*original, &json);
    ASSERT_TRUE(printed.ok()) << printed.ToString();
    std::unique_ptr<Message> from_json(prototype->New());
    const auto parsed = google::protobuf::util::JsonStringToMessage(json, from_json.get());
    ASSERT_TRUE(parsed.ok()) << parsed.ToString() << " in " << json;
    EXPECT_TRUE(SameMessage(*original, *from_json)) << "through " << json;
  }
}

INSTANTIATE_TEST_SUITE_P(ForgeV1, EveryMessageTest, testing::ValuesIn(PackageMessages()),
                         [](const testing::TestParamInfo<std::string>& info) {
                           // "forge.v1.JobEvent" -> "JobEvent"; nested "forge.v1.A.B" -> "A_B".
                           std::string name = info.param.substr(std::string("forge.v1.").size());
                           std::replace(name.begin(), name.end(), '.', '_');
                           return name;
                         });

// Full names of the elements of `file` (messages, fields, oneofs, enums, enum values, services,
// methods) that have no leading comment.
class DocumentationCheck {
 public:
  explicit DocumentationCheck(const FileDescriptor* file) {
    for (int i = 0; i < file->message_type_count(); ++i) {
      CheckMessage(file->message_type(i));
    }
    for (int i = 0; i < file->enum_type_count(); ++i) {
      CheckEnum(file->enum_type(i));
    }
    for (int i = 0; i < file->service_count(); ++i) {
      const google::protobuf::ServiceDescriptor* service = file->service(i);
      Check(service);
      for (int j = 0; j < service->method_count(); ++j) {
        Check(service->method(j));
      }
    }
  }

  int checked() const { return checked_; }
  const std::vector<std::string>& undocumented() const { return undocumented_; }

 private:
  void CheckMessage(const Descriptor* message) {
    if (message->options().map_entry()) {
      return;  // synthesized by protoc; the map field carries the comment
    }
    Check(message);
    for (int i = 0; i < message->field_count(); ++i) {
      Check(message->field(i));
    }
    for (int i = 0; i < message->real_oneof_decl_count(); ++i) {
      Check(message->oneof_decl(i));
    }
    for (int i = 0; i < message->nested_type_count(); ++i) {
      CheckMessage(message->nested_type(i));
    }
    for (int i = 0; i < message->enum_type_count(); ++i) {
      CheckEnum(message->enum_type(i));
    }
  }

  void CheckEnum(const google::protobuf::EnumDescriptor* type) {
    Check(type);
    for (int i = 0; i < type->value_count(); ++i) {
      Check(type->value(i));
    }
  }

  template <typename ElementDescriptor>
  void Check(const ElementDescriptor* element) {
    ++checked_;
    SourceLocation location;
    if (!element->GetSourceLocation(&location) ||
        location.leading_comments.find_first_not_of(" \t\r\n") == std::string::npos) {
      undocumented_.push_back(element->full_name());
    }
  }

  int checked_ = 0;
  std::vector<std::string> undocumented_;
};

TEST(ProtocolDocumentationTest, EveryElementOfThePackageHasALeadingComment) {
  // Comments exist only in the descriptor set protoc wrote next to the generated code; the
  // descriptors compiled into that code leave source info out.
  std::ifstream in(FORGE_PROTO_DESCRIPTOR_SET, std::ios::binary);
  ASSERT_TRUE(in) << "cannot open " << FORGE_PROTO_DESCRIPTOR_SET;
  FileDescriptorSet descriptor_set;
  ASSERT_TRUE(descriptor_set.ParseFromIstream(&in))
      << "cannot parse " << FORGE_PROTO_DESCRIPTOR_SET;
  DescriptorPool pool;
  for (const FileDescriptorProto& file : descriptor_set.file()) {
    ASSERT_NE(pool.BuildFile(file), nullptr) << file.name() << " in " << FORGE_PROTO_DESCRIPTOR_SET;
  }
  for (const char* name : kPackageFiles) {
    const FileDescriptor* file = pool.FindFileByName(name);
    ASSERT_NE(file, nullptr) << name << " missing from " << FORGE_PROTO_DESCRIPTOR_SET;
    const DocumentationCheck check(file);
    EXPECT_GT(check.checked(), 0) << name;
    EXPECT_THAT(check.undocumented(), IsEmpty()) << name;
  }
}

TEST(ProtocolDocumentationTest, CheckReportsAFieldWithoutComment) {
  FileDescriptorProto file;
  file.set_name("probe.proto");
  file.set_package("probe");
  file.set_syntax("proto3");
  google::protobuf::DescriptorProto* message = file.add_message_type();
  message->set_name("Probe");
  for (const char* field_name : {"documented", "undocumented"}) {
    google::protobuf::FieldDescriptorProto* field = message->add_field();
    field->set_name(field_name);
    field->set_number(message->field_size());
    field->set_type(google::protobuf::FieldDescriptorProto::TYPE_STRING);
    field->set_label(google::protobuf::FieldDescriptorProto::LABEL_OPTIONAL);
  }
  // Source paths: 4 = FileDescriptorProto.message_type, 2 = DescriptorProto.field.
  const std::vector<std::vector<int>> commented_paths = {{4, 0}, {4, 0, 2, 0}};
  for (const std::vector<int>& path : commented_paths) {
    google::protobuf::SourceCodeInfo::Location* location =
        file.mutable_source_code_info()->add_location();
    location->mutable_path()->Add(path.begin(), path.end());
    for (int span : {0, 0, 1}) {
      location->add_span(span);
    }
    location->set_leading_comments(" Says what it means.\n");
  }
  DescriptorPool pool;
  const FileDescriptor* built = pool.BuildFile(file);
  ASSERT_NE(built, nullptr);

  const DocumentationCheck check(built);
  EXPECT_EQ(check.checked(), 3);
  EXPECT_THAT(check.undocumented(), ElementsAre("probe.Probe.undocumented"));
}

struct ExpectedRpc {
  const char* service;
  const char* method;
  bool client_streaming;
  bool server_streaming;
};

constexpr ExpectedRpc kExpectedRpcs[] = {
    {"JobService", "MissingBlobs", false, false}, {"JobService", "SubmitJob", true, false},
    {"JobService", "GetJob", false, false},       {"JobService", "WatchJob", false, true},
    {"JobService", "CancelJob", false, false},    {"JobService", "ListJobs", false, false},
    {"JobService", "GetResults", false, false},   {"WorkerService", "Register", false, false},
    {"WorkerService", "Heartbeat", false, false}, {"WorkerService", "Lease", false, false},
    {"WorkerService", "Report", false, false},
    {"CostModelService", "GetCostModel", false, false},
};

TEST(ProtocolServicesTest, OfferTheRpcsClientsAndWorkersUse) {
  const FileDescriptor* file = JobEvent::descriptor()->file();
  for (const ExpectedRpc& rpc : kExpectedRpcs) {
    SCOPED_TRACE(std::string(rpc.service) + "." + rpc.method);
    const google::protobuf::ServiceDescriptor* service = file->FindServiceByName(rpc.service);
    ASSERT_NE(service, nullptr);
    const google::protobuf::MethodDescriptor* method = service->FindMethodByName(rpc.method);
    ASSERT_NE(method, nullptr);
    EXPECT_EQ(method->client_streaming(), rpc.client_streaming);
    EXPECT_EQ(method->server_streaming(), rpc.server_streaming);
  }
}

}  // namespace
}  // namespace forge::v1
