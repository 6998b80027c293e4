// Names of the durable JetStream consumers that feed partition stores, and
// the keys of the lease bucket, shared by the fold workers (which create
// them) and `cluster status` (which reads them). Pure functions.
//
// Lease bucket keys: "p.<k>" holds partition k's owner id ("acquiring:<id>"
// while the owner sets up its consumer); "s.<k>.<id>" says worker <id> keeps
// a warm copy of partition k; "w.<id>" says worker <id> is alive; "f.<k>"
// says how far partition k's owner has folded for certain.
//
// Every consumer belongs to one worker: an owner's is "<stream>_p<k>_<id>",
// a standby's "<stream>_s<k>_<id>". A worker that lost a partition's lease
// without noticing yet can therefore only fetch (and acknowledge) from its
// own consumer: it can never take messages from the new owner's, which
// starts after the new owner's own store (the fencing a shared consumer
// name would lack). A new owner deletes every "<stream>_p<k>_" consumer
// before it creates its own.

#ifndef EVENTFOLD_CLUSTER_CONSUMER_NAMES_H_
#define EVENTFOLD_CLUSTER_CONSUMER_NAMES_H_

#include <string>
#include <string_view>

namespace eventfold::cluster {

// True for the characters a stream name or worker id may hold (letters,
// digits, '-' and '_'): they end up in JetStream stream, consumer and key
// names, which cannot hold '.', '*', '>' or spaces.
inline bool IsNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

// "<stream>_p<k>_": the prefix of every owner consumer of partition k. The
// trailing '_' keeps partition 1's prefix from matching partition 10's.
inline std::string OwnerDurablePrefix(std::string_view stream, int k) {
  return std::string(stream) + "_p" + std::to_string(k) + "_";
}

inline std::string OwnerDurable(std::string_view stream, int k, std::string_view worker_id) {
  return OwnerDurablePrefix(stream, k) + std::string(worker_id);
}

inline std::string StandbyDurable(std::string_view stream, int k, std::string_view worker_id) {
  return std::string(stream) + "_s" + std::to_string(k) + "_" + std::string(worker_id);
}

inline constexpr std::string_view kAcquiringPrefix = "acquiring:";
inline constexpr std::string_view kWorkerKeyPrefix = "w.";
inline constexpr std::string_view kStandbyKeyPrefix = "s.";

inline std::string LeaseKey(int k) { return "p." + std::to_string(k); }

inline std::string WorkerKey(std::string_view worker_id) {
  return std::string(kWorkerKeyPrefix) + std::string(worker_id);
}

// "f.<k>": "<owner id> <seq>", the owner's word that partition k's store
// has folded every message of the subject up to stream sequence <seq>,
// which the stream leader then held as the subject's last (see
// fold_worker.cc, Gaps). Rewritten every lease round while it holds.
inline std::string FoldedKey(int k) { return "f." + std::to_string(k); }

// "s.<k>.": the prefix of every standby key of partition k.
inline std::string StandbyKeyPrefix(int k) {
  return std::string(kStandbyKeyPrefix) + std::to_string(k) + ".";
}

inline std::string StandbyKey(int k, std::string_view worker_id) {
  return StandbyKeyPrefix(k) + std::string(worker_id);
}

}  // namespace eventfold::cluster

#endif  // EVENTFOLD_CLUSTER_CONSUMER_NAMES_H_
