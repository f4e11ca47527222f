#include "common/logging/logging.h"

#include <mutex>
#include <utility>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/text/utf8.h"
#include "spdlog/pattern_formatter.h"
#include "spdlog/sinks/basic_file_sink.h"
#include "spdlog/sinks/dist_sink.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace forge {
namespace {

// The fields of the record being logged on this thread. Loggers are synchronous, so the formatter
// runs inside LogWithFields' log call, on the same thread, and reads them from here: spdlog 1.10
// records carry no fields of their own.
thread_local absl::Span<const LogField> current_fields;

// Every Forge logger writes here; InitLogging swaps what it forwards to. Until then: stderr.
const std::shared_ptr<spdlog::sinks::dist_sink_mt>& RootSink() {
  static const auto sink = std::make_shared<spdlog::sinks::dist_sink_mt>(
      std::vector<spdlog::sink_ptr>{std::make_shared<spdlog::sinks::stderr_sink_mt>()});
  return sink;
}

absl::string_view ToAbsl(spdlog::string_view_t text) { return {text.data(), text.size()}; }

void Append(absl::string_view text, spdlog::memory_buf_t& out) {
  out.append(text.data(), text.data() + text.size());
}

// Appends `text` as a JSON string (RFC 8259), quotes included.
void AppendJsonString(absl::string_view text, spdlog::memory_buf_t& out) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.push_back('"');
  std::size_t i = 0;
  while (i < text.size()) {
    const auto c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      const std::size_t length = Utf8SequenceLength(text.substr(i));
      Append(length == 0 ? kUtf8ReplacementCharacter : text.substr(i, length), out);
      i += length == 0 ? 1 : length;
      continue;
    }
    switch (c) {
      case '"':
        Append("\\\"", out);
        break;
      case '\\':
        Append("\\\\", out);
        break;
      case '\b':
        Append("\\b", out);
        break;
      case '\f':
        Append("\\f", out);
        break;
      case '\n':
        Append("\\n", out);
        break;
      case '\r':
        Append("\\r", out);
        break;
      case '\t':
        Append("\\t", out);
        break;
      default:
        if (c < 0x20) {
          const char escape[] = {'\\', 'u', '0', '0', kHex[c >> 4], kHex[c & 0xf]};
          Append(absl::string_view(escape, sizeof(escape)), out);
        } else {
          out.push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out.push_back('"');
}

void AppendJsonMember(absl::string_view key, absl::string_view value, spdlog::memory_buf_t& out) {
  AppendJsonString(key, out);
  out.push_back(':');
  AppendJsonString(value, out);
}

// One JSON object per record, one record per line.
class JsonLinesFormatter final : public spdlog::formatter {
 public:
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    dest.push_back('{');
    AppendJsonMember(
        "ts",
        absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::FromChrono(msg.time), absl::UTCTimeZone()),
        dest);
    dest.push_back(',');
    AppendJsonMember("level", ToAbsl(spdlog::level::to_string_view(msg.level)), dest);
    dest.push_back(',');
    AppendJsonMember("logger", ToAbsl(msg.logger_name), dest);
    dest.push_back(',');
    AppendJsonMember("msg", ToAbsl(msg.payload), dest);
    for (const LogField& field : current_fields) {
      dest.push_back(',');
      const bool reserved =
          field.key == "ts" || field.key == "level" || field.key == "logger" || field.key == "msg";
      AppendJsonMember(reserved ? absl::StrCat("_", field.key) : field.key, field.value, dest);
    }
    Append("}\n", dest);
  }

  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonLinesFormatter>();
  }
};

// The %* flag of the text pattern: " key=value" per field, quoting values that hold spaces,
// quotes, '=' or control characters so the line stays splittable.
class TextFieldsFlag final : public spdlog::custom_flag_formatter {
 public:
  void format(const spdlog::details::log_msg&, const std::tm&,
              spdlog::memory_buf_t& dest) override {
    for (const LogField& field : current_fields) {
      dest.push_back(' ');
      Append(field.key, dest);
      dest.push_back('=');
      if (NeedsQuotes(field.value)) {
        Append(absl::StrCat("\"", absl::Utf8SafeCEscape(field.value), "\""), dest);
      } else {
        Append(field.value, dest);
      }
    }
  }

  std::unique_ptr<spdlog::custom_flag_formatter> clone() const override {
    return std::make_unique<TextFieldsFlag>();
  }

 private:
  static bool NeedsQuotes(absl::string_view value) {
    if (value.empty()) return true;
    for (char c : value) {
      if (static_cast<unsigned char>(c) <= ' ' || c == '"' || c == '=' || c == '\\' || c == 0x7f) {
        return true;
      }
    }
    return false;
  }
};

std::unique_ptr<spdlog::formatter> MakeTextFormatter() {
  auto formatter = std::make_unique<spdlog::pattern_formatter>(spdlog::pattern_time_type::utc);
  formatter->add_flag<TextFieldsFlag>('*').set_pattern("%Y-%m-%dT%H:%M:%S.%eZ %l %n: %v%*");
  return formatter;
}

}  // namespace

absl::Status InitLogging(const LogOptions& options) {
  const spdlog::level::level_enum level = spdlog::level::from_str(options.level);
  // from_str maps every unknown name to "off".
  if (level == spdlog::level::off && options.level != "off") {
    return absl::InvalidArgumentError(
        absl::StrCat("log level \"", absl::CEscape(options.level),
                     "\" is not one of: trace, debug, info, warn, error, critical, off"));
  }
  std::unique_ptr<spdlog::formatter> formatter;
  if (options.format == "text") {
    formatter = MakeTextFormatter();
  } else if (options.format == "json") {
    formatter = std::make_unique<JsonLinesFormatter>();
  } else {
    return absl::InvalidArgumentError(absl::StrCat("log format \"", absl::CEscape(options.format),
                                                   "\" is not one of: text, json"));
  }
  spdlog::sink_ptr output;
  if (options.output == "stderr") {
    output = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  } else {
    try {
      output = std::make_shared<spdlog::sinks::basic_file_sink_mt>(options.output);
    } catch (const spdlog::spdlog_ex& error) {
      return absl::InvalidArgumentError(absl::StrCat("log output \"", absl::CEscape(options.output),
                                                     "\" cannot be opened: ", error.what()));
    }
  }

  output->set_formatter(formatter->clone());
  RootSink()->set_sinks({std::move(output)});
  // The registry hands its formatter to every logger it initializes, so it must be ours too.
  spdlog::set_formatter(std::move(formatter));
  spdlog::set_level(level);
  spdlog::flush_on(spdlog::level::trace);
  spdlog::set_default_logger(GetLogger("forge"));
  return absl::OkStatus();
}

std::shared_ptr<spdlog::logger> GetLogger(absl::string_view component) {
  static std::mutex mutex;
  const std::lock_guard<std::mutex> lock(mutex);
  const std::string name(component);
  if (std::shared_ptr<spdlog::logger> existing = spdlog::get(name)) return existing;
  auto logger = std::make_shared<spdlog::logger>(name, RootSink());
  spdlog::initialize_logger(logger);
  return logger;
}

void LogWithFields(spdlog::logger& logger, spdlog::level::level_enum level,
                   absl::string_view message, std::initializer_list<LogField> fields) {
  if (!logger.should_log(level)) return;
  current_fields = absl::MakeConstSpan(fields.begin(), fields.size());
  logger.log(level, spdlog::string_view_t(message.data(), message.size()));
  current_fields = {};
}

ConfigSchema& AddLogOptions(ConfigSchema& schema) {
  return schema
      .Enum("log.level", {"trace", "debug", "info", "warn", "error", "critical", "off"}, "info",
            "Lowest level logged.")
      .Enum("log.format", {"text", "json"}, "text", "Log line format.")
      .String("log.output", "stderr", "\"stderr\" or a file to append the log to.");
}

LogOptions LogOptionsFrom(const Config& config) {
  return {.level = config.GetString("log.level"),
          .format = config.GetString("log.format"),
          .output = config.GetString("log.output")};
}

}  // namespace forge
