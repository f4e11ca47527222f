#include "common/config/config.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace forge {
namespace {

using Key = ConfigSchema::Key;

std::string Quote(absl::string_view text) {
  return absl::StrCat("\"", absl::Utf8SafeCHexEscape(text), "\"");
}

// Letters, digits, '_', '-' and '.', without empty dot-separated parts.
bool IsValidKeyName(absl::string_view name) {
  if (name.empty() || name.front() == '.' || name.back() == '.' || absl::StrContains(name, "..")) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    return absl::ascii_isalnum(c) || c == '_' || c == '-' || c == '.';
  });
}

std::string EnvName(absl::string_view key) {
  std::string name = absl::StrCat("FORGE_", absl::AsciiStrToUpper(key));
  std::replace_if(
      name.begin(), name.end(), [](char c) { return c == '.' || c == '-'; }, '_');
  return name;
}

absl::string_view TypeName(ConfigType type) {
  switch (type) {
    case ConfigType::kString:
      return "string";
    case ConfigType::kInt64:
      return "int64";
    case ConfigType::kDouble:
      return "double";
    case ConfigType::kBool:
      return "bool";
    case ConfigType::kDuration:
      return "duration";
    case ConfigType::kEnum:
      return "enum";
    case ConfigType::kStringList:
      return "string list";
  }
  return "unknown";
}

std::string FormatValue(const ConfigValue& value) {
  struct Formatter {
    std::string operator()(const std::string& v) const { return Quote(v); }
    std::string operator()(std::int64_t v) const { return absl::StrCat(v); }
    std::string operator()(double v) const { return absl::StrCat(v); }
    std::string operator()(bool v) const { return v ? "true" : "false"; }
    std::string operator()(absl::Duration v) const { return absl::FormatDuration(v); }
    std::string operator()(const std::vector<std::string>& v) const {
      return absl::StrCat("[", absl::StrJoin(v, ", ", [](std::string* out, const std::string& s) {
                            absl::StrAppend(out, Quote(s));
                          }), "]");
    }
  };
  return std::visit(Formatter{}, value);
}

std::optional<bool> ParseBool(absl::string_view text) {
  const std::string lower = absl::AsciiStrToLower(text);
  if (lower == "true" || lower == "yes" || lower == "on" || lower == "1") return true;
  if (lower == "false" || lower == "no" || lower == "off" || lower == "0") return false;
  return std::nullopt;
}

// Why `value` is not acceptable for `key` (out of range, not allowed), or nullopt if it is.
// Shared by the schema's defaults and the values read from the sources.
std::optional<std::string> ConstraintViolation(const Key& key, const ConfigValue& value) {
  switch (key.type) {
    case ConfigType::kInt64: {
      const std::int64_t v = std::get<std::int64_t>(value);
      if (v < key.range.min) return absl::StrCat("below the minimum ", key.range.min);
      if (v > key.range.max) return absl::StrCat("above the maximum ", key.range.max);
      return std::nullopt;
    }
    case ConfigType::kDouble:
      if (!std::isfinite(std::get<double>(value))) return "not a finite number";
      return std::nullopt;
    case ConfigType::kDuration: {
      const absl::Duration v = std::get<absl::Duration>(value);
      if (v == absl::InfiniteDuration() || v == -absl::InfiniteDuration()) {
        return "not a finite duration";
      }
      if (v < absl::ZeroDuration()) return "a negative duration";
      return std::nullopt;
    }
    case ConfigType::kEnum:
      if (std::find(key.allowed.begin(), key.allowed.end(), std::get<std::string>(value)) ==
          key.allowed.end()) {
        return absl::StrCat("not one of: ", absl::StrJoin(key.allowed, ", "));
      }
      return std::nullopt;
    case ConfigType::kString:
    case ConfigType::kBool:
    case ConfigType::kStringList:
      return std::nullopt;
  }
  return std::nullopt;
}

// Parses `text` as a value of `key`; the error's message says why it is not one.
absl::StatusOr<ConfigValue> ParseValue(const Key& key, absl::string_view text) {
  ConfigValue value;
  switch (key.type) {
    case ConfigType::kString:
    case ConfigType::kEnum:
      value = std::string(text);
      break;
    case ConfigType::kInt64: {
      std::int64_t v;
      if (!absl::SimpleAtoi(text, &v)) return absl::InvalidArgumentError("not an integer");
      value = v;
      break;
    }
    case ConfigType::kDouble: {
      double v;
      if (!absl::SimpleAtod(text, &v)) return absl::InvalidArgumentError("not a number");
      value = v;
      break;
    }
    case ConfigType::kBool: {
      const std::optional<bool> v = ParseBool(text);
      if (!v) return absl::InvalidArgumentError("not a bool (true/false, yes/no, on/off, 1/0)");
      value = *v;
      break;
    }
    case ConfigType::kDuration: {
      absl::Duration v;
      if (!absl::ParseDuration(text, &v)) {
        return absl::InvalidArgumentError(
            "not a duration (a number with a unit: 500ms, 2s, 1m, 1h30m)");
      }
      value = v;
      break;
    }
    case ConfigType::kStringList:
      value = std::vector<std::string>(absl::StrSplit(text, ',', absl::SkipEmpty()));
      break;
  }
  if (std::optional<std::string> violation = ConstraintViolation(key, value)) {
    return absl::InvalidArgumentError(*violation);
  }
  return value;
}

// The text of a file value: up to a '#' comment, or a double-quoted string with escapes.
absl::StatusOr<std::string> ParseFileValue(absl::string_view raw) {
  if (raw.empty() || raw.front() != '"') {
    return std::string(absl::StripTrailingAsciiWhitespace(raw.substr(0, raw.find('#'))));
  }
  std::string value;
  for (std::size_t i = 1; i < raw.size(); ++i) {
    if (raw[i] == '"') {
      const absl::string_view rest = absl::StripLeadingAsciiWhitespace(raw.substr(i + 1));
      if (!rest.empty() && rest.front() != '#') {
        return absl::InvalidArgumentError(
            absl::StrCat("unexpected text after the closing quote: ", Quote(rest)));
      }
      return value;
    }
    if (raw[i] != '\\') {
      value.push_back(raw[i]);
      continue;
    }
    if (++i == raw.size()) break;
    switch (raw[i]) {
      case '"':
        value.push_back('"');
        break;
      case '\\':
        value.push_back('\\');
        break;
      case 'n':
        value.push_back('\n');
        break;
      case 't':
        value.push_back('\t');
        break;
      case 'r':
        value.push_back('\r');
        break;
      default:
        return absl::InvalidArgumentError(
            absl::StrCat("unknown escape \\", absl::string_view(&raw[i], 1), " in a quoted value"));
    }
  }
  return absl::InvalidArgumentError("unterminated quoted value");
}

// Optimal string alignment distance: edits, with swapping two neighbours counting as one edit.
std::size_t EditDistance(absl::string_view a, absl::string_view b) {
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + substitution});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::vector<std::string> ProcessEnvironment() {
  std::vector<std::string> entries;
  for (char** entry = environ; *entry != nullptr; ++entry) entries.emplace_back(*entry);
  return entries;
}

[[noreturn]] void DieOfMisuse(const std::string& message) {
  std::fprintf(stderr, "%s\n", message.c_str());
  std::abort();
}

}  // namespace

ConfigSchema& ConfigSchema::Add(Key key) {
  key.env_name = EnvName(key.name);
  if (!IsValidKeyName(key.name)) {
    errors_.push_back(absl::StrCat("config schema: invalid key name ", Quote(key.name)));
  }
  for (const Key& existing : keys_) {
    if (std::find(existing.aliases.begin(), existing.aliases.end(), key.name) !=
        existing.aliases.end()) {
      errors_.push_back(absl::StrCat("config schema: key ", Quote(key.name),
                                     " is already an alias of ", Quote(existing.name)));
    }
    if (existing.name == key.name) {
      errors_.push_back(absl::StrCat("config schema: key ", Quote(key.name), " is declared twice"));
    } else if (existing.env_name == key.env_name) {
      errors_.push_back(absl::StrCat("config schema: keys ", Quote(existing.name), " and ",
                                     Quote(key.name), " both read ", key.env_name));
    }
  }
  if (std::optional<std::string> violation = ConstraintViolation(key, key.default_value)) {
    errors_.push_back(absl::StrCat("config schema: default of ", key.name, " (",
                                   FormatValue(key.default_value), ") is ", *violation));
  }
  keys_.push_back(std::move(key));
  return *this;
}

ConfigSchema& ConfigSchema::String(std::string key, std::string default_value, std::string help) {
  return Add({.name = std::move(key),
              .type = ConfigType::kString,
              .default_value = std::move(default_value),
              .help = std::move(help)});
}

ConfigSchema& ConfigSchema::Int64(std::string key, std::int64_t default_value, std::string help,
                                  Int64Range range) {
  if (range.min > range.max) {
    errors_.push_back(absl::StrCat("config schema: ", key, " has an empty range [", range.min, ", ",
                                   range.max, "]"));
  }
  return Add({.name = std::move(key),
              .type = ConfigType::kInt64,
              .default_value = default_value,
              .help = std::move(help),
              .range = range});
}

ConfigSchema& ConfigSchema::Double(std::string key, double default_value, std::string help) {
  return Add({.name = std::move(key),
              .type = ConfigType::kDouble,
              .default_value = default_value,
              .help = std::move(help)});
}

ConfigSchema& ConfigSchema::Bool(std::string key, bool default_value, std::string help) {
  return Add({.name = std::move(key),
              .type = ConfigType::kBool,
              .default_value = default_value,
              .help = std::move(help)});
}

ConfigSchema& ConfigSchema::Duration(std::string key, absl::Duration default_value,
                                     std::string help) {
  return Add({.name = std::move(key),
              .type = ConfigType::kDuration,
              .default_value = default_value,
              .help = std::move(help)});
}

ConfigSchema& ConfigSchema::Enum(std::string key, std::vector<std::string> allowed,
                                 std::string default_value, std::string help) {
  return Add({.name = std::move(key),
              .type = ConfigType::kEnum,
              .default_value = std::move(default_value),
              .help = std::move(help),
              .allowed = std::move(allowed)});
}

ConfigSchema& ConfigSchema::StringList(std::string key, std::string help) {
  return Add({.name = std::move(key),
              .type = ConfigType::kStringList,
              .default_value = std::vector<std::string>{},
              .help = std::move(help)});
}

ConfigSchema::Key* ConfigSchema::LastKey(absl::string_view modifier) {
  if (keys_.empty()) {
    errors_.push_back(absl::StrCat("config schema: ", modifier, " before any key"));
    return nullptr;
  }
  return &keys_.back();
}

ConfigSchema& ConfigSchema::Alias(std::string old_name) {
  Key* key = LastKey("Alias");
  if (key == nullptr) return *this;
  if (!IsValidKeyName(old_name)) {
    errors_.push_back(absl::StrCat("config schema: invalid alias ", Quote(old_name)));
    return *this;
  }
  for (const Key& existing : keys_) {
    if (existing.name == old_name ||
        std::find(existing.aliases.begin(), existing.aliases.end(), old_name) !=
            existing.aliases.end()) {
      errors_.push_back(absl::StrCat("config schema: alias ", Quote(old_name), " of ",
                                     Quote(key->name), " is already taken by ",
                                     Quote(existing.name)));
      return *this;
    }
  }
  key->aliases.push_back(std::move(old_name));
  return *this;
}

ConfigSchema& ConfigSchema::ShortFlag(char letter) {
  Key* key = LastKey("ShortFlag");
  if (key == nullptr) return *this;
  if (!absl::ascii_isalnum(letter)) {
    errors_.push_back(absl::StrCat("config schema: short flag of ", Quote(key->name),
                                   " is not a letter or digit"));
  }
  for (const Key& existing : keys_) {
    if (existing.short_flag == letter) {
      errors_.push_back(absl::StrCat("config schema: short flag -", std::string(1, letter),
                                     " of ", Quote(key->name), " is already taken by ",
                                     Quote(existing.name)));
    }
  }
  key->short_flag = letter;
  return *this;
}

ConfigSchema& ConfigSchema::FlagOnly() {
  if (Key* key = LastKey("FlagOnly"); key != nullptr) key->flag_only = true;
  return *this;
}

std::string ConfigSchema::HelpText() const {
  constexpr std::int64_t kLowest = std::numeric_limits<std::int64_t>::min();
  constexpr std::int64_t kHighest = std::numeric_limits<std::int64_t>::max();
  std::string text;
  for (const Key& key : keys_) {
    std::string type(TypeName(key.type));
    if (key.type == ConfigType::kStringList) {
      type = "string, repeatable";
    } else if (key.type == ConfigType::kEnum) {
      type = absl::StrCat("one of ", absl::StrJoin(key.allowed, "|"));
    } else if (key.type == ConfigType::kInt64 && key.range.min != kLowest &&
               key.range.max != kHighest) {
      absl::StrAppend(&type, " in [", key.range.min, ", ", key.range.max, "]");
    } else if (key.type == ConfigType::kInt64 && key.range.min != kLowest) {
      absl::StrAppend(&type, " >= ", key.range.min);
    } else if (key.type == ConfigType::kInt64 && key.range.max != kHighest) {
      absl::StrAppend(&type, " <= ", key.range.max);
    }
    absl::StrAppend(&text, key.name, " (", type, "; default ", FormatValue(key.default_value),
                    key.flag_only ? "; flag only" : absl::StrCat("; env ", key.env_name), ")\n    ",
                    key.help, "\n");
    if (!key.aliases.empty()) {
      absl::StrAppend(&text, "    Deprecated spelling: ", absl::StrJoin(key.aliases, ", "), "\n");
    }
  }
  return text;
}

// Reads the sources in order of precedence, each overriding what came before, and collects every
// problem on the way.
class ConfigLoader {
 public:
  explicit ConfigLoader(const ConfigSchema& schema) : schema_(schema) {}

  absl::StatusOr<Config> Load(const ConfigSources& sources) {
    // With a broken schema the sources cannot be read reliably; report the schema alone.
    if (!schema_.errors_.empty())
      return absl::InvalidArgumentError(absl::StrJoin(schema_.errors_, "\n"));
    for (const Key& key : schema_.keys()) {
      keys_by_name_[key.name] = &key;
      for (const std::string& alias : key.aliases) keys_by_alias_[alias] = &key;
      if (key.short_flag != 0) keys_by_short_flag_[key.short_flag] = &key;
      config_.entries_[key.name] = {key.type, key.default_value, "default"};
    }
    if (!sources.file.empty()) ReadFile(sources.file);
    ReadEnvironment(sources.environment ? *sources.environment : ProcessEnvironment());
    ReadFlags(sources.args);
    if (!errors_.empty()) return absl::InvalidArgumentError(absl::StrJoin(errors_, "\n"));
    return std::move(config_);
  }

 private:
  // The key `name` names, itself or by an alias (then `*alias` is set); nullptr if none.
  const Key* FindKey(absl::string_view name, bool* alias) const {
    *alias = false;
    if (auto it = keys_by_name_.find(name); it != keys_by_name_.end()) return it->second;
    auto it = keys_by_alias_.find(name);
    if (it == keys_by_alias_.end()) return nullptr;
    *alias = true;
    return it->second;
  }

  // " (did you mean PREFIX<key>?)" for the declared key closest to a misspelt one, if it is close
  // enough to be the likely intent; else "".
  std::string Suggestion(absl::string_view name, absl::string_view prefix,
                         absl::string_view quote) const {
    std::vector<std::string> names;
    for (const Key& key : schema_.keys()) names.push_back(key.name);
    std::optional<std::string> closest = ClosestName(name, names);
    if (!closest.has_value()) return "";
    return absl::StrCat(" (did you mean ", quote, prefix, *closest, quote, "?)");
  }

  void Deprecated(absl::string_view used, absl::string_view instead) {
    config_.warnings_.push_back(absl::StrCat("config: ", used, " is deprecated, write ", instead,
                                             " (the old name goes in the next release)"));
  }

  void Set(const Key& key, absl::string_view text, std::string origin) {
    absl::StatusOr<ConfigValue> value =
        key.type == ConfigType::kStringList && absl::StartsWith(origin, "flag ")
            ? FlagListValue(key, text)
            : ParseValue(key, text);
    if (!value.ok()) {
      errors_.push_back(absl::StrCat("config: ", key.name, " = ", Quote(text), " (from ", origin,
                                     "): ", value.status().message()));
      return;
    }
    Config::Entry& entry = config_.entries_[key.name];
    entry.value = *std::move(value);
    entry.origin = std::move(origin);
  }

  // A string list's value after one more flag: the flag's text added to those of the flags before
  // it; the first flag replaces the values of the file and the environment.
  ConfigValue FlagListValue(const Key& key, absl::string_view text) {
    std::vector<std::string> values;
    if (!lists_set_by_flags_.insert(key.name).second) {
      values = std::get<std::vector<std::string>>(config_.entries_[key.name].value);
    }
    values.emplace_back(text);
    return values;
  }

  void ReadFile(const std::string& path) {
    std::ifstream in(path);
    if (!in) {
      errors_.push_back(absl::StrCat("config: cannot read config file ", Quote(path), ": ",
                                     std::strerror(errno)));
      return;
    }
    std::string section;
    // After a malformed [section] header the keys below it cannot be named; skip them.
    bool in_broken_section = false;
    absl::flat_hash_map<std::string, int> first_line_of_key;
    int line_number = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_number;
      const std::string where = absl::StrCat(path, ":", line_number);
      const absl::string_view text = absl::StripAsciiWhitespace(line);
      if (text.empty() || text.front() == '#') continue;

      if (text.front() == '[') {
        const std::size_t close = text.find(']');
        const absl::string_view name = close == absl::string_view::npos
                                           ? ""
                                           : absl::StripAsciiWhitespace(text.substr(1, close - 1));
        const absl::string_view rest =
            close == absl::string_view::npos
                ? ""
                : absl::StripLeadingAsciiWhitespace(text.substr(close + 1));
        in_broken_section = !IsValidKeyName(name) || (!rest.empty() && rest.front() != '#');
        if (in_broken_section) {
          errors_.push_back(
              absl::StrCat("config: ", where, ": invalid section header ", Quote(text)));
        } else {
          section = std::string(name);
        }
        continue;
      }
      if (in_broken_section) continue;

      const std::size_t equals = text.find('=');
      if (equals == absl::string_view::npos) {
        errors_.push_back(
            absl::StrCat("config: ", where, ": expected key = value, got ", Quote(text)));
        continue;
      }
      const absl::string_view key_text = absl::StripAsciiWhitespace(text.substr(0, equals));
      if (!IsValidKeyName(key_text)) {
        errors_.push_back(absl::StrCat("config: ", where, ": invalid key ", Quote(key_text)));
        continue;
      }
      absl::StatusOr<std::string> value =
          ParseFileValue(absl::StripLeadingAsciiWhitespace(text.substr(equals + 1)));
      if (!value.ok()) {
        errors_.push_back(absl::StrCat("config: ", where, ": ", value.status().message()));
        continue;
      }
      const std::string name =
          section.empty() ? std::string(key_text) : absl::StrCat(section, ".", key_text);
      bool alias = false;
      const Key* key = FindKey(name, &alias);
      if (key == nullptr) {
        errors_.push_back(absl::StrCat("config: unknown key ", Quote(name), " in ", where,
                                       Suggestion(name, "", "\"")));
        continue;
      }
      if (key->flag_only) {
        errors_.push_back(absl::StrCat("config: ", Quote(name), " in ", where,
                                       " can only be given as a flag (--", key->name, ")"));
        continue;
      }
      if (alias) Deprecated(absl::StrCat(name, " in ", where), key->name);
      const auto [first, inserted] = first_line_of_key.emplace(key->name, line_number);
      if (!inserted) {
        errors_.push_back(absl::StrCat("config: duplicate key ", Quote(key->name), " in ", where,
                                       " (first set in ", path, ":", first->second, ")"));
        continue;
      }
      Set(*key, *value, absl::StrCat("file ", where));
    }
  }

  void ReadEnvironment(const std::vector<std::string>& environment) {
    // An alias's variable, where it differs from the key's, is read before the key's, so that
    // the new spelling wins when both are set.
    absl::flat_hash_map<std::string, const Key*> keys_by_env_name;
    absl::flat_hash_map<std::string, const Key*> keys_by_alias_env_name;
    for (const Key& key : schema_.keys()) {
      if (key.flag_only) continue;
      keys_by_env_name[key.env_name] = &key;
      for (const std::string& alias : key.aliases) {
        if (EnvName(alias) != key.env_name) keys_by_alias_env_name[EnvName(alias)] = &key;
      }
    }
    for (const bool aliases : {true, false}) {
      const auto& keys = aliases ? keys_by_alias_env_name : keys_by_env_name;
      for (const std::string& entry : environment) {
        const std::size_t equals = entry.find('=');
        if (equals == std::string::npos) continue;
        const std::string name = entry.substr(0, equals);
        auto it = keys.find(name);
        if (it == keys.end()) continue;
        if (aliases) Deprecated(name, it->second->env_name);
        Set(*it->second, absl::string_view(entry).substr(equals + 1), absl::StrCat("env ", name));
      }
    }
  }

  void ReadFlags(const std::vector<std::string>& args) {
    bool only_positional = false;
    for (std::size_t i = 0; i < args.size(); ++i) {
      const std::string& arg = args[i];
      if (only_positional || arg == "-" || !absl::StartsWith(arg, "-")) {
        config_.positional_args_.push_back(arg);
        continue;
      }
      if (arg == "--") {
        only_positional = true;
        continue;
      }
      const Key* key = nullptr;
      std::string flag;  // as written, without a value
      std::optional<std::string> inline_value;
      if (!absl::StartsWith(arg, "--")) {
        auto short_key = arg.size() == 2 ? keys_by_short_flag_.find(arg[1])
                                         : keys_by_short_flag_.end();
        if (short_key == keys_by_short_flag_.end()) {
          errors_.push_back(absl::StrCat("config: unknown flag ", arg,
                                         " (flags are written --key=value or --key value)"));
          continue;
        }
        key = short_key->second;
        flag = arg;
      } else {
        const absl::string_view body = absl::string_view(arg).substr(2);
        const std::size_t equals = body.find('=');
        const absl::string_view name = body.substr(0, equals);
        flag = absl::StrCat("--", name);
        if (equals != absl::string_view::npos) inline_value = std::string(body.substr(equals + 1));
        bool alias = false;
        key = FindKey(name, &alias);
        if (key == nullptr) {
          errors_.push_back(
              absl::StrCat("config: unknown flag ", flag, Suggestion(name, "--", "")));
          continue;
        }
        if (alias) Deprecated(flag, absl::StrCat("--", key->name));
      }
      std::string value;
      if (inline_value.has_value()) {
        value = *std::move(inline_value);
      } else if (key->type == ConfigType::kBool) {
        // "--dry-run" alone means true; "--dry-run false" takes the next argument only if it is a
        // bool.
        const bool next_is_bool = i + 1 < args.size() && ParseBool(args[i + 1]).has_value();
        value = next_is_bool ? args[++i] : "true";
      } else if (i + 1 < args.size() && !absl::StartsWith(args[i + 1], "--")) {
        value = args[++i];
      } else {
        errors_.push_back(absl::StrCat("config: flag ", flag, " needs a value"));
        continue;
      }
      Set(*key, value, absl::StrCat("flag ", flag));
    }
  }

  const ConfigSchema& schema_;
  absl::flat_hash_map<std::string, const Key*> keys_by_name_;
  absl::flat_hash_map<std::string, const Key*> keys_by_alias_;
  absl::flat_hash_map<char, const Key*> keys_by_short_flag_;
  absl::flat_hash_set<std::string> lists_set_by_flags_;
  Config config_;
  std::vector<std::string> errors_;
};

std::optional<std::string> ClosestName(absl::string_view name,
                                       const std::vector<std::string>& candidates) {
  const std::size_t max_distance = std::clamp<std::size_t>(name.size() / 3, 1, 2);
  std::optional<std::string> closest;
  std::size_t closest_distance = max_distance + 1;
  for (const std::string& candidate : candidates) {
    const std::size_t distance = EditDistance(name, candidate);
    if (distance < closest_distance) {
      closest = candidate;
      closest_distance = distance;
    }
  }
  return closest;
}

absl::StatusOr<Config> Config::LoadWithConfigFile(const ConfigSchema& schema,
                                                  std::vector<std::string> args) {
  absl::StatusOr<Config> without_file = Load(schema, {.args = args});
  if (!without_file.ok() || without_file->GetString("config").empty()) return without_file;
  return Load(schema, {.file = without_file->GetString("config"), .args = std::move(args)});
}

absl::StatusOr<Config> Config::Load(const ConfigSchema& schema, const ConfigSources& sources) {
  return ConfigLoader(schema).Load(sources);
}

const Config::Entry& Config::Find(absl::string_view key, absl::string_view caller) const {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    DieOfMisuse(absl::StrCat("Config::", caller, "(", Quote(key), "): no such key in the schema"));
  }
  return it->second;
}

const ConfigValue& Config::ValueOf(absl::string_view key, absl::string_view caller,
                                   std::initializer_list<ConfigType> types) const {
  const Entry& entry = Find(key, caller);
  if (std::find(types.begin(), types.end(), entry.type) == types.end()) {
    DieOfMisuse(absl::StrCat("Config::", caller, "(", Quote(key), "): the key is of type ",
                             TypeName(entry.type)));
  }
  return entry.value;
}

const std::string& Config::GetString(absl::string_view key) const {
  return std::get<std::string>(ValueOf(key, "GetString", {ConfigType::kString, ConfigType::kEnum}));
}

std::int64_t Config::GetInt64(absl::string_view key) const {
  return std::get<std::int64_t>(ValueOf(key, "GetInt64", {ConfigType::kInt64}));
}

double Config::GetDouble(absl::string_view key) const {
  return std::get<double>(ValueOf(key, "GetDouble", {ConfigType::kDouble}));
}

bool Config::GetBool(absl::string_view key) const {
  return std::get<bool>(ValueOf(key, "GetBool", {ConfigType::kBool}));
}

absl::Duration Config::GetDuration(absl::string_view key) const {
  return std::get<absl::Duration>(ValueOf(key, "GetDuration", {ConfigType::kDuration}));
}

const std::vector<std::string>& Config::GetStringList(absl::string_view key) const {
  return std::get<std::vector<std::string>>(
      ValueOf(key, "GetStringList", {ConfigType::kStringList}));
}

bool Config::IsSet(absl::string_view key) const { return Find(key, "IsSet").origin != "default"; }

const std::string& Config::Origin(absl::string_view key) const {
  return Find(key, "Origin").origin;
}

}  // namespace forge
