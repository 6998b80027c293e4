#include "tools/history.h"

namespace eventfold::sim {

History GenerateHistory(const HistoryOptions&) { return {}; }
void Shuffle(std::vector<Delivery>*, uint64_t) {}

}  // namespace eventfold::sim
