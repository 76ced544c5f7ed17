#include "cli/run_hbm_series.h"

#include "views/hbm_series_from_run.h"

namespace npuprof::cli {

views::HbmSeriesSet RunHbmSeries(Client& client, const json& events_doc) {
  std::vector<views::NpuMemCsv> csvs = views::NpuMemCsvsOfRun(events_doc);
  std::vector<views::NpuMemCsv> fetched;
  for (auto& csv : csvs) {
    auto r = client.Call("blob", json{{"sha256", csv.blob}}, std::chrono::seconds(60));
    if (!r.ok() || !r->ok() || r->body_json().size() > views::kMaxNpuMemCsvBytes) continue;
    csv.text = r->body_json();
    fetched.push_back(std::move(csv));
  }
  return views::HbmSeriesSetFromRun(events_doc, fetched);
}

}  // namespace npuprof::cli
