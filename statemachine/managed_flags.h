// The vLLM flags npuprof manages, in one table: every flag it sets, derives
// or records for a service it launches (the spec's service fields, and what
// each kind adds to the argv). Pure: no I/O.
//
// Contract:
// * Which flags a kind manages: every service kind (serve, torch-profile,
//   memory-profile) the service's own — model, served name, host, port, the
//   parallel sizes and their multi-node forms, and --config (a file that can
//   set any of them out of the record's sight); torch-profile and
//   memory-profile also what they add (utilization, model length, graph
//   mode, compilation / speculative / profiler config, ...). Any other kind
//   manages none.
// * An argument spells a managed flag when vLLM's parser would read it as
//   that flag: --flag, --flag=V, underscores for dashes (--max_model_len), a
//   JSON field of it (--compilation-config.level 3), an unambiguous prefix
//   of it (argparse's abbreviations: --gpu-memory 0.5), its short alias
//   (-tp 2, -tp=2, a prefix of it such as -t; a one-letter alias also with
//   the value attached: -O3, -qfp8), or the negation of a boolean flag
//   (--no-enforce-eager). A token that reads as a negative number is a
//   value, never a flag.
// * CheckExtraArgs refuses extra args that spell a managed flag, naming the
//   argument, the vLLM flag and the spec field and `npuprof submit` option
//   to use instead (or, where npuprof sets it without an option, how it
//   sets it). Nothing is ever silently overridden: `npuprof submit` refuses
//   before it sends anything and each kind's ValidateSpec refuses the same.
// * ManagedValues reads an argv (`vllm serve MODEL ...`) as vLLM would, for
//   the managed flags only; ManagedArgvDifferences says where two argvs
//   give a managed flag different values (verify: the argv that ran against
//   the one the spec gives).
// * A sweep's grid key goes through the same rule (CheckGridKey): a vLLM
//   spelling of a managed flag is refused naming the option to sweep, and a
//   grid key that is a managed flag's option names the spec field each
//   point's value must equal (ManagedFieldOfOption).
// To manage another flag, add a row to kRows in managed_flags.cc.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace npuprof::sm {

// What a managed flag is to one kind, as the table says.
struct ManagedFlag {
  std::string flag;    // vLLM's canonical spelling: "--gpu-memory-utilization"
  bool boolean = false;  // takes no value (its negation --no-FLAG sets it false)
  std::string option;  // the `npuprof submit KIND` option that sets it; "" = none
  std::string field;   // the spec field it is made from; "" = none
  std::string how;     // how npuprof sets it where there is no option ("" otherwise)
};

// The managed flag `arg` spells for `kind`, or nullopt.
std::optional<ManagedFlag> FindManagedFlag(std::string_view kind, std::string_view arg);

// Ok, or Invalid naming the first extra argument that spells a managed flag
// and what to use instead.
Status CheckExtraArgs(std::string_view kind, const std::vector<std::string>& extra_args);

// The values an argv gives each managed flag of `kind`, in order (vLLM takes
// the last). The argv is `vllm serve MODEL ...` (the model, a positional,
// counts as --model), or bare arguments. A boolean flag's value is "true"
// (or "false" for --no-FLAG); a JSON field's is ".<path>=<value>".
std::map<std::string, std::vector<std::string>> ManagedValues(std::string_view kind,
                                                              const std::vector<std::string>& argv);

// A managed flag whose values differ between two argvs.
struct ManagedDifference {
  std::string flag;   // "--gpu-memory-utilization"
  std::string field;  // the spec field it is made from for the kind; "" = none
  std::string text;   // "--gpu-memory-utilization: ran 0.85 then 0.5, the spec gives 0.85"
};
// Every managed flag of `kind` whose values differ between `expected` (the
// spec's argv) and `ran`, in table order; empty when they agree.
std::vector<ManagedDifference> ManagedArgvDifferences(std::string_view kind, const std::vector<std::string>& expected,
                                                      const std::vector<std::string>& ran);

// A grid key (a child submit flag without "--") of a sweep of `kind`: Invalid
// when it is exactly a vLLM spelling of a flag the kind manages through
// another option (e.g. tensor-parallel-size: sweep tp), naming that option.
Status CheckGridKey(std::string_view kind, std::string_view key);
// The spec field behind submit option `option` ("--gpu-memory-utilization")
// of `kind` when that option sets a managed flag, else nullopt.
std::optional<std::string> ManagedFieldOfOption(std::string_view kind, std::string_view option);

// Every canonical flag `kind` manages, in table order (docs, tests).
std::vector<std::string> ManagedFlagNames(std::string_view kind);

}  // namespace npuprof::sm
