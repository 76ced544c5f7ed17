// Shared validation of submitted specs. Each error names the field and the fix.
#pragma once

#include <string>

#include "common/status.h"
#include "statemachine/run_state.h"

namespace npuprof::sm {

// [A-Za-z0-9._-]{1,64}
bool IsSafeName(const std::string& s);
Status RequireSafeName(const json& spec, const std::string& field, bool required);
// The machine record the broker attached at submit time must be present.
Status RequireMachineRecord(const json& spec);
Status CheckIntRange(json& spec, const std::string& field, int64_t def, int64_t lo, int64_t hi);

// How a device list is named in errors: its field ("devices",
// "nodes[1].devices"), an example of the option ("--devices 0,1"), what its
// length must equal ("tp*dp") and the way out ("omit --devices to pick free NPUs").
struct DeviceListNames {
  std::string field, example, count_label, omit_hint;
};
// A list of `expected` distinct device indices 0..4095 in place: a "0,1,2"
// string becomes [0,1,2], an array is checked, null stays null.
Status NormaliseDeviceList(json& devices, int64_t expected, const DeviceListNames& names);

}  // namespace npuprof::sm

namespace npuprof::sm {
// Run ids chosen by clients (idempotent submit): same alphabet as names.
inline bool IsSafeNameForId(const std::string& s) { return IsSafeName(s) && s[0] != '_'; }
}  // namespace npuprof::sm
