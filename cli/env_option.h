// The service environment options of `npuprof submit serve|memory-profile`
// (--env KEY=VALUE, repeatable) and of a sweep's grid (--grid
// env.KEY=V1,V2). Pure: text in, the spec's `env` object or an error out.
//
// Contract: EnvFromFlags turns each "KEY=VALUE" into env[KEY] = "VALUE"
// (the value may hold '='; the last of a repeated KEY wins); an entry with
// no '=' or an empty KEY is refused, naming it. Whether KEY is a shell name
// and not a secret is the server's check (statemachine/service_spec.h
// CheckEnv), made before anything is recorded. A grid key "env.KEY" sweeps
// one variable: EnvGridName gives KEY, refusing a KEY that is not a shell
// variable name with the server's words.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/status.h"

namespace npuprof::cli {

inline constexpr const char* kEnvGridPrefix = "env.";

Result<nlohmann::json> EnvFromFlags(const std::vector<std::string>& entries);

// Whether a grid key names an environment variable ("env.KEY").
bool IsEnvGridKey(const std::string& key);
// KEY of "env.KEY", or the error naming the key and the fix.
Result<std::string> EnvGridName(const std::string& key);

}  // namespace npuprof::cli
