// ClusterSink: the receiver's sink in cluster mode. Decodes and validates a
// delivery exactly as a Store would (core/decode.h), routes it to its
// partition and publishes the verbatim body to JetStream; kAccepted only
// after JetStream's publish acknowledgement, kStorageError (503) when none
// comes within the deadline. Refusals go to the bounded refused stream.

#include <string>

#include "cluster/nats_connection.h"
#include "cluster/refused_record.h"
#include "cluster/wire.h"
#include "core/decode.h"
#include "core/quarantine_headers.h"
#include "eventfold/cluster.h"
#include "eventfold/partitioner.h"

namespace eventfold {
namespace {

using cluster::FromNats;
using cluster::NatsConnection;

class ClusterSink final : public IngestSink {
 public:
  ClusterSink(std::unique_ptr<NatsConnection> conn, std::string stream, Profile profile,
              Partitioner partitioner, const ClusterSinkOptions& options)
      : conn_(std::move(conn)),
        stream_(std::move(stream)),
        refused_subject_(stream_ + ".refused"),
        profile_(std::move(profile)),
        partitioner_(partitioner),
        options_(options),
        clock_(options.clock ? options.clock : SystemClock()) {}

  IngestResult Ingest(const Delivery& delivery) override {
    IngestResult r;
    Result<DecodedEvent> decoded = DecodeEvent(delivery.body, profile_);
    Status valid = decoded.ok() ? CheckEventIdHeader(delivery.headers, decoded->event.event_id)
                                : decoded.status();
    if (!valid.ok()) {
      r.outcome = Outcome::kInvalid;
      r.message = valid.message();
      if (decoded.ok()) r.event_id = decoded->event.event_id;
      RefusedDelivery refused;
      refused.outcome = r.outcome;
      refused.reason = r.message;
      refused.headers = delivery.headers;
      refused.body_prefix = delivery.body.substr(0, kQuarantineBodyBytes);
      refused.body_bytes = delivery.body.size();
      (void)Quarantine(std::move(refused));
      return r;
    }
    r.event_id = decoded->event.event_id;
    r.entity = decoded->entity;
    const int k = decoded->entity ? partitioner_.PartitionOf(*decoded->entity)
                                  : partitioner_.PartitionOfUnrouted(r.event_id);
    const std::string subject = PartitionSubject(stream_, k);
    Status st = Publish(subject, cluster::WireHeaders(delivery.headers, clock_->NowMicros()),
                        delivery.body);
    if (!st.ok()) {
      r.outcome = Outcome::kStorageError;
      r.message = "cluster: " + st.message() + "; retry later";
      return r;
    }
    r.outcome = Outcome::kAccepted;
    return r;
  }

  Status Quarantine(RefusedDelivery r) override {
    r.received_at = clock_->NowMicros();
    r.status = HttpStatus(r.outcome);
    (void)TrimQuarantineHeaders(&r.headers);  // those a store's quarantine keeps
    if (r.body_prefix.size() > kQuarantineBodyBytes) r.body_prefix.resize(kQuarantineBodyBytes);
    return Publish(refused_subject_, {}, cluster::EncodeRefused(r));
  }

  uint64_t ApproximateBytes() override { return 0; }  // the cluster's, not ours

 private:
  // Publishes and waits for JetStream's acknowledgement (stored on a quorum
  // of the stream's replicas) at most publish_timeout_ms.
  Status Publish(const std::string& subject, const cluster::WireHeaderList& headers,
                 std::string_view body) {
    natsMsg* msg = nullptr;
    natsStatus s =
        natsMsg_Create(&msg, subject.c_str(), nullptr, body.data(), static_cast<int>(body.size()));
    for (const auto& [name, value] : headers) {
      if (s == NATS_OK) s = natsMsgHeader_Set(msg, name.c_str(), value.c_str());
    }
    jsPubOptions po;
    jsPubOptions_Init(&po);
    po.MaxWait = options_.publish_timeout_ms;
    po.ExpectStream = stream_.c_str();
    if (subject == refused_subject_) po.ExpectStream = nullptr;
    jsPubAck* ack = nullptr;
    jsErrCode err = jsErrCode{};
    if (s == NATS_OK) s = js_PublishMsg(&ack, conn_->js(), msg, &po, &err);
    jsPubAck_Destroy(ack);
    natsMsg_Destroy(msg);
    return FromNats(s, "publishing to " + subject, err);
  }

  std::unique_ptr<NatsConnection> conn_;
  const std::string stream_;
  const std::string refused_subject_;
  const Profile profile_;
  const Partitioner partitioner_;
  const ClusterSinkOptions options_;
  Clock* clock_;
};

}  // namespace

Result<std::unique_ptr<IngestSink>> OpenClusterSink(const ClusterOptions& cluster,
                                                    const ClusterSinkOptions& options) {
  Result<ClusterLayout> layout = ReadClusterLayout(cluster);
  if (!layout.ok()) return layout.status();
  Result<Profile> profile = Profile::FromJson(layout->profile_json);
  if (!profile.ok()) return profile.status().WithContext("the cluster's recorded profile");
  Result<Partitioner> partitioner = Partitioner::Make(layout->partitions);
  if (!partitioner.ok()) return partitioner.status();
  Result<std::unique_ptr<NatsConnection>> conn =
      NatsConnection::Open(cluster.urls, cluster.timeout_ms);
  if (!conn.ok()) return conn.status();
  return std::unique_ptr<IngestSink>(new ClusterSink(std::move(*conn), cluster.stream,
                                                     std::move(*profile), *partitioner, options));
}

}  // namespace eventfold
