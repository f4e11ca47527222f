// Typed configuration: keys declared in code (ConfigSchema), values read from four sources, each
// overriding the one before: default < file < environment < flags.
//
// The file is a subset of TOML:
//   # A comment, on its own line or after a value.
//   log.level = debug            # keys before any [section] are used as written
//   [redis]                      # a section prefixes the keys below it: this is redis.port
//   port = 6380
//   host = "10.0.0.7"            # values may be double-quoted; inside quotes \" \\ \n \t \r
//   timeout = 500ms              # are escapes and # is not a comment
// Keys are letters, digits, '_', '-' and '.'; a key may be set once per file.
//
// Environment: FORGE_ and the key upper-cased with '.' and '-' turned into '_' (redis.port is
// FORGE_REDIS_PORT). Variables that name no key are ignored.
//
// Flags: --redis.port=6380 or --redis.port 6380; a key given a ShortFlag also as -p 6380. A bool
// flag on its own (--dry-run) means true; it takes the next argument only if that is a bool word
// (--dry-run false). A flag given twice keeps the last value, except a string list's, which
// collects every one. Arguments that do not start with "-", "-" itself, and all arguments after
// "--" are positional; other single-dash arguments are errors.
//
// Key names, the style of every Forge binary: lower-case words joined by '-', and a '.' between a
// group and a key of the group (redis.port, lease.max-candidates, compile-threads). An old
// spelling stays accepted for a release as an Alias: it works in flags, files and the
// environment, and each use adds a line to Config::warnings() for the program to print.
//
// Value syntax by type: int64 and double as usual; bool true/false, yes/no, on/off or 1/0;
// duration a number with a unit (ns, us, ms, s, m, h), units may be combined ("1m30s"), never
// negative; enum one of the declared strings; string list, in a file or the environment,
// comma-separated values ("a,b"; empty: none), and on the command line one value per flag.
//
// Every source is checked, even where a later one overrides it, and all problems are reported
// together: each names the key, the value and where it came from, e.g.
//   config: redis.port = "abc" (from env FORGE_REDIS_PORT): not an integer
//   config: unknown key "redis.prot" in forge.conf:3 (did you mean "redis.port"?)
#ifndef FORGE_COMMON_CONFIG_CONFIG_H_
#define FORGE_COMMON_CONFIG_CONFIG_H_

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace forge {

enum class ConfigType { kString, kInt64, kDouble, kBool, kDuration, kEnum, kStringList };

// A value of any ConfigType; an enum's value is its string.
using ConfigValue =
    std::variant<std::string, std::int64_t, double, bool, absl::Duration, std::vector<std::string>>;

// Inclusive bounds for an int64 key.
struct Int64Range {
  std::int64_t min = std::numeric_limits<std::int64_t>::min();
  std::int64_t max = std::numeric_limits<std::int64_t>::max();
};

// The keys a program accepts. Declare them in a chain:
//   ConfigSchema schema;
//   schema.Int64("redis.port", 6379, "TCP port of Redis.", {.min = 1, .max = 65535})
//         .Duration("lease.timeout", absl::Seconds(30), "How long a worker may hold a lease.");
// Mistakes in the schema itself (a duplicate key, a default outside its range) are reported by
// Config::Load.
class ConfigSchema {
 public:
  ConfigSchema& String(std::string key, std::string default_value, std::string help);
  ConfigSchema& Int64(std::string key, std::int64_t default_value, std::string help,
                      Int64Range range = {});
  ConfigSchema& Double(std::string key, double default_value, std::string help);
  ConfigSchema& Bool(std::string key, bool default_value, std::string help);
  ConfigSchema& Duration(std::string key, absl::Duration default_value, std::string help);
  ConfigSchema& Enum(std::string key, std::vector<std::string> allowed, std::string default_value,
                     std::string help);
  // A repeatable flag (--label a=1 --label b=2); empty by default. The values of the highest
  // source that sets the key replace those below it.
  ConfigSchema& StringList(std::string key, std::string help);

  // Modifiers of the key declared last (using one before any key is a schema mistake):
  // An old, deprecated name of the key, read in flags, files and the environment like the key's
  // own; every use adds a warning that names the new spelling.
  ConfigSchema& Alias(std::string old_name);
  // A one-letter flag for the key: with ShortFlag('o'), "-o DIR" is "--output DIR".
  ConfigSchema& ShortFlag(char letter);
  // The key is read from flags only, never from the environment or a file: the options of one
  // command, as opposed to settings that hold across runs. A file that sets it is an error.
  ConfigSchema& FlagOnly();

  // One entry per key, in declaration order: name, type, default, environment variable, help.
  std::string HelpText() const;

  struct Key {
    std::string name;
    ConfigType type;
    ConfigValue default_value;
    std::string help;
    Int64Range range{};                  // kInt64 only
    std::vector<std::string> allowed{};  // kEnum only
    std::string env_name{};              // FORGE_..., derived from name
    std::vector<std::string> aliases{};  // deprecated names
    char short_flag = 0;                 // 0: none
    bool flag_only = false;
  };
  const std::vector<Key>& keys() const { return keys_; }

 private:
  friend class ConfigLoader;
  ConfigSchema& Add(Key key);
  // The key declared last, for the modifiers; nullptr, with an error recorded, if there is none.
  Key* LastKey(absl::string_view modifier);

  std::vector<Key> keys_;
  std::vector<std::string> errors_;
};

// Where Config::Load reads values from.
struct ConfigSources {
  // The config file's path; empty for none. A path that is given must be readable.
  std::string file{};
  // "NAME=value" entries; unset means this process's environment.
  std::optional<std::vector<std::string>> environment{};
  // Command-line arguments, without the program name.
  std::vector<std::string> args{};
};

// The resolved value of every key in a schema.
class Config {
 public:
  // InvalidArgument lists every problem found in the schema or the sources, one per line.
  static absl::StatusOr<Config> Load(const ConfigSchema& schema, const ConfigSources& sources);

  // What a binary's main does: flags and environment first, to learn the config file the string
  // key "config" names (the schema must declare it); then everything, with that file below them.
  static absl::StatusOr<Config> LoadWithConfigFile(const ConfigSchema& schema,
                                                   std::vector<std::string> args);

  // Getters for keys of the matching type (GetString for string and enum keys). Asking for an
  // undeclared key, or with the wrong type, is a bug in the caller and aborts the process.
  const std::string& GetString(absl::string_view key) const;
  std::int64_t GetInt64(absl::string_view key) const;
  double GetDouble(absl::string_view key) const;
  bool GetBool(absl::string_view key) const;
  absl::Duration GetDuration(absl::string_view key) const;
  const std::vector<std::string>& GetStringList(absl::string_view key) const;

  // Whether a source other than the default set the key.
  bool IsSet(absl::string_view key) const;

  // Where a key's value came from: "default", "file forge.conf:12", "env FORGE_REDIS_PORT" or
  // "flag --redis.port". Aborts for an undeclared key, like the getters.
  const std::string& Origin(absl::string_view key) const;

  // The arguments that were not flags, in order.
  const std::vector<std::string>& positional_args() const { return positional_args_; }

  // One line per use of a deprecated name (an Alias), saying what to write instead, e.g.
  //   config: --lease.max_candidates is deprecated, write --lease.max-candidates (the old name
  //   goes in the next release)
  // The program prints them on stderr.
  const std::vector<std::string>& warnings() const { return warnings_; }

 private:
  struct Entry {
    ConfigType type;
    ConfigValue value;
    std::string origin;
  };
  friend class ConfigLoader;

  // The entry of `key`, aborting if the schema has no such key; `caller` names the getter.
  const Entry& Find(absl::string_view key, absl::string_view caller) const;
  // Its value, aborting also if the key's type is not among `types`.
  const ConfigValue& ValueOf(absl::string_view key, absl::string_view caller,
                             std::initializer_list<ConfigType> types) const;

  absl::flat_hash_map<std::string, Entry> entries_;
  std::vector<std::string> positional_args_;
  std::vector<std::string> warnings_;
};

// The candidate that `name` is most likely a misspelling of: the nearest by edit distance
// (swapping two neighbours counts as one edit), if it is within a third of name's length (at least
// 1, at most 2 edits). Config suggests keys with it; the CLI suggests commands.
std::optional<std::string> ClosestName(absl::string_view name,
                                       const std::vector<std::string>& candidates);

}  // namespace forge

#endif  // FORGE_COMMON_CONFIG_CONFIG_H_
