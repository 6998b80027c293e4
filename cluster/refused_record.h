// The refused stream's record: one JSON object per refused delivery,
// {"received_at":µs,"status":N,"outcome":"…","reason":"…","headers":{…},
// "body_bytes":N,"body_prefix":"…"}, written by receivers (ClusterSink) and
// read back by `eventfold refused --cluster`. Encode and decode live here,
// side by side, so the two cannot drift. Pure functions.

#ifndef EVENTFOLD_CLUSTER_REFUSED_RECORD_H_
#define EVENTFOLD_CLUSTER_REFUSED_RECORD_H_

#include <string>
#include <string_view>

#include "eventfold/quarantine.h"
#include "eventfold/status.h"

namespace eventfold::cluster {

// The record of `r` (its seq is not written: the stream sequence is it).
std::string EncodeRefused(const RefusedDelivery& r);

// `r` back from a record; seq is left 0. InvalidArgument naming the field
// when the record is not one EncodeRefused wrote.
Result<RefusedDelivery> DecodeRefused(std::string_view record);

}  // namespace eventfold::cluster

#endif  // EVENTFOLD_CLUSTER_REFUSED_RECORD_H_
