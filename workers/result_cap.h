// A task result must fit in one message under the sockets' cap
// (common/socket_security.h): the broker's socket drops a larger frame and
// the connection with it, so the task would only time out and be retried
// for nothing. FitResultToMessageCap replaces such a result by a final
// failure that says how large it was and which evidence made it so.
#pragma once

#include "npuprof.pb.h"

namespace npuprof::workers {

// Bytes of framing allowed for next to the serialised result.
inline constexpr int64_t kResultFramingBytes = 1024;

// Leaves r as it is when it fits; else keeps its ids and attempt and makes it
// a non-retryable `result_too_large` failure without blobs.
void FitResultToMessageCap(proto::TaskResult* r);

}  // namespace npuprof::workers
