// Process-wide logging for Forge's executables, on spdlog.
//
// Two formats, shown for one record with the fields job=42 and model="llama 3":
//   text: 2024-05-01T12:34:56.789Z info coordinator: job accepted job=42 model="llama 3"
//   json: {"ts":"2024-05-01T12:34:56.789Z","level":"info","logger":"coordinator",
//          "msg":"job accepted","job":"42","model":"llama 3"}   (on one line)
// JSON lines hold one object per record: ts (RFC 3339, UTC, milliseconds), level, logger (the
// component), msg, then the record's fields, all as JSON strings. Bytes that are not valid UTF-8
// become U+FFFD so every line stays valid JSON.
//
// Loggers are synchronous: a record is formatted and written on the thread that logs it.
#ifndef FORGE_COMMON_LOGGING_LOGGING_H_
#define FORGE_COMMON_LOGGING_LOGGING_H_

#include <initializer_list>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/config/config.h"
#include "spdlog/logger.h"

namespace forge {

struct LogOptions {
  // trace, debug, info, warn (or warning), error (or err), critical, or off.
  std::string level = "info";
  // "text" or "json".
  std::string format = "text";
  // "stderr", or the path of a file to append to (missing parent directories are created).
  std::string output = "stderr";
};

// Sends every Forge logger, and spdlog's default logger (spdlog::info(...)), to options.output in
// options.format, dropping records below options.level. Records are flushed as they are written,
// so a crash loses none. On error nothing changes and the status names the bad value. Call it at
// startup before other threads log; calling it again switches every existing logger over.
absl::Status InitLogging(const LogOptions& options);

// The log.level, log.format and log.output keys every binary takes, and their values as
// LogOptions.
ConfigSchema& AddLogOptions(ConfigSchema& schema);
LogOptions LogOptionsFrom(const Config& config);

// The logger of one component ("coordinator", "worker.compile"), created on first use. Its name is
// the "logger" of each record.
std::shared_ptr<spdlog::logger> GetLogger(absl::string_view component);

// A key/value attached to one record. Values of any type absl::StrCat takes are written as strings.
struct LogField {
  LogField(absl::string_view key, const absl::AlphaNum& value) : key(key), value(value.Piece()) {}
  std::string key;
  std::string value;
};

// Logs `message` with `fields`: the text format appends key=value pairs, the JSON format adds them
// as members (a key that collides with ts, level, logger or msg gets a leading underscore).
void LogWithFields(spdlog::logger& logger, spdlog::level::level_enum level,
                   absl::string_view message, std::initializer_list<LogField> fields);

}  // namespace forge

#endif  // FORGE_COMMON_LOGGING_LOGGING_H_
