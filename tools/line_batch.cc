#include "tools/line_batch.h"

#include <algorithm>
#include <utility>

#include "core/envelope.h"
#include "eventfold/clock.h"

namespace eventfold::cli {
namespace {

// With secrets, every line must be a signed envelope: the receiver's check.
Status VerifyLine(const SignatureVerifier& verifier, bool envelope, const Delivery& d) {
  if (!envelope) {
    return Status::InvalidArgument(
        "signature: with --secret every line must be an envelope with headers");
  }
  return verifier.Verify(d.headers, d.body, SystemClock()->NowMicros(), nullptr);
}

}  // namespace

bool LineBatch::Full() const {
  return deliveries.size() + refusals.size() >= kBatchLines || bytes >= kBatchBytes;
}

void LineBatch::Add(Delivery d, size_t line_no) {
  bytes += d.body.size();
  deliveries.push_back(std::move(d));
  line_numbers.push_back(line_no);
}

void LineBatch::Refuse(size_t line_no, Outcome outcome, std::string message,
                       std::optional<RefusedDelivery> quarantine) {
  LineRefusal& r = refusals.emplace_back();
  r.line_no = line_no;
  r.result.outcome = outcome;
  r.result.message = std::move(message);
  if (quarantine) {
    std::string& prefix = quarantine->body_prefix;
    if (quarantine->body_bytes == 0) quarantine->body_bytes = prefix.size();
    if (prefix.size() > kQuarantineBodyBytes) {
      prefix.resize(kQuarantineBodyBytes);
      prefix.shrink_to_fit();
    }
    bytes += prefix.size() + r.result.message.size();
    for (const auto& [name, value] : quarantine->headers) bytes += name.size() + value.size();
  }
  r.quarantine = std::move(quarantine);
}

bool ReadLine(std::istream& in, size_t max, std::string* line, size_t* length) {
  line->clear();
  *length = 0;
  char chunk[64 * 1024];
  for (bool first = true;; first = false) {
    in.getline(chunk, sizeof chunk);
    if (in.bad()) return false;  // a read error ends the input, as for std::getline
    const auto got = static_cast<size_t>(in.gcount());  // with the '\n', when read
    const bool eof = in.eof();
    if (eof && got == 0 && first) return false;
    // The chunk filled before the line's end: failbit without eofbit.
    const bool more = in.fail() && !eof;
    const size_t chars = more || eof ? got : got - 1;
    *length += chars;
    if (line->size() < max) line->append(chunk, std::min(chars, max - line->size()));
    if (!more) return true;
    in.clear();
  }
}

std::optional<LineBatch> ReadBatch(std::istream& in,
                                   const std::optional<SignatureVerifier>& verifier,
                                   size_t* line_no) {
  LineBatch batch;
  batch.deliveries.reserve(kBatchLines);
  batch.line_numbers.reserve(kBatchLines);
  std::string line;
  size_t length = 0;
  while (!batch.Full() && ReadLine(in, kMaxLineBytes, &line, &length)) {
    ++*line_no;
    if (length > kMaxLineBytes) {
      const std::string reason = "line: " + std::to_string(length) +
                                 " bytes exceeds the limit of " + std::to_string(kMaxLineBytes);
      RefusedDelivery r;
      r.outcome = Outcome::kTooLarge;
      r.reason = reason;
      r.body_bytes = length;
      r.body_prefix = std::move(line);
      line.clear();
      batch.Refuse(*line_no, Outcome::kTooLarge, reason, std::move(r));
      continue;
    }
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    // Read before the line's bytes move into the delivery.
    const bool envelope = verifier && IsEnvelope(line);
    Result<Delivery> d = ParseNdjsonLine(std::move(line));
    if (!d.ok()) {
      // An envelope the line check refuses never reaches the store, which
      // quarantines its own refusals: kept here like them, the whole line
      // standing for the body (the quarantine keeps its first 1 KiB).
      RefusedDelivery r;
      r.outcome = Outcome::kInvalid;
      r.reason = d.status().message();
      r.body_bytes = line.size();
      r.body_prefix = std::move(line);  // intact: see ParseNdjsonLine
      batch.Refuse(*line_no, Outcome::kInvalid, d.status().message(), std::move(r));
      continue;
    }
    if (verifier) {
      Status st = VerifyLine(*verifier, envelope, *d);
      if (!st.ok()) {
        RefusedDelivery r;
        r.outcome = Outcome::kUnauthorized;
        r.reason = st.message();
        r.headers = d->headers;
        r.body_bytes = d->body.size();
        r.body_prefix = d->body.substr(0, kQuarantineBodyBytes);
        batch.Refuse(*line_no, Outcome::kUnauthorized, st.message(), std::move(r));
        continue;
      }
    }
    batch.Add(std::move(*d), *line_no);
  }
  if (batch.deliveries.empty() && batch.refusals.empty()) return std::nullopt;
  batch.last_line = *line_no;
  return batch;
}

}  // namespace eventfold::cli
