// Integration test: a real civetweb server on 127.0.0.1, fetched over a real TCP socket, and the
// body checked by the real promtool.
#include "common/metrics/exposer.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/support/subprocess.h"

namespace forge::metrics {
namespace {

using ::testing::HasSubstr;

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;
};

bool ConnectLoopback(int fd, int port) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) == 0;
}

// A minimal HTTP/1.1 GET: one request, "Connection: close", read to end of stream.
absl::StatusOr<HttpResponse> HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket() failed");
  timeval timeout{.tv_sec = 5, .tv_usec = 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  if (!ConnectLoopback(fd, port)) {
    close(fd);
    return absl::UnavailableError(absl::StrCat("cannot connect to 127.0.0.1:", port));
  }
  const std::string request = absl::StrCat("GET ", path, " HTTP/1.1\r\nHost: 127.0.0.1:", port,
                                           "\r\nConnection: close\r\n\r\n");
  if (write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size())) {
    close(fd);
    return absl::InternalError("short write of the request");
  }
  std::string raw;
  char buffer[4096];
  ssize_t n;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0) raw.append(buffer, n);
  close(fd);

  const size_t header_end = raw.find("\r\n\r\n");
  if (header_end == std::string::npos) {
    return absl::DataLossError(absl::StrCat("no end of headers in: ", raw));
  }
  std::vector<std::string> lines = absl::StrSplit(raw.substr(0, header_end), "\r\n");
  HttpResponse response;
  std::vector<std::string> status_line = absl::StrSplit(lines[0], ' ');
  if (status_line.size() < 2 || status_line[0] != "HTTP/1.1" ||
      !absl::SimpleAtoi(status_line[1], &response.status)) {
    return absl::DataLossError(absl::StrCat("bad status line: ", lines[0]));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    std::pair<std::string, std::string> header = absl::StrSplit(lines[i], absl::MaxSplits(':', 1));
    response.headers[absl::AsciiStrToLower(header.first)] =
        std::string(absl::StripAsciiWhitespace(header.second));
  }
  response.body = raw.substr(header_end + 4);
  int content_length = 0;
  if (absl::SimpleAtoi(response.headers["content-length"], &content_length)) {
    EXPECT_EQ(response.body.size(), static_cast<size_t>(content_length));
  }
  return response;
}

struct PromtoolResult {
  int exit_code = -1;
  std::string output;
};

// `promtool check metrics` with text on stdin; its stdout and stderr together.
PromtoolResult PromtoolCheckMetrics(const std::string& text) {
  const std::string promtool = forge::testing::FindTool("FORGE_PROMTOOL", "promtool");
  EXPECT_FALSE(promtool.empty()) << "promtool not found on PATH (Debian: prometheus; or set FORGE_PROMTOOL)";
  if (promtool.empty()) return {};
  forge::testing::TempDir dir;
  const std::string input = dir.path() + "/metrics.txt";
  std::ofstream(input) << text;
  const std::string command = absl::StrCat("'", promtool, "' check metrics < '", input, "' 2>&1");
  PromtoolResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[1024];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

class MetricsExposerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<MetricsExposer>> started = MetricsExposer::Start("127.0.0.1:0");
    ASSERT_TRUE(started.ok()) << started.status();
    exposer_ = *std::move(started);
    ASSERT_GT(exposer_->port(), 0);
  }

  std::unique_ptr<MetricsExposer> exposer_;
};

TEST_F(MetricsExposerTest, ServesMetricsThatPromtoolAccepts) {
  auto registry = std::make_shared<Registry>();
  absl::StatusOr<Family<Counter>*> candidates = registry->AddCounter(
      {"forge_candidates_total", "Candidates judged, by verdict.", {{"worker", "w-1"}}});
  absl::StatusOr<Family<Gauge>*> leases =
      registry->AddGauge({"forge_leases_in_flight", "Leases not yet returned.", {}});
  absl::StatusOr<Family<Histogram>*> compile = registry->AddHistogram(
      {"forge_compile_duration_seconds", "NVRTC compile time.\nOne line per arch.", {}},
      ExponentialBuckets(0.01, 4, 5));
  ASSERT_TRUE(candidates.ok()) << candidates.status();
  ASSERT_TRUE(leases.ok()) << leases.status();
  ASSERT_TRUE(compile.ok()) << compile.status();
  (*candidates)->Add({{"verdict", "correct"}}).Increment(41);
  (*candidates)->Add({{"verdict", "wrong \"nan\"\\\noutput"}}).Increment();
  (*leases)->Add({}).Set(3);
  (*compile)->Add({{"arch", "sm_90a"}}).Observe(0.3);
  (*compile)->Add({{"arch", "sm_80"}}).Observe(100);
  exposer_->AddRegistry(registry);

  absl::StatusOr<HttpResponse> response = HttpGet(exposer_->port(), "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_EQ(response->headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  EXPECT_THAT(response->body,
              HasSubstr("forge_candidates_total{verdict=\"correct\",worker=\"w-1\"} 41\n"));
  EXPECT_THAT(response->body, HasSubstr("forge_leases_in_flight 3\n"));
  EXPECT_THAT(response->body,
              HasSubstr("forge_compile_duration_seconds_bucket{arch=\"sm_80\",le=\"+Inf\"} 1\n"));

  PromtoolResult promtool = PromtoolCheckMetrics(response->body);
  EXPECT_EQ(promtool.exit_code, 0) << promtool.output << "\n--- body:\n" << response->body;
  EXPECT_EQ(promtool.output, "");
}

// The negative control: the promtool check above can fail.
TEST(PromtoolTest, RejectsMalformedAndUnlintedExpositions) {
  PromtoolResult malformed = PromtoolCheckMetrics(
      "# HELP forge_jobs_total Jobs.\n# TYPE forge_jobs_total counter\n"
      "forge_jobs_total{state=\"done\" 1\n");
  EXPECT_NE(malformed.exit_code, 0) << malformed.output;
  EXPECT_THAT(malformed.output, HasSubstr("parsing error"));

  PromtoolResult unlinted =
      PromtoolCheckMetrics("# HELP forge_jobs Jobs.\n# TYPE forge_jobs counter\nforge_jobs 1\n");
  EXPECT_NE(unlinted.exit_code, 0) << unlinted.output;
  EXPECT_THAT(unlinted.output, HasSubstr("_total"));
}

TEST_F(MetricsExposerTest, AnswersNotFoundForOtherPaths) {
  for (const std::string path : {"/other", "/", "/metrics/extra", "/metricsx"}) {
    absl::StatusOr<HttpResponse> response = HttpGet(exposer_->port(), path);
    ASSERT_TRUE(response.ok()) << path << ": " << response.status();
    EXPECT_EQ(response->status, 404) << path;
  }
}

TEST_F(MetricsExposerTest, ServesSeveralRegistriesAndFailsOnAClash) {
  auto coordinator = std::make_shared<Registry>();
  auto scheduler = std::make_shared<Registry>();
  (*coordinator->AddGauge({"forge_jobs_running", "Jobs running.", {}}))->Add({}).Set(2);
  (*scheduler->AddGauge({"forge_tasks_pending", "Tasks pending.", {}}))->Add({}).Set(5);
  exposer_->AddRegistry(coordinator);
  exposer_->AddRegistry(scheduler);

  absl::StatusOr<HttpResponse> response = HttpGet(exposer_->port(), "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 200);
  EXPECT_THAT(response->body, HasSubstr("forge_jobs_running 2\n"));
  EXPECT_THAT(response->body, HasSubstr("forge_tasks_pending 5\n"));

  (*scheduler->AddGauge({"forge_jobs_running", "Jobs running.", {}}))->Add({}).Set(3);
  response = HttpGet(exposer_->port(), "/metrics");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 500);
  EXPECT_THAT(response->body, HasSubstr("forge_jobs_running"));
}

TEST_F(MetricsExposerTest, ReportsABusyAddressAndStopsOnDestruction) {
  const int port = exposer_->port();
  absl::StatusOr<std::unique_ptr<MetricsExposer>> second =
      MetricsExposer::Start(absl::StrCat("127.0.0.1:", port));
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  EXPECT_THAT(second.status().message(), HasSubstr(absl::StrCat("127.0.0.1:", port)));
  EXPECT_THAT(second.status().message(), HasSubstr("Address already in use"));

  exposer_.reset();
  EXPECT_FALSE(HttpGet(port, "/metrics").ok());
}

}  // namespace
}  // namespace forge::metrics
