#include "common/logging/logging.h"

#include <stdlib.h>
#include <time.h>

#include <fstream>
#include <map>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "spdlog/spdlog.h"
#include "tests/support/subprocess.h"

namespace forge {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::SizeIs;

std::vector<std::string> ReadLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// A strict parser for the one JSON shape the formatter writes: an object whose values are all
// strings. Returns nullopt on anything RFC 8259 forbids (raw control characters, unknown escapes,
// trailing text) and on duplicate keys.
class StrictJsonObjectParser {
 public:
  static std::optional<std::map<std::string, std::string>> Parse(const std::string& text) {
    StrictJsonObjectParser parser(text);
    std::map<std::string, std::string> members;
    if (!parser.Consume('{')) return std::nullopt;
    if (!parser.Consume('}')) {
      do {
        std::optional<std::string> key = parser.String();
        if (!key || !parser.Consume(':')) return std::nullopt;
        std::optional<std::string> value = parser.String();
        if (!value || !members.emplace(*key, *value).second) return std::nullopt;
      } while (parser.Consume(','));
      if (!parser.Consume('}')) return std::nullopt;
    }
    parser.SkipWhitespace();
    if (parser.pos_ != text.size()) return std::nullopt;
    return members;
  }

 private:
  explicit StrictJsonObjectParser(const std::string& text) : text_(text) {}

  void SkipWhitespace() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' ||
                                   text_[pos_] == '\n' || text_[pos_] == '\r')) {
      ++pos_;
    }
  }

  bool Consume(char expected) {
    SkipWhitespace();
    if (pos_ < text_.size() && text_[pos_] == expected) {
      ++pos_;
      return true;
    }
    return false;
  }

  std::optional<std::string> String() {
    if (!Consume('"')) return std::nullopt;
    std::string out;
    while (pos_ < text_.size()) {
      const char c = text_[pos_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) return std::nullopt;
      if (c != '\\') {
        out.push_back(c);
        continue;
      }
      if (pos_ >= text_.size()) return std::nullopt;
      const char escape = text_[pos_++];
      switch (escape) {
        case '"':
          out.push_back('"');
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '/':
          out.push_back('/');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'u': {
          // The formatter only \u-escapes control characters, so one byte suffices here.
          if (pos_ + 4 > text_.size()) return std::nullopt;
          const unsigned long code = std::stoul(text_.substr(pos_, 4), nullptr, 16);
          if (code >= 0x80) return std::nullopt;
          out.push_back(static_cast<char>(code));
          pos_ += 4;
          break;
        }
        default:
          return std::nullopt;
      }
    }
    return std::nullopt;
  }

  const std::string& text_;
  std::size_t pos_ = 0;
};

class LoggingTest : public ::testing::Test {
 protected:
  std::string LogPath(const std::string& name) const { return dir_.path() + "/" + name; }

  // Logs to a fresh file in the given format and level; returns its path.
  std::string InitToFile(const std::string& format, const std::string& level = "trace") {
    const std::string path = LogPath(absl::StrCat("log", ++files_, ".", format));
    const absl::Status status = InitLogging({.level = level, .format = format, .output = path});
    EXPECT_TRUE(status.ok()) << status;
    return path;
  }

  testing::TempDir dir_;
  int files_ = 0;
};

TEST_F(LoggingTest, LogOptionsComeFromTheKeysAddLogOptionsDeclares) {
  ConfigSchema schema;
  AddLogOptions(schema);
  absl::StatusOr<Config> config = Config::Load(
      schema, {.environment = std::vector<std::string>{}, .args = {"--log.level=debug",
                                                                    "--log.format=json"}});
  ASSERT_TRUE(config.ok()) << config.status();
  const LogOptions options = LogOptionsFrom(*config);
  EXPECT_EQ(options.level, "debug");
  EXPECT_EQ(options.format, "json");
  EXPECT_EQ(options.output, "stderr");
  EXPECT_FALSE(Config::Load(schema, {.environment = std::vector<std::string>{},
                                     .args = {"--log.format=xml"}})
                   .ok());
}

TEST_F(LoggingTest, RejectsAnUnknownLevelNamingIt) {
  const absl::Status status = InitLogging({.level = "verbose"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(),
            "log level \"verbose\" is not one of: trace, debug, info, warn, error, critical, off");
}

TEST_F(LoggingTest, RejectsAnUnknownFormatNamingIt) {
  const absl::Status status = InitLogging({.format = "xml"});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(status.message(), "log format \"xml\" is not one of: text, json");
}

TEST_F(LoggingTest, FailedInitNamesThePathAndKeepsThePreviousOutput) {
  const std::string path = InitToFile("text");
  // A directory cannot be opened as a log file.
  const std::string bad_path = dir_.path();
  const absl::Status status = InitLogging({.output = bad_path});
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrCat("log output \"", bad_path, "\" cannot be opened")));

  GetLogger("worker")->info("still here");
  EXPECT_THAT(ReadLines(path), ElementsAre(HasSubstr("worker: still here")));
}

TEST_F(LoggingTest, LevelDropsLowerRecords) {
  const std::string path = InitToFile("text", "warn");
  auto logger = GetLogger("scheduler");
  logger->trace("t");
  logger->debug("d");
  logger->info("i");
  logger->warn("w");
  logger->error("e");
  logger->critical("c");
  EXPECT_THAT(ReadLines(path),
              ElementsAre(HasSubstr(" warning scheduler: w"), HasSubstr(" error scheduler: e"),
                          HasSubstr(" critical scheduler: c")));
}

TEST_F(LoggingTest, OffDropsEverything) {
  const std::string path = InitToFile("json", "off");
  GetLogger("scheduler")->critical("c");
  EXPECT_THAT(ReadLines(path), SizeIs(0));
}

TEST_F(LoggingTest, TextLineHasUtcTimeLevelComponentMessageAndFields) {
  const std::string path = InitToFile("text");
  LogWithFields(*GetLogger("coordinator"), spdlog::level::info, "job accepted",
                {{"job", 42}, {"model", "llama 3"}, {"note", "say \"hi\""}, {"empty", ""}});
  const std::vector<std::string> lines = ReadLines(path);
  ASSERT_THAT(lines, SizeIs(1));
  EXPECT_TRUE(std::regex_match(
      lines[0],
      std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z info coordinator: job accepted )"
                 R"(job=42 model="llama 3" note="say \\"hi\\"" empty="")")))
      << lines[0];
}

TEST_F(LoggingTest, JsonLinesParseWithTheStandardMembers) {
  const std::string path = InitToFile("json");
  GetLogger("worker.compile")->info("compiled {} kernels", 3);
  GetLogger("worker.judge")->warn("tolerance exceeded");
  const std::vector<std::string> lines = ReadLines(path);
  ASSERT_THAT(lines, SizeIs(2));
  const auto first = StrictJsonObjectParser::Parse(lines[0]);
  const auto second = StrictJsonObjectParser::Parse(lines[1]);
  ASSERT_TRUE(first.has_value()) << lines[0];
  ASSERT_TRUE(second.has_value()) << lines[1];
  EXPECT_EQ(first->at("level"), "info");
  EXPECT_EQ(first->at("logger"), "worker.compile");
  EXPECT_EQ(first->at("msg"), "compiled 3 kernels");
  EXPECT_EQ(second->at("level"), "warning");
  EXPECT_EQ(second->at("logger"), "worker.judge");
  EXPECT_THAT(*first, SizeIs(4));
}

TEST_F(LoggingTest, JsonEscapesQuotesNewlinesBackslashesAndControlCharacters) {
  const std::string path = InitToFile("json");
  const std::string message = "say \"hi\"\nback\\slash\ttab \x01 bell\x07 \x1f end";
  GetLogger("worker")->info(message);
  const std::vector<std::string> lines = ReadLines(path);
  ASSERT_THAT(lines, SizeIs(1));
  EXPECT_THAT(lines[0],
              HasSubstr(R"("msg":"say \"hi\"\nback\\slash\ttab \u0001 bell\u0007 \u001f end")"));
  const auto parsed = StrictJsonObjectParser::Parse(lines[0]);
  ASSERT_TRUE(parsed.has_value()) << lines[0];
  EXPECT_EQ(parsed->at("msg"), message);
}

TEST_F(LoggingTest, JsonKeepsValidUtf8AndReplacesInvalidBytes) {
  const std::string path = InitToFile("json");
  // "é" and "€" are valid; 0xff, a lone continuation byte, an overlong '/' and a surrogate are not.
  GetLogger("worker")->info("caf\xc3\xa9 \xe2\x82\xac \xff \x80 \xc0\xaf \xed\xa0\x80!");
  const std::vector<std::string> lines = ReadLines(path);
  ASSERT_THAT(lines, SizeIs(1));
  const std::string replacement = "\xef\xbf\xbd";
  EXPECT_THAT(lines[0], HasSubstr(absl::StrCat("\"msg\":\"caf\xc3\xa9 \xe2\x82\xac ", replacement,
                                               " ", replacement, " ", replacement, replacement, " ",
                                               replacement, replacement, replacement, "!\"")));
}

TEST_F(LoggingTest, JsonTimestampIsRfc3339UtcWithMilliseconds) {
  // Under a local zone far from UTC, a timestamp written in local time would be hours off.
  setenv("TZ", "Asia/Kathmandu", 1);
  tzset();
  const std::string path = InitToFile("json");
  GetLogger("worker")->info("tick");
  unsetenv("TZ");
  tzset();
  const std::vector<std::string> lines = ReadLines(path);
  ASSERT_THAT(lines, SizeIs(1));
  const auto parsed = StrictJsonObjectParser::Parse(lines[0]);
  ASSERT_TRUE(parsed.has_value()) << lines[0];
  const std::string& ts = parsed->at("ts");
  EXPECT_TRUE(std::regex_match(ts, std::regex(R"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z)"))) << ts;
  absl::Time logged;
  std::string error;
  ASSERT_TRUE(absl::ParseTime(absl::RFC3339_full, ts, &logged, &error)) << error;
  EXPECT_LT(absl::AbsDuration(absl::Now() - logged), absl::Minutes(1)) << ts;
}

TEST_F(LoggingTest, JsonFieldsBecomeMembersAndReservedKeysAreRenamed) {
  const std::string path = InitToFile("json");
  LogWithFields(*GetLogger("coordinator"), spdlog::level::info, "leased",
                {{"job", 42}, {"ratio", 1.5}, {"msg", "\"quoted\""}});
  const std::vector<std::string> lines = ReadLines(path);
  ASSERT_THAT(lines, SizeIs(1));
  const auto parsed = StrictJsonObjectParser::Parse(lines[0]);
  ASSERT_TRUE(parsed.has_value()) << lines[0];
  EXPECT_EQ(parsed->at("msg"), "leased");
  EXPECT_EQ(parsed->at("job"), "42");
  EXPECT_EQ(parsed->at("ratio"), "1.5");
  EXPECT_EQ(parsed->at("_msg"), "\"quoted\"");
}

TEST_F(LoggingTest, FieldsBelongToTheirOwnRecordOnly) {
  const std::string path = InitToFile("json");
  auto logger = GetLogger("coordinator");
  LogWithFields(*logger, spdlog::level::info, "with", {{"job", 1}});
  logger->info("without");
  const std::vector<std::string> lines = ReadLines(path);
  ASSERT_THAT(lines, SizeIs(2));
  EXPECT_THAT(StrictJsonObjectParser::Parse(lines[1]).value(), SizeIs(4)) << lines[1];
}

TEST_F(LoggingTest, InitAgainMovesExistingLoggersToTheNewOutput) {
  auto logger = GetLogger("worker");
  const std::string first = InitToFile("text");
  logger->info("one");
  const std::string second = InitToFile("json");
  logger->info("two");
  EXPECT_THAT(ReadLines(first), ElementsAre(HasSubstr("worker: one")));
  EXPECT_THAT(ReadLines(second), ElementsAre(HasSubstr("\"msg\":\"two\"")));
}

TEST_F(LoggingTest, SpdlogDefaultLoggerIsNamedForge) {
  const std::string path = InitToFile("json");
  spdlog::info("from the default logger");
  EXPECT_THAT(ReadLines(path),
              ElementsAre(HasSubstr(R"("logger":"forge","msg":"from the default logger")")));
}

}  // namespace
}  // namespace forge
