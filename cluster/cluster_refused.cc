// ListClusterRefused: the refused stream, oldest first, by direct gets of
// its messages (no consumer is created, so listing leaves no state behind).

#include "cluster/nats_connection.h"
#include "cluster/refused_record.h"
#include "eventfold/cluster.h"

namespace eventfold {

using cluster::FromNats;
using cluster::NatsConnection;

Status ListClusterRefused(const ClusterOptions& options,
                          const std::function<bool(const RefusedDelivery&)>& fn) {
  Result<std::unique_ptr<NatsConnection>> c =
      NatsConnection::Open(options.urls, options.timeout_ms);
  if (!c.ok()) return c.status();
  jsCtx* js = (*c)->js();
  const std::string stream = options.stream + "_refused";
  jsStreamInfo* si = nullptr;
  jsErrCode err = jsErrCode{};
  natsStatus s = js_GetStreamInfo(&si, js, stream.c_str(), nullptr, &err);
  if (s != NATS_OK) return FromNats(s, "reading stream " + stream, err);
  const uint64_t first = si->State.FirstSeq, last = si->State.LastSeq;
  const bool empty = si->State.Msgs == 0;
  jsStreamInfo_Destroy(si);
  if (empty) return Status::OK();
  // The stream is bounded (oldest dropped first), so a message between
  // first and last may be gone by the time it is asked for: skipped.
  for (uint64_t seq = first; seq <= last; ++seq) {
    natsMsg* msg = nullptr;
    err = jsErrCode{};
    s = js_GetMsg(&msg, js, stream.c_str(), seq, nullptr, &err);
    if (s == NATS_NOT_FOUND || err == JSNoMessageFoundErr) continue;
    if (s != NATS_OK)
      return FromNats(s, "reading " + stream + " message " + std::to_string(seq), err);
    Result<RefusedDelivery> r = cluster::DecodeRefused(
        std::string_view(natsMsg_GetData(msg), static_cast<size_t>(natsMsg_GetDataLength(msg))));
    natsMsg_Destroy(msg);
    if (!r.ok()) return r.status().WithContext(stream + " message " + std::to_string(seq));
    r->seq = seq;
    if (!fn(*r)) break;
  }
  return Status::OK();
}

}  // namespace eventfold
