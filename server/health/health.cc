#include "server/health/health.h"

#include <string>
#include <vector>

#include "common/grpc_status/grpc_status.h"
#include "common/logging/logging.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/health_check_service_interface.h"

namespace forge::server {
namespace {

// HealthCheckResponse{status = SERVING}: field 1, varint 1. The request for service "" is empty.
constexpr char kServing[] = {0x08, 0x01};

}  // namespace

RedisHealthWatcher::RedisHealthWatcher(grpc::Server* server, RedisClient* redis,
                                       absl::Duration period)
    : thread_([this, server, redis, period] {
        grpc::HealthCheckServiceInterface* health = server->GetHealthCheckService();
        auto log = GetLogger("coordinator");
        bool serving = true;  // the default service starts SERVING
        do {
          absl::StatusOr<RedisReply> pong = redis->Command({"PING"});
          if (pong.ok() != serving) {
            serving = pong.ok();
            if (serving) {
              log->info("redis answers again: health SERVING");
            } else {
              log->warn("redis unreachable, health NOT_SERVING: {}", pong.status().ToString());
            }
          }
          if (health != nullptr) health->SetServingStatus(serving);
        } while (!stop_.WaitForNotificationWithTimeout(period));
      }) {}

RedisHealthWatcher::~RedisHealthWatcher() {
  stop_.Notify();
  thread_.join();
}

absl::StatusOr<bool> CheckHealth(grpc::Channel& channel, absl::Duration timeout) {
  grpc::GenericStub stub(std::shared_ptr<grpc::Channel>(&channel, [](grpc::Channel*) {}));
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + absl::ToChronoNanoseconds(timeout));
  grpc::Slice empty_request("");  // HealthCheckRequest{service = ""}
  grpc::ByteBuffer request(&empty_request, 1);
  grpc::ByteBuffer response;
  grpc::Status status;
  absl::Notification done;
  stub.UnaryCall(&context, "/grpc.health.v1.Health/Check", grpc::StubOptions(), &request,
                 &response, [&](grpc::Status call_status) {
                   status = std::move(call_status);
                   done.Notify();
                 });
  done.WaitForNotification();
  if (!status.ok()) return FromGrpcStatus(status, "grpc.health.v1.Health/Check");
  std::vector<grpc::Slice> slices;
  if (!response.Dump(&slices).ok()) return absl::InternalError("unreadable health response");
  std::string bytes;
  for (const grpc::Slice& slice : slices) {
    bytes.append(reinterpret_cast<const char*>(slice.begin()), slice.size());
  }
  return bytes == std::string(kServing, sizeof(kServing));
}

}  // namespace forge::server
