#pragma once
// The configuration's keys, each spelled once: one table of field descriptors per struct of
// config.h, in the order `check` prints them. A table drives the loader (known keys, did-you-mean,
// the rule and message of each value), `check`'s output and the list of accepted key paths.
// Defaults are the struct initializers of config.h: a key absent from the file keeps them.
//
// Only config/ and its tests include this header (it brings yaml-cpp).

#include <yaml-cpp/yaml.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "sidecar/common/clock.h"
#include "sidecar/common/duration.h"
#include "sidecar/common/size.h"
#include "sidecar/config/config.h"
#include "sidecar/config/expand.h"
#include "sidecar/config/reader.h"
#include "sidecar/config/redis_url.h"

namespace streamcar::config {

using Writer = YAML::Emitter;

enum FieldFlag : unsigned {
  kRequired = 1,       // read is called even when the key is absent or null, to say so
  kNotInDefaults = 2,  // a subscription key `defaults:` may not hold
  kNotPrinted = 4,     // not in `check`'s output
  kReadLast = 8,       // read after the other keys of its mapping (it depends on them)
  kSecret = 16,        // printed as "***" when set
  kUrlPassword = 32,   // printed with the URL's password masked
};

enum class MaxBound { kInclusive, kExclusive };

// The rule of one value; which members count depends on the maker.
struct Limits {
  int64_t min = 0;  // Int: range; Duration: the least milliseconds (0: zero allowed)
  int64_t max = 0;
  double real_min = 0;
  double real_max = 0;
  MaxBound bound = MaxBound::kInclusive;
  std::string_view why;                                // Duration: the message below `min`
  std::string (*check)(const std::string&) = nullptr;  // Text: "" or what is wrong
};

template <typename S>
struct Field {
  using Struct = S;
  std::string_view key;
  // `value` is node[key] of `parent`; undefined only for kRequired fields. `path` is the key's.
  void (*read)(Reader& in, const Field& field, const YAML::Node& parent, const YAML::Node& value,
               const std::string& path, S* out) = nullptr;
  void (*write)(Writer& out, const Field& field, const S& value) = nullptr;
  unsigned flags = 0;
  Limits limits{};
  // Sections and lists: appends the key paths below `prefix` ("redis", "streams[]").
  void (*paths)(const std::string& prefix, std::vector<std::string>* out) = nullptr;
  // Sections and lists: the key is a mapping (for the line of a cross-key message).
  bool nested = false;
};

template <typename S>
using Fields = std::span<const Field<S>>;

inline std::string JoinPath(const std::string& parent, std::string_view key) {
  return parent.empty() ? std::string(key) : parent + "." + std::string(key);
}

// Every key path of a table: "redis.tls.verify", "subscriptions[].handler.url".
template <typename S>
void AppendPaths(Fields<S> fields, const std::string& prefix, std::vector<std::string>* out) {
  for (const auto& field : fields) {
    const std::string path = JoinPath(prefix, field.key);
    if (field.paths) {
      field.paths(path, out);
    } else {
      out->push_back(path);
    }
  }
}

enum class Scope { kPlain, kDefaults };

// Reads the keys of one mapping (already known to be a mapping): checks every key in file order
// first, then reads the present fields in table order (kReadLast ones after the rest).
template <typename S>
void ReadSection(Reader& in, const YAML::Node& node, const std::string& path, Fields<S> fields,
                 S* out, Scope scope = Scope::kPlain) {
  if (scope == Scope::kDefaults) {
    for (auto it : node) {
      const auto key = it.first.as<std::string>();
      for (const auto& field : fields) {
        if ((field.flags & kNotInDefaults) && key == field.key) {
          in.Fail(it.first, JoinPath(path, key),
                  "not allowed in defaults (set it in each subscription)");
        }
      }
    }
  }
  std::vector<std::string_view> allowed;
  for (const auto& field : fields) {
    if (scope != Scope::kDefaults || !(field.flags & kNotInDefaults)) allowed.push_back(field.key);
  }
  in.CheckKeys(node, path, allowed);
  for (bool last : {false, true}) {
    for (const auto& field : fields) {
      if (((field.flags & kReadLast) != 0) != last) continue;
      if (scope == Scope::kDefaults && (field.flags & kNotInDefaults)) continue;
      const YAML::Node value = node[std::string(field.key)];
      if (!value.IsDefined() && !(field.flags & kRequired)) continue;
      field.read(in, field, node, value, JoinPath(path, field.key), out);
    }
  }
}

template <typename S>
void WriteSection(Writer& out, Fields<S> fields, const S& value) {
  for (const auto& field : fields) {
    if (field.flags & kNotPrinted) continue;
    field.write(out, field, value);
  }
}

// --- the makers ---------------------------------------------------------------------------------
// A member pointer is a template argument, so each read/write is a plain function and the tables
// are constexpr.

namespace fields_internal {

template <typename T>
struct MemberOf;
template <typename C, typename T>
struct MemberOf<T C::*> {
  using Class = C;
  using Type = T;
};
template <auto M>
using ClassOf = typename MemberOf<decltype(M)>::Class;
template <auto M>
using TypeOf = typename MemberOf<decltype(M)>::Type;

std::string ShortDouble(double value);
std::string EnumMessage(std::string_view got, const std::vector<std::string_view>& names);

template <auto M>
void WriteKey(Writer& out, const Field<ClassOf<M>>& field) {
  out << YAML::Key << std::string(field.key) << YAML::Value;
}

}  // namespace fields_internal

template <auto M>
constexpr Field<fields_internal::ClassOf<M>> Text(
    std::string_view key, unsigned flags = 0, std::string (*check)(const std::string&) = nullptr) {
  using S = fields_internal::ClassOf<M>;
  Field<S> field{key};
  field.flags = flags;
  field.limits.check = check;
  field.read = [](Reader& in, const Field<S>& f, const YAML::Node& parent, const YAML::Node& value,
                  const std::string& path, S* out) {
    out->*M = (f.flags & kRequired) ? in.RequiredText(parent, path, value) : in.Text(value, path);
    if (f.limits.check) {
      if (auto why = f.limits.check(out->*M); !why.empty()) in.Fail(value, path, why);
    }
  };
  field.write = [](Writer& out, const Field<S>& f, const S& value) {
    fields_internal::WriteKey<M>(out, f);
    const std::string& text = value.*M;
    if (f.flags & kSecret) {
      out << (text.empty() ? "" : "***");
    } else if (f.flags & kUrlPassword) {
      out << MaskUrlPassword(text);
    } else {
      out << text;
    }
  };
  return field;
}

template <auto M>
constexpr Field<fields_internal::ClassOf<M>> Int(std::string_view key, int64_t min, int64_t max) {
  using S = fields_internal::ClassOf<M>;
  Field<S> field{key};
  field.limits.min = min;
  field.limits.max = max;
  field.read = [](Reader& in, const Field<S>& f, const YAML::Node&, const YAML::Node& value,
                  const std::string& path, S* out) {
    out->*M =
        static_cast<fields_internal::TypeOf<M>>(in.Int(value, path, f.limits.min, f.limits.max));
  };
  field.write = [](Writer& out, const Field<S>& f, const S& value) {
    fields_internal::WriteKey<M>(out, f);
    out << value.*M;
  };
  return field;
}

template <auto M>
constexpr Field<fields_internal::ClassOf<M>> Real(std::string_view key, double min, double max,
                                                  MaxBound bound) {
  using S = fields_internal::ClassOf<M>;
  Field<S> field{key};
  field.limits.real_min = min;
  field.limits.real_max = max;
  field.limits.bound = bound;
  field.read = [](Reader& in, const Field<S>& f, const YAML::Node&, const YAML::Node& value,
                  const std::string& path, S* out) {
    out->*M = in.Real(value, path, f.limits.real_min, f.limits.real_max,
                      f.limits.bound == MaxBound::kInclusive);
  };
  field.write = [](Writer& out, const Field<S>& f, const S& value) {
    fields_internal::WriteKey<M>(out, f);
    out << fields_internal::ShortDouble(value.*M);
  };
  return field;
}

template <auto M>
constexpr Field<fields_internal::ClassOf<M>> Bool(std::string_view key) {
  using S = fields_internal::ClassOf<M>;
  Field<S> field{key};
  field.read = [](Reader& in, const Field<S>&, const YAML::Node&, const YAML::Node& value,
                  const std::string& path, S* out) { out->*M = in.Bool(value, path); };
  field.write = [](Writer& out, const Field<S>& f, const S& value) {
    fields_internal::WriteKey<M>(out, f);
    out << value.*M;
  };
  return field;
}

// A duration of at least `min` (Millis(0): zero allowed; Millis(1): "greater than 0s"; more: the
// message `why` below it).
template <auto M>
constexpr Field<fields_internal::ClassOf<M>> Duration(std::string_view key, Millis min = Millis(1),
                                                      std::string_view why = {}) {
  using S = fields_internal::ClassOf<M>;
  Field<S> field{key};
  field.limits.min = min.count();
  field.limits.why = why;
  field.read = [](Reader& in, const Field<S>& f, const YAML::Node&, const YAML::Node& value,
                  const std::string& path, S* out) {
    const Millis read = in.Duration(value, path, /*allow_zero=*/f.limits.min == 0);
    if (f.limits.min > 1 && read.count() < f.limits.min) {
      in.Fail(value, path, std::string(f.limits.why));
    }
    out->*M = read;
  };
  field.write = [](Writer& out, const Field<S>& f, const S& value) {
    fields_internal::WriteKey<M>(out, f);
    out << FormatDuration(value.*M);
  };
  return field;
}

// A size in bytes, > 0.
template <auto M>
constexpr Field<fields_internal::ClassOf<M>> Size(std::string_view key) {
  using S = fields_internal::ClassOf<M>;
  Field<S> field{key};
  field.read = [](Reader& in, const Field<S>&, const YAML::Node&, const YAML::Node& value,
                  const std::string& path, S* out) { out->*M = in.Size(value, path); };
  field.write = [](Writer& out, const Field<S>& f, const S& value) {
    fields_internal::WriteKey<M>(out, f);
    out << FormatSize(value.*M);
  };
  return field;
}

// One of the names of `kNames` (an array of {name, value} pairs): the names are spelled once.
template <auto M, const auto& kNames>
constexpr Field<fields_internal::ClassOf<M>> Enum(std::string_view key) {
  using S = fields_internal::ClassOf<M>;
  Field<S> field{key};
  field.read = [](Reader& in, const Field<S>&, const YAML::Node&, const YAML::Node& value,
                  const std::string& path, S* out) {
    const std::string text = in.Text(value, path);
    std::vector<std::string_view> names;
    for (const auto& [name, item] : kNames) {
      if (text == name) {
        out->*M = item;
        return;
      }
      names.push_back(name);
    }
    in.Fail(value, path, fields_internal::EnumMessage(text, names));
  };
  field.write = [](Writer& out, const Field<S>& f, const S& value) {
    fields_internal::WriteKey<M>(out, f);
    for (const auto& [name, item] : kNames) {
      if (item == value.*M) out << std::string(name);
    }
  };
  return field;
}

// A nested mapping held by member M, read with its own table.
template <auto M, const auto& kTable>
constexpr Field<fields_internal::ClassOf<M>> Section(std::string_view key) {
  using S = fields_internal::ClassOf<M>;
  using T = fields_internal::TypeOf<M>;
  Field<S> field{key};
  field.nested = true;
  field.read = [](Reader& in, const Field<S>&, const YAML::Node&, const YAML::Node& value,
                  const std::string& path, S* out) {
    in.RequireMap(value, path);
    ReadSection<T>(in, value, path, kTable, &(out->*M));
  };
  field.write = [](Writer& out, const Field<S>& f, const S& value) {
    fields_internal::WriteKey<M>(out, f);
    out << YAML::BeginMap;
    WriteSection<T>(out, kTable, value.*M);
    out << YAML::EndMap;
  };
  field.paths = [](const std::string& prefix, std::vector<std::string>* out) {
    AppendPaths<T>(kTable, prefix, out);
  };
  return field;
}

// A nested mapping whose keys are members of the same struct (`consumer: { name }` of Config).
template <const auto& kTable>
constexpr auto Group(std::string_view key) {
  using S = typename std::remove_cvref_t<decltype(kTable)>::value_type::Struct;
  Field<S> field{key};
  field.nested = true;
  field.read = [](Reader& in, const Field<S>&, const YAML::Node&, const YAML::Node& value,
                  const std::string& path, S* out) {
    in.RequireMap(value, path);
    ReadSection<S>(in, value, path, kTable, out);
  };
  field.write = [](Writer& out, const Field<S>& f, const S& value) {
    out << YAML::Key << std::string(f.key) << YAML::Value << YAML::BeginMap;
    WriteSection<S>(out, kTable, value);
    out << YAML::EndMap;
  };
  field.paths = [](const std::string& prefix, std::vector<std::string>* out) {
    AppendPaths<S>(kTable, prefix, out);
  };
  return field;
}

// Writes a list of mappings (`[]` when empty).
template <auto M, const auto& kTable>
void WriteList(Writer& out, const Field<fields_internal::ClassOf<M>>& f,
               const fields_internal::ClassOf<M>& value) {
  using T = typename fields_internal::TypeOf<M>::value_type;
  fields_internal::WriteKey<M>(out, f);
  const auto& items = value.*M;
  if (items.empty()) out << YAML::Flow;
  out << YAML::BeginSeq;
  for (const auto& item : items) {
    out << YAML::BeginMap;
    WriteSection<T>(out, kTable, item);
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;
}

template <auto M, const auto& kTable>
void ListPaths(const std::string& prefix, std::vector<std::string>* out) {
  using T = typename fields_internal::TypeOf<M>::value_type;
  AppendPaths<T>(kTable, prefix + "[]", out);
}

// A list of mappings held by member M (a vector), each read with its own table from a
// default-constructed item; null is an empty list.
template <auto M, const auto& kTable>
constexpr Field<fields_internal::ClassOf<M>> List(std::string_view key, unsigned flags = 0) {
  using S = fields_internal::ClassOf<M>;
  using T = typename fields_internal::TypeOf<M>::value_type;
  Field<S> field{key};
  field.flags = flags;
  field.nested = true;
  field.read = [](Reader& in, const Field<S>& f, const YAML::Node&, const YAML::Node& value,
                  const std::string& path, S* out) {
    if (value.IsNull()) return;
    if (!value.IsSequence()) in.Fail(value, path, "must be a list of " + std::string(f.key));
    for (size_t i = 0; i < value.size(); ++i) {
      const std::string item_path = path + "[" + std::to_string(i) + "]";
      const YAML::Node item = value[i];
      in.RequireMap(item, item_path);
      T parsed;
      ReadSection<T>(in, item, item_path, kTable, &parsed);
      (out->*M).push_back(std::move(parsed));
      in.NoteItemLine(f.key, Reader::Line(item));
    }
  };
  field.write = &WriteList<M, kTable>;
  field.paths = &ListPaths<M, kTable>;
  return field;
}

// A key with its own reader and writer (headers, reject_statuses, redis.url, start, ...).
template <typename S>
constexpr Field<S> Custom(std::string_view key, decltype(Field<S>::read) read,
                          decltype(Field<S>::write) write, unsigned flags = 0) {
  Field<S> field{key};
  field.read = read;
  field.write = write;
  field.flags = flags;
  return field;
}

// --- the tables (fields.cc) ---------------------------------------------------------------------

// The top level of the file. Reading it fills every key of the file into `config`, and a
// subscription's default name; the default dead-letter streams are the loader's
// (FillDeadLetterDefaults, which needs redis.mode).
Fields<Config> ConfigFields();

// Every key path the tables accept, e.g. "redis.tls.verify", "subscriptions[].handler.url",
// "defaults.retry.jitter", "streams[].retention.max_age".
std::vector<std::string> AcceptedKeyPaths();

}  // namespace streamcar::config
