// The inference request's window on the HBM series' clock, and which npu_mem
// series stands for each device. Pure; shared by the memory-profile kind (it
// puts the window in the memory.collect_csvs payload), the collect handler
// (it measures the activation peak there) and the views' adapter
// (views/hbm_series_from_run.h), so all three cut the series the same way.
//
// The memory.infer task reads the target's clock (`date +%s%N`) just before
// and just after its request ("target_clock": {"before_ns", "after_ns"} in its
// result); the kind adds the server's own times of the task
// ("server_window_ms": {"start_ms", "end_ms", "ready_ms"}: scheduled,
// answered, and when service.wait_ready answered). msprof stamps npu_mem on
// the target's clock, so:
//   clock "target": the target's readings, no margin (kTargetMarginUs): they
//                   bracket the request on the series' own clock, and every
//                   sample of the level before must stay outside, because
//                   the service may have been ready only ~100 ms earlier;
//   clock "server": the server's times when the target gave none (clock
//                   unreadable), margin kServerMarginUs. That window already
//                   encloses the request on the server's clock (it includes
//                   the dispatch and the answer's way back), so the margin
//                   only absorbs a clock difference; a larger one would reach
//                   back before the service was ready (the level "just
//                   before" would then be a start-up level). Right only when
//                   the two clocks agree to within the margin.
// `ready_us` is the service's ready instant on the window's clock (the
// server's ready time, moved by the target-minus-server offset of the
// request's midpoints for "target"): the level "just before" the request is
// taken from samples after it only, because before it the device held
// start-up levels (weights loaded, KV cache allocated, graphs capturing).
#pragma once

#include <map>
#include <optional>
#include <string>

#include "statemachine/activation_peak.h"
#include "statemachine/run_state.h"
#include "task_payloads.pb.h"

namespace npuprof::sm {

inline constexpr double kTargetMarginUs = 0;
inline constexpr double kServerMarginUs = 200'000;

struct ChosenWindow {
  InferenceWindow window;  // µs since the epoch, not widened
  std::string clock;       // "target" | "server"
  double margin_us = kTargetMarginUs;
  std::optional<double> ready_us;
};

// From the kind's "inference" record (the memory.infer result plus
// "server_window_ms"); nullopt when neither clock gave a usable window
// (missing, non-numeric or end before start).
std::optional<ChosenWindow> ChooseInferenceWindow(const json& inference_record);

// {"start_us", "end_us", "clock", "margin_us", "ready_us"?} and back
// (nullopt when a field is missing or wrong: the window is then treated as
// absent; a missing or non-numeric ready_us is just unset).
json ChosenWindowToJson(const ChosenWindow& w);
// The same as memory.collect_csvs carries it (its inference_window).
tasks::InferenceWindow ChosenWindowToMessage(const ChosenWindow& w);
std::optional<ChosenWindow> ChosenWindowFromJson(const json& j);
// w when it is usable (a known clock, margin >= 0, end >= start), else nullopt.
std::optional<ChosenWindow> UsableWindow(ChosenWindow w);

// A deployment over several machines (docs/MULTINODE.md "One clock"): the
// window cut on node i's series is the inference window moved onto node i's
// clock. Offsets are those machine.clock measured (a node's clock minus the
// measuring worker's, statemachine/clock_offsets.h). A "target" window is on
// the head's clock: it moves by node − head; a "server" window is on the
// server's (taken as the worker's): it moves by node. Its margin grows by the
// uncertainties of the offsets used (ms -> µs); ready_us moves with it.
// nullopt when an offset it needs is unknown: the caller then cuts at the
// window as it is (the clocks assumed close) and says so.
struct NodeClockOffset {
  double offset_ms = 0;
  double uncertainty_ms = 0;
};
std::optional<ChosenWindow> WindowOnNodeClock(const ChosenWindow& w, std::optional<NodeClockOffset> head,
                                              std::optional<NodeClockOffset> node);

// ActivationPeakOptions for a window: the defaults with its margin, and the
// level taken after its ready instant.
ActivationPeakOptions PeakOptionsFor(const ChosenWindow& w);

// Per device, the npu_mem file whose "Device" series of that device has the
// most samples, from the collect handler's "npu_mem" rows ({"file",
// "device_id", "event", "samples"}); rows without a device id are skipped.
std::map<int, std::string> DeviceSeriesFiles(const json& npu_mem_rows);

}  // namespace npuprof::sm
