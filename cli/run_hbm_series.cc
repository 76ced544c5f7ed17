#include "cli/run_hbm_series.h"

namespace npuprof::cli {

views::HbmSeriesSet RunHbmSeries(Client& /*client*/, const std::string& /*run_id*/, const json& /*manifest*/) {
  return {};
}

}  // namespace npuprof::cli
