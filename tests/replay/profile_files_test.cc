// The profile files shipped in profiles/: each loads and validates, the
// ReceiptRoller one is the built-in profile, and a store created with the
// Stripe-like payments profile routes by the nested key data.object.id and
// folds out-of-order deliveries per docs/SPEC.md §4.

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "eventfold/store.h"
#include "tests/storage/storage_test_util.h"

#ifndef EVENTFOLD_PROFILES_DIR
#error "EVENTFOLD_PROFILES_DIR must name the source tree's profiles/ directory"
#endif

namespace eventfold {
namespace {

namespace fs = std::filesystem;

const std::string kProfilesDir = EVENTFOLD_PROFILES_DIR;

std::vector<fs::path> ProfileFiles() {
  std::vector<fs::path> out;
  for (const fs::directory_entry& e : fs::directory_iterator(kProfilesDir)) {
    if (e.is_regular_file() && e.path().extension() == ".json") out.push_back(e.path());
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(ProfileFiles, EveryShippedProfileLoadsAndValidates) {
  const std::vector<fs::path> files = ProfileFiles();
  ASSERT_GE(files.size(), 2u) << "no profiles found in " << kProfilesDir;
  for (const fs::path& file : files) {
    SCOPED_TRACE(file.string());
    Result<Profile> p = Profile::FromFile(file.string());
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    EXPECT_EQ(p->name(), file.stem().string()) << "a profile file is named after its profile";
    ASSERT_FALSE(p->entities().empty());
    for (const EntityType& e : p->entities()) {
      SCOPED_TRACE(e.name);
      EXPECT_FALSE(e.transitions.empty());
      EXPECT_EQ(e.key.rfind("data.", 0), 0u) << e.key;
      for (size_t rank = 0; rank < e.transitions.size(); ++rank) {
        const Route* route = p->Find(e.transitions[rank].type);
        ASSERT_NE(route, nullptr) << e.transitions[rank].type;
        EXPECT_EQ(route->entity->name, e.name);
        EXPECT_EQ(route->rank, rank);
      }
    }
    // Its canonical form is a valid profile with the same meaning.
    Result<Profile> again = Profile::FromJson(p->ToJson());
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->Fingerprint(), p->Fingerprint());
    // A store can be created with it, and remembers it.
    auto env = storage_test::NewMemEnv();
    Options o;
    o.env = env.get();
    o.profile = *p;
    Result<std::unique_ptr<Store>> store = Store::Open("/mem/" + p->name(), o);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    EXPECT_EQ((*store)->Stats().profile_name, p->name());
    EXPECT_EQ((*store)->Stats().profile_fingerprint, p->Fingerprint());
  }
}

TEST(ProfileFiles, ReceiptRollerFileIsTheBuiltInProfile) {
  Result<Profile> p = Profile::FromFile(kProfilesDir + "/receiptroller.json");
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->Fingerprint(), Profile::ReceiptRoller().Fingerprint());
  EXPECT_EQ(p->ToJson(), Profile::ReceiptRoller().ToJson());
}

TEST(ProfileFiles, AMissingFileIsNamedInTheError) {
  Result<Profile> p = Profile::FromFile(kProfilesDir + "/no-such-profile.json");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("no-such-profile.json"), std::string::npos)
      << p.status().message();
}

// ---------------------------------------------------------------------------
// The payments profile: Stripe-like bodies, the object under data.object.

class PaymentsProfile : public ::testing::Test {
 protected:
  void SetUp() override {
    Result<Profile> p = Profile::FromFile(kProfilesDir + "/payments.json");
    ASSERT_TRUE(p.ok()) << p.status().ToString();
    profile_ = std::move(*p);
    Options o;
    o.env = env_.get();
    o.clock = &clock_;
    o.profile = *profile_;
    o.snapshot_interval = 2;
    Result<std::unique_ptr<Store>> s = Store::Open("/mem/payments", o);
    ASSERT_TRUE(s.ok()) << s.status().ToString();
    store_ = std::move(*s);
  }

  // {"event_id":..,"type":..,"occurred_at":..,"data":{"object":{..}}}
  static std::string Event(const std::string& event_id, const std::string& type,
                           const std::string& occurred_at, const std::string& object) {
    return R"({"event_id":")" + event_id + R"(","type":")" + type + R"(","occurred_at":")" +
           occurred_at + R"(","livemode":false,"data":{"object":)" + object + "}}";
  }

  IngestResult Ingest(const std::string& body) { return store_->Ingest(body); }

  Projection Get(const std::string& entity, const std::string& id) {
    Result<Projection> p = store_->Get(entity, id);
    EXPECT_TRUE(p.ok()) << entity << "/" << id << ": " << p.status().ToString();
    return p.ok() ? *p : Projection{};
  }

  std::string FieldJson(const Projection& p, const std::string& name) {
    for (const Field& f : p.fields) {
      if (f.name == name) return f.json;
    }
    return "";
  }

  std::unique_ptr<leveldb::Env> env_ = storage_test::NewMemEnv();
  ManualClock clock_{1795000000000000};
  std::optional<Profile> profile_;
  std::unique_ptr<Store> store_;
};

TEST_F(PaymentsProfile, RoutesByTheNestedObjectId) {
  const std::string created = Event(
      "evt_1Pa", "payment_intent.created", "2026-11-29T10:00:00Z",
      R"({"id":"pi_1","object":"payment_intent","amount":2000,"currency":"usd","status":"requires_payment_method"})");
  IngestResult r = Ingest(created);
  ASSERT_EQ(r.outcome, Outcome::kAccepted) << r.message;
  ASSERT_TRUE(r.entity.has_value());
  EXPECT_EQ(r.entity->entity, "payment_intent");
  EXPECT_EQ(r.entity->id, "pi_1");
  Projection p = Get("payment_intent", "pi_1");
  EXPECT_EQ(p.state, "requires_payment_method");
  EXPECT_EQ(p.applied, 1u);
  EXPECT_NE(FieldJson(p, "object").find(R"("amount":2000)"), std::string::npos)
      << ProjectionToJson(p);

  // A charge and a customer with ids of their own kind.
  EXPECT_EQ(Ingest(Event("evt_1Ch", "charge.succeeded", "2026-11-29T10:00:01Z",
                         R"({"id":"ch_1","amount":2000,"payment_intent":"pi_1"})"))
                .outcome,
            Outcome::kAccepted);
  EXPECT_EQ(Get("charge", "ch_1").state, "succeeded");
  EXPECT_EQ(Ingest(Event("evt_1Cu", "customer.created", "2026-11-29T10:00:02Z",
                         R"({"id":"cus_1","email":"a@example.com"})"))
                .outcome,
            Outcome::kAccepted);
  EXPECT_EQ(Get("customer", "cus_1").state, "active");

  // A known type without its nested key is refused (400), naming the path.
  r = Ingest(
      Event("evt_nokey", "payment_intent.created", "2026-11-29T10:00:00Z", R"({"amount":1})"));
  EXPECT_EQ(r.outcome, Outcome::kInvalid);
  EXPECT_EQ(r.http_status(), 400);
  EXPECT_NE(r.message.find("data.object.id"), std::string::npos) << r.message;
  r = Ingest(
      R"({"event_id":"evt_noobj","type":"charge.succeeded","occurred_at":"2026-11-29T10:00:00Z","data":{"id":"ch_9"}})");
  EXPECT_EQ(r.outcome, Outcome::kInvalid) << r.message;

  // An integer id is taken as its decimal text.
  r = Ingest(Event("evt_int", "customer.created", "2026-11-29T10:00:03Z", R"({"id":42})"));
  ASSERT_EQ(r.outcome, Outcome::kAccepted) << r.message;
  EXPECT_EQ(Get("customer", "42").state, "active");

  // A type the profile does not know is stored, unrouted.
  r = Ingest(Event("evt_unk", "invoice.finalized", "2026-11-29T10:00:04Z", R"({"id":"in_1"})"));
  EXPECT_EQ(r.outcome, Outcome::kAccepted) << r.message;
  EXPECT_FALSE(r.entity.has_value());
  EXPECT_EQ(store_->counters().unrouted, 1u);
}

TEST_F(PaymentsProfile, SucceededBeforeCreatedEndsSucceeded) {
  const std::string created =
      Event("evt_pi_created", "payment_intent.created", "2026-11-29T10:00:00Z",
            R"({"id":"pi_1","amount":2000,"currency":"usd","status":"requires_payment_method"})");
  const std::string succeeded =
      Event("evt_pi_succeeded", "payment_intent.succeeded", "2026-11-29T10:00:05Z",
            R"({"id":"pi_1","amount":2000,"currency":"usd","status":"succeeded"})");
  ASSERT_EQ(Ingest(succeeded).outcome, Outcome::kAccepted);
  Projection p = Get("payment_intent", "pi_1");
  EXPECT_EQ(p.state, "none");
  ASSERT_EQ(p.rejected.size(), 1u);
  EXPECT_EQ(p.rejected[0].reason, "impossible transition none -> succeeded");

  ASSERT_EQ(Ingest(created).outcome, Outcome::kAccepted);
  p = Get("payment_intent", "pi_1");
  EXPECT_EQ(p.state, "succeeded") << ProjectionToJson(p);
  EXPECT_EQ(p.applied, 2u);
  EXPECT_TRUE(p.rejected.empty()) << ProjectionToJson(p);
  EXPECT_NE(FieldJson(p, "object").find(R"("status":"succeeded")"), std::string::npos)
      << "the latest applied object wins: " << ProjectionToJson(p);
  EXPECT_EQ(Ingest(succeeded).outcome, Outcome::kDuplicate);

  // The other order gives the same bytes.
  Options o;
  auto env = storage_test::NewMemEnv();
  o.env = env.get();
  o.clock = &clock_;
  o.profile = *profile_;
  Result<std::unique_ptr<Store>> other = Store::Open("/mem/in-order", o);
  ASSERT_TRUE(other.ok());
  ASSERT_EQ((*other)->Ingest(created).outcome, Outcome::kAccepted);
  ASSERT_EQ((*other)->Ingest(succeeded).outcome, Outcome::kAccepted);
  EXPECT_EQ(ProjectionToJson(*(*other)->Get("payment_intent", "pi_1")), ProjectionToJson(p));
}

TEST_F(PaymentsProfile, RefundedBeforeSucceededEndsRefunded) {
  ASSERT_EQ(Ingest(Event("evt_ch_refunded", "charge.refunded", "2026-11-29T11:00:00Z",
                         R"({"id":"ch_1","amount":2000,"amount_refunded":2000,"refunded":true})"))
                .outcome,
            Outcome::kAccepted);
  Projection p = Get("charge", "ch_1");
  EXPECT_EQ(p.state, "none");
  ASSERT_EQ(p.rejected.size(), 1u);
  EXPECT_EQ(p.rejected[0].reason, "impossible transition none -> refunded");
  ASSERT_EQ(Ingest(Event("evt_ch_succeeded", "charge.succeeded", "2026-11-29T10:00:00Z",
                         R"({"id":"ch_1","amount":2000,"amount_refunded":0,"refunded":false})"))
                .outcome,
            Outcome::kAccepted);
  p = Get("charge", "ch_1");
  EXPECT_EQ(p.state, "refunded") << ProjectionToJson(p);
  EXPECT_EQ(p.applied, 2u);
  EXPECT_TRUE(p.rejected.empty());
  EXPECT_NE(FieldJson(p, "object").find(R"("refunded":true)"), std::string::npos)
      << ProjectionToJson(p);
}

TEST_F(PaymentsProfile, UpdatedAfterDeletedIsAnImpossibleTransition) {
  ASSERT_EQ(Ingest(Event("evt_cus_created", "customer.created", "2026-11-29T10:00:00Z",
                         R"({"id":"cus_1","email":"a@example.com"})"))
                .outcome,
            Outcome::kAccepted);
  ASSERT_EQ(Ingest(Event("evt_cus_deleted", "customer.deleted", "2026-11-29T10:05:00Z",
                         R"({"id":"cus_1","deleted":true})"))
                .outcome,
            Outcome::kAccepted);
  ASSERT_EQ(Ingest(Event("evt_cus_updated", "customer.updated", "2026-11-29T10:06:00Z",
                         R"({"id":"cus_1","email":"b@example.com"})"))
                .outcome,
            Outcome::kAccepted);
  Projection p = Get("customer", "cus_1");
  EXPECT_EQ(p.state, "deleted");
  EXPECT_EQ(p.applied, 2u);
  ASSERT_EQ(p.rejected.size(), 1u);
  EXPECT_EQ(p.rejected[0].event_id, "evt_cus_updated");
  EXPECT_EQ(p.rejected[0].type, "customer.updated");
  EXPECT_EQ(p.rejected[0].reason, "impossible transition deleted -> active");
  EXPECT_NE(FieldJson(p, "object").find(R"("deleted":true)"), std::string::npos)
      << "a rejected event changes nothing: " << ProjectionToJson(p);

  // An update that happened before the deletion but arrives last is applied.
  ASSERT_EQ(Ingest(Event("evt_cus_updated_early", "customer.updated", "2026-11-29T10:01:00Z",
                         R"({"id":"cus_1","email":"early@example.com"})"))
                .outcome,
            Outcome::kAccepted);
  p = Get("customer", "cus_1");
  EXPECT_EQ(p.state, "deleted");
  EXPECT_EQ(p.applied, 3u);
  ASSERT_EQ(p.rejected.size(), 1u);
  EXPECT_EQ(p.rejected[0].event_id, "evt_cus_updated");

  // A full rebuild agrees.
  const std::string live = ProjectionToJson(p);
  ASSERT_TRUE(store_->maintenance().Rebuild(nullptr).ok());
  EXPECT_EQ(ProjectionToJson(Get("customer", "cus_1")), live);
  EXPECT_EQ(store_->Stats().profile_name, "payments");
}

}  // namespace
}  // namespace eventfold
