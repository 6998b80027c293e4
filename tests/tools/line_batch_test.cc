// How `eventfold ingest` reads its input (tools/line_batch.h): ReadLine
// gives every line whole up to its bound whatever the chunks it is read in
// (lines around the 64 KiB chunk, with and without a last newline, CR LF)
// and only the bound of a longer one, with its length; ReadBatch ends a
// batch at its lines or bytes, refused lines counted, and keeps of a
// refusal what the quarantine keeps.

#include "tools/line_batch.h"

#include <gtest/gtest.h>

#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/common/test_seed.h"

namespace eventfold::cli {
namespace {

// Every line ReadLine gives for `text`, cut at `max`, with its length.
std::vector<std::pair<std::string, size_t>> AllLines(const std::string& text, size_t max) {
  std::istringstream in(text);
  std::vector<std::pair<std::string, size_t>> out;
  std::string line;
  size_t length = 0;
  while (ReadLine(in, max, &line, &length)) out.emplace_back(line, length);
  return out;
}

// Lines of random lengths around the reading chunk (64 KiB) and the bound,
// each read back whole or cut at the bound with its length, as
// std::getline reads them: the same lines, the last one with or without
// its newline.
TEST(LineBatch, ReadLineGivesEachLineAsGetlineDoesCutAtItsBound) {
  std::mt19937_64 rng(test_util::TestSeed("ReadLineAroundTheChunk", 20261207));
  const size_t chunk = 64 * 1024;
  const std::vector<size_t> lengths = {0,     1,         chunk - 2, chunk - 1,
                                       chunk, chunk + 1, 2 * chunk, 3 * chunk + 7};
  for (int round = 0; round < 20; ++round) {
    const size_t max = std::uniform_int_distribution<size_t>(1, 3 * chunk)(rng);
    std::string text;
    std::vector<std::string> want;
    const int lines = std::uniform_int_distribution<int>(1, 6)(rng);
    for (int i = 0; i < lines; ++i) {
      const size_t n =
          round % 2 == 0
              ? lengths[std::uniform_int_distribution<size_t>(0, lengths.size() - 1)(rng)]
              : std::uniform_int_distribution<size_t>(0, 3 * chunk)(rng);
      want.push_back(std::string(n, static_cast<char>('a' + i)));
      text += want.back();
      if (i + 1 < lines || round % 3 != 0) text += '\n';
    }
    const auto got = AllLines(text, max);
    ASSERT_EQ(got.size(), want.size()) << "round " << round;
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(got[i].second, want[i].size()) << "round " << round << " line " << i;
      EXPECT_EQ(got[i].first, want[i].substr(0, max)) << "round " << round << " line " << i;
    }
  }
  EXPECT_TRUE(AllLines("", 10).empty());
  EXPECT_EQ(AllLines("a\r\n\nb", 10),
            (std::vector<std::pair<std::string, size_t>>{{"a\r", 2}, {"", 0}, {"b", 1}}));
}

// A file of refused lines: each batch ends at kBatchLines lines, refusals
// counted, and a refusal keeps its body's first kQuarantineBodyBytes with
// the body's whole size. (Held whole and uncounted, such a file was held
// whole before its first report.)
TEST(LineBatch, RefusedLinesCountTowardTheBatchAndKeepOnlyTheQuarantinesShare) {
  Result<SignatureVerifier> verifier =
      SignatureVerifier::Make({"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, 300);
  ASSERT_TRUE(verifier.ok()) << verifier.status().ToString();
  const std::string line = "{\"event\":\"" + std::string(5000, 'x') + "\"}";  // not an envelope
  std::string text;
  for (size_t i = 0; i < kBatchLines + 10; ++i) text += line + "\n";
  std::istringstream in(text);
  size_t line_no = 0;
  std::optional<LineBatch> first = ReadBatch(in, *verifier, &line_no);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->refusals.size(), kBatchLines);
  EXPECT_TRUE(first->deliveries.empty());
  EXPECT_EQ(first->last_line, kBatchLines);
  for (const LineRefusal& r : first->refusals) {
    EXPECT_EQ(r.result.outcome, Outcome::kUnauthorized) << r.result.message;
    ASSERT_TRUE(r.quarantine.has_value());
    EXPECT_EQ(r.quarantine->body_prefix.size(), kQuarantineBodyBytes);
    EXPECT_EQ(r.quarantine->body_bytes, line.size());
  }
  std::optional<LineBatch> second = ReadBatch(in, *verifier, &line_no);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->refusals.size(), 10u);
  EXPECT_FALSE(ReadBatch(in, *verifier, &line_no).has_value());
}

// Bodies end a batch by their bytes: the line that takes them to
// kBatchBytes is the batch's last.
TEST(LineBatch, ABatchEndsAtItsBytes) {
  const std::string body = "{\"pad\":\"" + std::string(1 << 20, 'p') + "\"}";
  std::string text;
  for (int i = 0; i < 20; ++i) text += body + "\n";
  std::istringstream in(text);
  size_t line_no = 0;
  std::optional<LineBatch> first = ReadBatch(in, std::nullopt, &line_no);
  ASSERT_TRUE(first.has_value());
  const size_t per_batch = (kBatchBytes + body.size() - 1) / body.size();
  EXPECT_EQ(first->deliveries.size(), per_batch);
  EXPECT_GE(first->bytes, kBatchBytes);
  EXPECT_LT(first->bytes - body.size(), kBatchBytes);
  std::optional<LineBatch> second = ReadBatch(in, std::nullopt, &line_no);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(second->line_numbers.front(), per_batch + 1);
}

}  // namespace
}  // namespace eventfold::cli
