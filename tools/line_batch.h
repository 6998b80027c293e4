// LineBatch: how `eventfold ingest` reads its input, a batch of lines at a
// time: each line parsed (a bare body or a signed envelope), checked
// against the secrets when there are some, and either kept as a delivery for
// the batch's IngestBatch or refused with what the quarantine keeps of it.
// Bounded while reading: a batch ends at kBatchLines lines or kBatchBytes,
// and no line is held past kMaxLineBytes.
//
// Thread-safety: ReadBatch uses its stream and verifier only; one thread
// reads one stream.

#ifndef EVENTFOLD_TOOLS_LINE_BATCH_H_
#define EVENTFOLD_TOOLS_LINE_BATCH_H_

#include <cstddef>
#include <istream>
#include <optional>
#include <string>
#include <vector>

#include "core/signature.h"
#include "eventfold/ingest.h"
#include "eventfold/quarantine.h"

namespace eventfold::cli {

// Lines per IngestBatch: one atomic write and one sync each.
inline constexpr size_t kBatchLines = 1000;
// A batch also ends after the line that takes what it holds (its bodies,
// and what it keeps of refused lines: a quarantine's share) to this many
// bytes. Webhook bodies (under 1 KiB, typically) fill 1,000 lines long
// before it; bodies near the store's limit (Options::max_body_bytes, 1 MiB)
// would make a 1,000-line batch a 1 GiB write, held as the batch, again in
// LevelDB's write batch and memtable (a 180 MB file of 900 KB bodies peaked
// at 549 MB), and replayed whole from LevelDB's log by the next open.
inline constexpr size_t kBatchBytes = 8 << 20;
// The longest line read whole. A longer one (a body over the store's limit,
// or a file that is not NDJSON at all) is refused as too large while it is
// read: its first kept bytes go to the quarantine, the rest is skipped, so
// no line costs more memory than this. An envelope line carries its body
// JSON-escaped, which can take several times the body's bytes.
inline constexpr size_t kMaxLineBytes = 8 << 20;

// A line refused before ingest (unparseable, or its signature fails): the
// receiver's 400 or 401, and what the quarantine keeps of it.
struct LineRefusal {
  size_t line_no = 0;
  IngestResult result;
  std::optional<RefusedDelivery> quarantine;
};

// Up to kBatchLines lines and kBatchBytes: the deliveries, and the lines
// refused while reading them (reported before the batch's results, in line
// order).
struct LineBatch {
  std::vector<Delivery> deliveries;
  std::vector<size_t> line_numbers;
  std::vector<LineRefusal> refusals;
  size_t last_line = 0;  // the input's last line read into this batch
  size_t bytes = 0;      // the deliveries' bodies and what the refusals keep

  // No more lines go in: kBatchLines of them, or kBatchBytes.
  bool Full() const;
  // Adds delivery `d`, read from line `line_no`.
  void Add(Delivery d, size_t line_no);
  // Adds a refusal of line `line_no`, keeping of `quarantine` what the
  // quarantine would (its body's first kQuarantineBodyBytes and the body's
  // size), not the whole line until the batch is settled.
  void Refuse(size_t line_no, Outcome outcome, std::string message,
              std::optional<RefusedDelivery> quarantine);
};

// Reads one line of `in` into *line, without its '\n'; false at the end of
// the input (or on a read error, as std::getline). Keeps at most `max`
// bytes of it: a longer line is read to its end and *length says how long
// it was (otherwise line->size()). (std::getline would hold the whole
// line, whatever its length.)
bool ReadLine(std::istream& in, size_t max, std::string* line, size_t* length);

// Reads lines from `in` until a batch is full (LineBatch::Full) or the
// input ends; nullopt at the end with nothing read. `line_no` is the last
// line read (blank lines are skipped, and counted). With `verifier`, every
// line must be an envelope whose signature verifies on the system clock.
std::optional<LineBatch> ReadBatch(std::istream& in,
                                   const std::optional<SignatureVerifier>& verifier,
                                   size_t* line_no);

}  // namespace eventfold::cli

#endif  // EVENTFOLD_TOOLS_LINE_BATCH_H_
