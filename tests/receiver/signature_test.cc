// Webhook signature verification (docs/SPEC.md §2.4): published vectors, a cross-check
// against the openssl command, every refusal, tolerance edges, secret
// validation and the base64 helpers.

#include "core/signature.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/sha256.h"
#include "tests/receiver/receiver_test_util.h"

namespace eventfold {
namespace {

using receiver_test::TestSeed;

constexpr int64_t kMicros = 1000000;
constexpr int64_t kNow = 1795000000;  // 2026-11-18, unix seconds
const std::string kSecret = "rr_test_secret_0123456789";
const std::string kSecret2 = "rr_rotated_secret_abcdefghij";
const std::string kBody =
    R"({"event_id":"evt_1","type":"receipt.issued","occurred_at":"2026-11-29T10:15:30Z","data":{"receipt_id":"rcp_1"}})";

SignatureVerifier MakeVerifier(const std::vector<std::string>& secrets, int64_t tolerance = 300) {
  Result<SignatureVerifier> v = SignatureVerifier::Make(secrets, tolerance);
  EXPECT_TRUE(v.ok()) << v.status().message();
  return std::move(*v);
}

Headers RrHeaders(const std::string& signature) { return {{"X-RR-Signature", signature}}; }

// The v1 hex of a header made by SignRr.
std::string V1Of(const std::string& header) {
  const size_t at = header.find("v1=");
  return at == std::string::npos ? "" : header.substr(at + 3);
}

// Every refusal must name a header and leak neither a secret nor the
// signature that would have been valid.
void ExpectRefusedNaming(const Status& st, const std::string& header_prefix,
                         const std::vector<std::string>& must_not_contain = {}) {
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.IsInvalidArgument()) << st.ToString();
  EXPECT_EQ(st.message().rfind(header_prefix, 0), 0u)
      << "message \"" << st.message() << "\" should start with \"" << header_prefix << "\"";
  for (const std::string& secret : {kSecret, kSecret2}) {
    EXPECT_EQ(st.message().find(secret), std::string::npos) << st.message();
  }
  for (const std::string& s : must_not_contain) {
    if (!s.empty()) {
      EXPECT_EQ(st.message().find(s), std::string::npos) << st.message();
    }
  }
}

// --- published vectors -------------------------------------------------------

TEST(receiver_signature, StandardWebhooksPublishedVector) {
  const std::string secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  const std::string id = "msg_p5jXN8AQM9LWM0D4loKWxJek";
  const std::string body = R"({"test": 2432232314})";
  const std::string sig = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=";
  SignatureVerifier v = MakeVerifier({secret});
  Headers h = {{"webhook-id", id}, {"webhook-timestamp", "1614265330"}, {"webhook-signature", sig}};

  std::optional<std::string> covered;
  Status st = v.Verify(h, body, 1614265330 * kMicros, &covered);
  EXPECT_TRUE(st.ok()) << st.message();
  EXPECT_EQ(covered, id);
  EXPECT_EQ(SignStandard(secret, id, 1614265330, body), sig);

  // Header names are case-insensitive.
  Headers upper = {
      {"Webhook-Id", id}, {"WEBHOOK-TIMESTAMP", "1614265330"}, {"Webhook-Signature", sig}};
  EXPECT_TRUE(v.Verify(upper, body, 1614265330 * kMicros, nullptr).ok());

  // The same vector, one byte of body changed or another id: refused.
  ExpectRefusedNaming(v.Verify(h, R"({"test": 2432232315})", 1614265330 * kMicros, nullptr),
                      "webhook-signature: ");
  Headers other_id = h;
  other_id[0].second = "msg_other";
  ExpectRefusedNaming(v.Verify(other_id, body, 1614265330 * kMicros, nullptr),
                      "webhook-signature: ");
  // Years later: outside the tolerance.
  ExpectRefusedNaming(v.Verify(h, body, kNow * kMicros, nullptr), "webhook-timestamp: ");
}

TEST(receiver_signature, GitHubDocumentedHmacExample) {
  EXPECT_EQ(ToHex(HmacSha256("It's a Secret to Everybody", "Hello, World!")),
            "757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17");
  EXPECT_EQ(HmacSha256("k", "m").size(), 32u);
}

// --- cross-check against the openssl command --------------------------------

std::string OpensslHmacHex(const std::string& key, const std::string& payload_file) {
  // The keys used here are [A-Za-z0-9_] only, so single quotes suffice.
  const std::string cmd = "openssl dgst -sha256 -hmac '" + key + "' '" + payload_file + "'";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return "";
  std::string out;
  char buf[256];
  while (fgets(buf, sizeof(buf), p)) out += buf;
  if (pclose(p) != 0) return "";
  // "HMAC-SHA2-256(file)= <hex>\n" (OpenSSL 3) or "HMAC-SHA256(file)= <hex>".
  const size_t eq = out.rfind("= ");
  if (eq == std::string::npos) return "";
  std::string hex = out.substr(eq + 2);
  while (!hex.empty() && (hex.back() == '\n' || hex.back() == '\r')) hex.pop_back();
  return hex;
}

TEST(receiver_signature, MatchesOpensslCommandOnRandomBodies) {
  const uint64_t seed =
      TestSeed("receiver_signature.MatchesOpensslCommandOnRandomBodies", 20261129);
  std::mt19937_64 rng(seed);
  receiver_test::TempDir dir("sig-openssl");
  const std::string alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_";
  for (int round = 0; round < 24; ++round) {
    std::string key;
    const size_t key_len = 16 + rng() % 48;
    for (size_t i = 0; i < key_len; ++i) key += alnum[rng() % alnum.size()];
    std::string body;
    const size_t body_len = rng() % 3000;
    for (size_t i = 0; i < body_len; ++i) body += static_cast<char>(rng() & 0xff);
    const int64_t t = kNow - 200 + static_cast<int64_t>(rng() % 400);

    const std::string payload = std::to_string(t) + "." + body;
    const std::string file = dir.path() + "/payload" + std::to_string(round);
    std::ofstream(file, std::ios::binary) << payload;
    const std::string expected = OpensslHmacHex(key, file);
    ASSERT_EQ(expected.size(), 64u) << "openssl dgst failed, round " << round;

    const std::string header = SignRr(key, t, body);
    EXPECT_EQ(header, "t=" + std::to_string(t) + ",v1=" + expected) << "round " << round;
    SignatureVerifier v = MakeVerifier({key});
    Status st = v.Verify(RrHeaders("t=" + std::to_string(t) + ",v1=" + expected), body,
                         kNow * kMicros, nullptr);
    EXPECT_TRUE(st.ok()) << "round " << round << ": " << st.message();
    // One flipped bit of the body: refused.
    if (!body.empty()) {
      std::string tampered = body;
      tampered[rng() % tampered.size()] ^= static_cast<char>(1 << (rng() % 8));
      EXPECT_FALSE(v.Verify(RrHeaders(header), tampered, kNow * kMicros, nullptr).ok());
    }
  }
}

// --- X-RR-Signature refusals -------------------------------------------------

TEST(receiver_signature, MissingSignatureIsRefused) {
  SignatureVerifier v = MakeVerifier({kSecret});
  Status st = v.Verify({}, kBody, kNow * kMicros, nullptr);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("X-RR-Signature"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("webhook-signature"), std::string::npos) << st.message();
  // Unrelated headers do not count as a signature.
  EXPECT_FALSE(v.Verify({{"X-RR-Event-Id", "evt_1"}, {"Authorization", "Bearer " + kSecret}}, kBody,
                        kNow * kMicros, nullptr)
                   .ok());
}

TEST(receiver_signature, ValidRrSignaturePasses) {
  SignatureVerifier v = MakeVerifier({kSecret});
  EXPECT_TRUE(
      v.Verify(RrHeaders(SignRr(kSecret, kNow, kBody)), kBody, kNow * kMicros, nullptr).ok());
  // Header name case does not matter.
  EXPECT_TRUE(
      v.Verify({{"x-rr-signature", SignRr(kSecret, kNow, kBody)}}, kBody, kNow * kMicros, nullptr)
          .ok());
  // An empty body can be signed too.
  EXPECT_TRUE(v.Verify(RrHeaders(SignRr(kSecret, kNow, "")), "", kNow * kMicros, nullptr).ok());
}

TEST(receiver_signature, EveryMalformedOrWrongRrHeaderIsRefused) {
  SignatureVerifier v = MakeVerifier({kSecret});
  const std::string t = std::to_string(kNow);
  const std::string good = V1Of(SignRr(kSecret, kNow, kBody));
  ASSERT_EQ(good.size(), 64u);
  std::string upper = good;
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  ASSERT_NE(upper, good);  // a SHA-256 hex with no a-f digit is astronomically unlikely

  const std::vector<std::pair<std::string, std::string>> cases = {
      {"empty header", ""},
      {"garbage", "garbage"},
      {"garbage with commas", ",,,"},
      {"no t=", "v1=" + good},
      {"t not digits", "t=12a4,v1=" + good},
      {"t negative", "t=-" + t + ",v1=" + good},
      {"t empty", "t=,v1=" + good},
      {"t with fraction", "t=" + t + ".5,v1=" + good},
      {"t too long", "t=0000000000000" + t + ",v1=" + good},
      {"two timestamps", "t=" + t + ",t=" + t + ",v1=" + good},
      {"no v1", "t=" + t},
      {"only v0", "t=" + t + ",v0=" + good},
      {"empty v1=", "t=" + t + ",v1="},
      {"v1, without =", "t=" + t + ",v1,"},
      {"truncated to 63 hex", "t=" + t + ",v1=" + good.substr(0, 63)},
      {"one extra hex digit", "t=" + t + ",v1=" + good + "0"},
      {"upper-case hex", "t=" + t + ",v1=" + upper},
      {"base64 instead of hex",
       "t=" + t + ",v1=" + Base64Encode(HmacSha256(kSecret, t + "." + kBody))},
      {"raw bytes", "t=" + t + ",v1=" + HmacSha256(kSecret, t + "." + kBody)},
      {"signature of another t", "t=" + std::to_string(kNow - 1) + ",v1=" + good},
      {"trailing garbage part", "t=" + t + ",v1=" + good + ",junk"},
  };
  for (const auto& [name, header] : cases) {
    SCOPED_TRACE(name);
    ExpectRefusedNaming(v.Verify(RrHeaders(header), kBody, kNow * kMicros, nullptr),
                        "X-RR-Signature: ", {good});
  }
}

TEST(receiver_signature, WrongSecretAndTamperedBodyAreRefused) {
  SignatureVerifier v = MakeVerifier({kSecret});
  const std::string good = V1Of(SignRr(kSecret, kNow, kBody));
  ExpectRefusedNaming(
      v.Verify(RrHeaders(SignRr(kSecret2, kNow, kBody)), kBody, kNow * kMicros, nullptr),
      "X-RR-Signature: ", {good});
  std::string tampered = kBody;
  tampered.replace(tampered.find("rcp_1"), 5, "rcp_2");
  ExpectRefusedNaming(
      v.Verify(RrHeaders(SignRr(kSecret, kNow, kBody)), tampered, kNow * kMicros, nullptr),
      "X-RR-Signature: ");
  // A body with one trailing byte more (e.g. a newline a proxy added).
  ExpectRefusedNaming(
      v.Verify(RrHeaders(SignRr(kSecret, kNow, kBody)), kBody + "\n", kNow * kMicros, nullptr),
      "X-RR-Signature: ");
}

TEST(receiver_signature, UnknownSchemeIsSkippedWhenAValidV1IsPresent) {
  SignatureVerifier v = MakeVerifier({kSecret});
  const std::string t = std::to_string(kNow);
  const std::string good = V1Of(SignRr(kSecret, kNow, kBody));
  const std::string bogus(64, 'a');
  EXPECT_TRUE(
      v.Verify(RrHeaders("t=" + t + ",v0=" + bogus + ",v1=" + good), kBody, kNow * kMicros, nullptr)
          .ok());
  EXPECT_TRUE(
      v.Verify(RrHeaders("v1=" + good + ",v2=zzz,t=" + t), kBody, kNow * kMicros, nullptr).ok());
}

TEST(receiver_signature, MultipleV1WithOneValidPasses) {
  SignatureVerifier v = MakeVerifier({kSecret});
  const std::string t = std::to_string(kNow);
  const std::string good = V1Of(SignRr(kSecret, kNow, kBody));
  const std::string wrong = V1Of(SignRr(kSecret2, kNow, kBody));
  EXPECT_TRUE(
      v.Verify(RrHeaders("t=" + t + ",v1=" + wrong + ",v1=" + good), kBody, kNow * kMicros, nullptr)
          .ok());
  EXPECT_TRUE(
      v.Verify(RrHeaders("t=" + t + ",v1=" + good + ",v1=" + wrong), kBody, kNow * kMicros, nullptr)
          .ok());
  ExpectRefusedNaming(v.Verify(RrHeaders("t=" + t + ",v1=" + wrong + ",v1=" + wrong), kBody,
                               kNow * kMicros, nullptr),
                      "X-RR-Signature: ");
}

TEST(receiver_signature, RotationAcceptsAnyConfiguredSecret) {
  SignatureVerifier both = MakeVerifier({kSecret, kSecret2});
  SignatureVerifier old_only = MakeVerifier({kSecret});
  const std::string by_second = SignRr(kSecret2, kNow, kBody);
  EXPECT_TRUE(both.Verify(RrHeaders(by_second), kBody, kNow * kMicros, nullptr).ok());
  EXPECT_TRUE(
      both.Verify(RrHeaders(SignRr(kSecret, kNow, kBody)), kBody, kNow * kMicros, nullptr).ok());
  ExpectRefusedNaming(old_only.Verify(RrHeaders(by_second), kBody, kNow * kMicros, nullptr),
                      "X-RR-Signature: ");
  // The sender's rotation form: both signatures in one header.
  const std::string t = std::to_string(kNow);
  SignatureVerifier new_only = MakeVerifier({kSecret2});
  const std::string dual =
      "t=" + t + ",v1=" + V1Of(SignRr(kSecret, kNow, kBody)) + ",v1=" + V1Of(by_second);
  EXPECT_TRUE(new_only.Verify(RrHeaders(dual), kBody, kNow * kMicros, nullptr).ok());
  EXPECT_TRUE(old_only.Verify(RrHeaders(dual), kBody, kNow * kMicros, nullptr).ok());
}

// --- tolerance edges ---------------------------------------------------------

void ExpectToleranceEdges(int64_t tolerance) {
  SCOPED_TRACE("tolerance " + std::to_string(tolerance));
  const std::string whsec = "whsec_" + Base64Encode("0123456789abcdef0123");
  SignatureVerifier v = MakeVerifier({kSecret, whsec}, tolerance);
  EXPECT_EQ(v.tolerance_seconds(), tolerance);
  const int64_t now = kNow * kMicros;
  for (int64_t delta : {-tolerance - 1, -tolerance, int64_t{0}, tolerance, tolerance + 1}) {
    SCOPED_TRACE("t = now + " + std::to_string(delta));
    const int64_t t = kNow + delta;
    const bool inside = delta >= -tolerance && delta <= tolerance;
    Status rr = v.Verify(RrHeaders(SignRr(kSecret, t, kBody)), kBody, now, nullptr);
    Headers sw = {{"webhook-id", "evt_1"},
                  {"webhook-timestamp", std::to_string(t)},
                  {"webhook-signature", SignStandard(whsec, "evt_1", t, kBody)}};
    Status standard = v.Verify(sw, kBody, now, nullptr);
    if (inside) {
      EXPECT_TRUE(rr.ok()) << rr.message();
      EXPECT_TRUE(standard.ok()) << standard.message();
    } else {
      ExpectRefusedNaming(rr, "X-RR-Signature: ");
      ExpectRefusedNaming(standard, "webhook-timestamp: ");
    }
  }
}

TEST(receiver_signature, ToleranceEdgesDefault) { ExpectToleranceEdges(300); }
TEST(receiver_signature, ToleranceEdgesCustom) { ExpectToleranceEdges(7); }
TEST(receiver_signature, ToleranceEdgesZero) { ExpectToleranceEdges(0); }

TEST(receiver_signature, NegativeToleranceIsRefused) {
  EXPECT_FALSE(SignatureVerifier::Make({kSecret}, -1).ok());
}

// --- Standard Webhooks refusals ----------------------------------------------

TEST(receiver_signature, EveryMalformedOrWrongStandardHeaderIsRefused) {
  const std::string whsec = "whsec_" + Base64Encode("standard-key-0123456789");
  const std::string other = "whsec_" + Base64Encode("another-key-0123456789!");
  SignatureVerifier v = MakeVerifier({whsec});
  const std::string t = std::to_string(kNow);
  const std::string good = SignStandard(whsec, "evt_1", kNow, kBody);
  const std::string good_b64 = good.substr(3);
  auto headers = [&](std::optional<std::string> id, std::optional<std::string> ts,
                     std::string sig) {
    Headers h;
    if (id) h.emplace_back("webhook-id", *id);
    if (ts) h.emplace_back("webhook-timestamp", *ts);
    h.emplace_back("webhook-signature", sig);
    return h;
  };
  EXPECT_TRUE(v.Verify(headers("evt_1", t, good), kBody, kNow * kMicros, nullptr).ok());
  // Several space-separated signatures, one valid (rotation); unknown versions skipped.
  EXPECT_TRUE(
      v.Verify(headers("evt_1", t,
                       "v1a,xyz v2,abc " + SignStandard(other, "evt_1", kNow, kBody) + " " + good),
               kBody, kNow * kMicros, nullptr)
          .ok());

  struct Case {
    std::string name;
    Headers h;
    std::string body;
    std::string prefix;
  };
  const std::vector<Case> cases = {
      {"no webhook-id", headers(std::nullopt, t, good), kBody, "webhook-id: "},
      {"empty webhook-id", headers("", t, good), kBody, "webhook-id: "},
      {"no webhook-timestamp", headers("evt_1", std::nullopt, good), kBody, "webhook-timestamp: "},
      {"timestamp not digits", headers("evt_1", "soon", good), kBody, "webhook-timestamp: "},
      {"timestamp negative", headers("evt_1", "-" + t, good), kBody, "webhook-timestamp: "},
      {"empty v1,", headers("evt_1", t, "v1,"), kBody, "webhook-signature: "},
      {"empty header", headers("evt_1", t, ""), kBody, "webhook-signature: "},
      {"garbage", headers("evt_1", t, "garbage"), kBody, "webhook-signature: "},
      {"only v2", headers("evt_1", t, "v2," + good_b64), kBody, "webhook-signature: "},
      {"v1= instead of v1,", headers("evt_1", t, "v1=" + good_b64), kBody, "webhook-signature: "},
      {"truncated base64", headers("evt_1", t, good.substr(0, good.size() - 2)), kBody,
       "webhook-signature: "},
      {"hex instead of base64",
       headers("evt_1", t,
               "v1," + ToHex(HmacSha256(Base64Decode(whsec.substr(6)).value(),
                                        "evt_1." + t + "." + kBody))),
       kBody, "webhook-signature: "},
      {"wrong secret", headers("evt_1", t, SignStandard(other, "evt_1", kNow, kBody)), kBody,
       "webhook-signature: "},
      {"tampered body", headers("evt_1", t, good), kBody + " ", "webhook-signature: "},
      {"other id", headers("evt_2", t, good), kBody, "webhook-signature: "},
      {"other timestamp", headers("evt_1", std::to_string(kNow + 1), good), kBody,
       "webhook-signature: "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::optional<std::string> covered;
    ExpectRefusedNaming(v.Verify(c.h, c.body, kNow * kMicros, &covered), c.prefix,
                        {good_b64, whsec, whsec.substr(6)});
    EXPECT_FALSE(covered.has_value());
  }
}

TEST(receiver_signature, AHeaderTheCheckReadsSentTwiceIsRefused) {
  // Two lines of a header the check reads: which one was signed is
  // ambiguous, even when one of them is valid on its own.
  const std::string whsec = "whsec_" + Base64Encode("standard-key-0123456789");
  SignatureVerifier v = MakeVerifier({kSecret, whsec});
  const std::string t = std::to_string(kNow);
  const std::string rr = SignRr(kSecret, kNow, kBody);
  const std::string standard = SignStandard(whsec, "evt_1", kNow, kBody);
  const Headers rr_once = {{"X-RR-Signature", rr}};
  const Headers standard_once = {
      {"webhook-id", "evt_1"}, {"webhook-timestamp", t}, {"webhook-signature", standard}};
  ASSERT_TRUE(v.Verify(rr_once, kBody, kNow * kMicros, nullptr).ok());
  ASSERT_TRUE(v.Verify(standard_once, kBody, kNow * kMicros, nullptr).ok());

  struct Case {
    std::string name;
    Headers h;
  };
  const std::vector<Case> cases = {
      {"X-RR-Signature", {{"X-RR-Signature", rr}, {"x-rr-signature", "t=" + t + ",v1=00"}}},
      {"X-RR-Signature", {{"X-RR-Signature", rr}, {"X-RR-Signature", rr}}},
      {"webhook-signature",
       {{"webhook-id", "evt_1"},
        {"webhook-timestamp", t},
        {"webhook-signature", standard},
        {"Webhook-Signature", "v1,AAAA"}}},
      {"webhook-id",
       {{"webhook-id", "evt_1"},
        {"webhook-id", "evt_2"},
        {"webhook-timestamp", t},
        {"webhook-signature", standard}}},
      {"webhook-timestamp",
       {{"webhook-id", "evt_1"},
        {"webhook-timestamp", t},
        {"WEBHOOK-TIMESTAMP", std::to_string(kNow - 1)},
        {"webhook-signature", standard}}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    std::optional<std::string> covered;
    Status st = v.Verify(c.h, kBody, kNow * kMicros, &covered);
    ExpectRefusedNaming(st, c.name + ": ", {V1Of(rr), standard.substr(3)});
    EXPECT_NE(st.message().find("more than once"), std::string::npos) << st.message();
    EXPECT_FALSE(covered.has_value());
  }
  // Headers the check does not read may come twice.
  Headers with_other = rr_once;
  with_other.emplace_back("X-Forwarded-For", "10.0.0.1");
  with_other.emplace_back("X-Forwarded-For", "10.0.0.2");
  EXPECT_TRUE(v.Verify(with_other, kBody, kNow * kMicros, nullptr).ok());
}

TEST(receiver_signature, StandardWebhooksNeedAWhsecSecret) {
  // A plain secret verifies X-RR-Signature only.
  SignatureVerifier v = MakeVerifier({kSecret});
  Headers h = {
      {"webhook-id", "evt_1"},
      {"webhook-timestamp", std::to_string(kNow)},
      {"webhook-signature", SignStandard("whsec_" + Base64Encode(kSecret), "evt_1", kNow, kBody)}};
  ExpectRefusedNaming(v.Verify(h, kBody, kNow * kMicros, nullptr), "webhook-signature: ");
}

TEST(receiver_signature, WhsecSecretAlsoSignsRrAsWritten) {
  // docs/SPEC.md §2.4: for X-RR-Signature the key is the configured secret's bytes as written.
  const std::string whsec = "whsec_" + Base64Encode("standard-key-0123456789");
  SignatureVerifier v = MakeVerifier({whsec});
  EXPECT_TRUE(v.Verify(RrHeaders(SignRr(whsec, kNow, kBody)), kBody, kNow * kMicros, nullptr).ok());
}

// --- secret validation -------------------------------------------------------

TEST(receiver_signature, MakeRefusesBadSecretsWithoutEchoingThem) {
  const std::string short15 = "fifteen-bytes!!";
  ASSERT_EQ(short15.size(), 15u);
  const std::string bad_b64 = "whsec_not*valid*base64!";
  const std::string short_key = "whsec_" + Base64Encode("ten-bytes!");
  ASSERT_GE(short_key.size(), kMinSecretBytes);
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{}, "none"},
      {{""}, "empty"},
      {{"tiny"}, "shorter"},
      {{short15}, "shorter"},
      {{kSecret, short15}, "secret #2"},
      {{bad_b64}, "base64"},
      {{"whsec_AAAAAAAAAAAAAAAAAAAAAAA"}, "base64"},  // 23 chars: not a multiple of 4
      {{short_key}, "shorter"},
  };
  for (const auto& [secrets, expect] : cases) {
    SCOPED_TRACE(secrets.empty() ? "(none)" : secrets.back());
    Result<SignatureVerifier> v = SignatureVerifier::Make(secrets, 300);
    ASSERT_FALSE(v.ok());
    EXPECT_TRUE(v.status().IsInvalidArgument());
    EXPECT_NE(v.status().message().find(expect), std::string::npos) << v.status().message();
    for (const std::string& s : secrets) {
      if (s.size() >= 4) {
        EXPECT_EQ(v.status().message().find(s), std::string::npos);
      }
    }
    EXPECT_EQ(v.status().message().find("ten-bytes"), std::string::npos);
  }
  EXPECT_TRUE(SignatureVerifier::Make({std::string(16, 'k')}, 300).ok());
  EXPECT_TRUE(SignatureVerifier::Make({"whsec_" + Base64Encode(std::string(16, 'k'))}, 300).ok());
}

// --- base64 and constant-time comparison ---------------------------------------

TEST(receiver_signature, Base64Rfc4648Vectors) {
  const std::vector<std::pair<std::string, std::string>> vectors = {{"", ""},
                                                                    {"f", "Zg=="},
                                                                    {"fo", "Zm8="},
                                                                    {"foo", "Zm9v"},
                                                                    {"foob", "Zm9vYg=="},
                                                                    {"fooba", "Zm9vYmE="},
                                                                    {"foobar", "Zm9vYmFy"}};
  for (const auto& [plain, encoded] : vectors) {
    EXPECT_EQ(Base64Encode(plain), encoded);
    EXPECT_EQ(Base64Decode(encoded), plain) << "\"" << encoded << "\"";
  }
  EXPECT_EQ(Base64Decode("+/+/"), std::string("\xfb\xff\xbf"));
}

TEST(receiver_signature, Base64RoundTripsRandomBytes) {
  const uint64_t seed = TestSeed("receiver_signature.Base64RoundTripsRandomBytes", 4648);
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 2000; ++i) {
    std::string bytes(rng() % 200, '\0');
    for (char& c : bytes) c = static_cast<char>(rng() & 0xff);
    const std::string enc = Base64Encode(bytes);
    EXPECT_EQ(enc.size() % 4, 0u);
    std::optional<std::string> dec = Base64Decode(enc);
    ASSERT_TRUE(dec.has_value()) << enc;
    EXPECT_EQ(*dec, bytes);
  }
}

TEST(receiver_signature, Base64RefusesMalformedText) {
  for (const std::string& bad :
       {std::string("Zg="), std::string("Zg"), std::string("Z"), std::string("Zg=a"),
        std::string("Z==="), std::string("===="), std::string("Zm9v===="), std::string("=Zm9"),
        std::string("Zm9v\n"), std::string("Zm 9v"), std::string("Zm9-"), std::string("Zm9_"),
        std::string("Zm9vYg=\n"), std::string("Zm9v\0Zg==", 9), std::string("Zm=v")}) {
    EXPECT_FALSE(Base64Decode(bad).has_value()) << "\"" << bad << "\"";
  }
}

TEST(receiver_signature, ConstantTimeEquals) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_FALSE(ConstantTimeEquals("ab", "abc"));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0b", 3), std::string("a\0c", 3)));
}

}  // namespace
}  // namespace eventfold
