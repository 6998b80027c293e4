// Stored records (storage/record_codec): the first input byte picks one of
// the five values every event writes, the rest is its record, framed with a
// checksum that matches, so the decoder's own bounds are what is tested
// (a bad checksum would stop every input first). A record is decoded or
// refused as corruption; a compact one (formats 7 and 8) that decodes
// encodes again to a record that decodes to what the encoder keeps of it. (A
// FlatBuffer of an older format is read too, but re-encoding it may
// rightly keep less: its fold position from the key, not the record.)

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "eventfold/profile.h"
#include "storage/key_codec.h"
#include "storage/record_codec.h"

namespace {

using namespace eventfold;           // NOLINT(build/namespaces)
using namespace eventfold::storage;  // NOLINT(build/namespaces)

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

template <typename T, typename Decode, typename Encode, typename Same>
void RoundTrip(const std::string& key, const std::string& value, Decode decode, Encode encode,
               Same same) {
  Result<T> first = decode(key, value);
  if (!first.ok()) {
    Check(first.status().IsCorruption() && !first.status().message().empty());
    return;
  }
  if (static_cast<uint8_t>(value[0]) < 0xC0) return;  // a FlatBuffer
  Result<T> second = decode(key, encode(*first));
  Check(second.ok() && same(*first, *second));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string value =
      FrameRecord(std::string_view(reinterpret_cast<const char*>(data) + 1, size - 1));
  const FoldKey fold{1795941330123000, 3, 1, "evt_1"};
  switch (data[0] % 6) {
    case 0: {
      // The encoder keeps the body and its received_at (format 8): the
      // identity is the body's, which DecodeStoredEvent decodes.
      RoundTrip<StoredEvent>(EventKey(7), value, DecodeStoredBody, EncodeEvent,
                             [](const StoredEvent& a, const StoredEvent& b) {
                               return a.seq == b.seq && a.received_at == b.received_at &&
                                      a.body == b.body && !b.has_identity;
                             });
      Result<StoredEvent> whole = DecodeStoredEvent(EventKey(7), value);
      Check(whole.ok() ? whole->has_identity : whole.status().IsCorruption());
      break;
    }
    case 1:
      RoundTrip<LogEntry>(
          LogKey(1, {"receipt", "rcp_1"}, fold), value,
          [](std::string_view k, std::string_view v) {
            return DecodeLog(k, v, Profile::ReceiptRoller());
          },
          [](const LogEntry& e) { return e.has_data ? EncodeLogWithData(e) : EncodeLog(e); },
          [](const LogEntry& a, const LogEntry& b) {
            // A lean record comes back as format 8's: its type is the
            // rank's (receipt.refunded) and its received_at a/<seq>'s.
            Event lean = a.ranked.event;
            lean.type = "receipt.refunded";
            return (a.has_data ? b.ranked.event == a.ranked.event && b.received_at == a.received_at
                               : b.ranked.event == lean && b.received_at == 0) &&
                   a.ranked.rank == b.ranked.rank && a.seq == b.seq && a.has_data == b.has_data;
          });
      break;
    case 2:
      RoundTrip<DedupEntry>(
          DedupKey("evt_1"), value, DecodeDedup, EncodeDedup,
          [](const DedupEntry& a, const DedupEntry& b) {
            // The encoder leaves out the identity of a stored event with a
            // digest, and keeps 16 bytes of that digest.
            const bool lean = a.expires_at == 0 && a.body_digest.size() >= kDedupDigestBytes;
            return a.seq == b.seq && a.entity == b.entity && a.routing_epoch == b.routing_epoch &&
                   a.expires_at == b.expires_at && b.has_identity == !lean &&
                   (lean || (a.type == b.type && a.occurred_at == b.occurred_at)) &&
                   b.body_digest ==
                       (lean ? a.body_digest.substr(0, kDedupDigestBytes) : a.body_digest);
          });
      break;
    case 3:
      RoundTrip<ProjectionState>(
          ProjectionKey(1, {"receipt", "rcp_1"}), value, DecodeProjection,
          [](const ProjectionState& s) {
            return s.cursor_only ? EncodeProjectionCursor(s) : EncodeProjection(s);
          },
          [](const ProjectionState& a, const ProjectionState& b) {
            return a.projection == b.projection && a.events == b.events && a.last == b.last &&
                   a.cursor_only == b.cursor_only && a.snapshots == b.snapshots;
          });
      break;
    case 4:
      RoundTrip<Change>(FeedKey(9), value, DecodeChange, EncodeChange,
                        [](const Change& a, const Change& b) { return a == b; });
      break;
    default:
      // Under another kind's key: refused, never read as that kind.
      if (size > 1 && data[1] >= 0xC0) {
        Check(!DecodeChange(ProjectionKey(1, {"receipt", "rcp_1"}), value).ok() || data[1] == 0xE5);
      }
      break;
  }
  return 0;
}
