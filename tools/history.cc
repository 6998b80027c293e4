// A simulated ReceiptRoller (see history.h).
//
// The sender's world: a small Thai retail chain. Products are created in the
// catalog, repriced and sometimes discontinued; a warehouse system reports
// stock levels, mostly in periodic sync runs that stamp many products with
// the same instant; point-of-sale terminals issue receipts in store-local
// time (+07:00) and refund some of them. On top of that, a few events break
// the state machines the way real senders do (a receipt re-sent after its
// refund, an edit of a deleted product, a stale stock report), and delivery
// adds retries, reordering, late arrivals, malformed bodies and reused ids.
//
// Everything comes from one std::mt19937_64 seeded with options.seed, whose
// output the C++ standard fixes, and from integer arithmetic on it: a seed
// gives the same history on every platform.

#include "tools/history.h"

#include <algorithm>
#include <cstdio>
#include <optional>
#include <random>
#include <string_view>
#include <utility>

#include "core/json_writer.h"
#include "core/rfc3339.h"

namespace eventfold::sim {
namespace {

constexpr int64_t kSecond = 1000000;
constexpr int64_t kMinute = 60 * kSecond;
constexpr int64_t kHour = 60 * kMinute;
constexpr int64_t kDay = 24 * kHour;
constexpr int kBangkokOffsetMinutes = 7 * 60;
constexpr std::string_view kApiVersion = "2025-10-01";

class Rng {
 public:
  explicit Rng(uint64_t seed) : gen_(seed) {}
  uint64_t Next() { return gen_(); }
  // Uniform in [0, n); 0 when n == 0.
  uint64_t Below(uint64_t n) {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(gen_()) * n) >> 64);
  }
  // Uniform in [lo, hi].
  int64_t Range(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(Below(static_cast<uint64_t>(hi - lo) + 1));
  }
  double Unit() { return static_cast<double>(gen_() >> 11) * 0x1.0p-53; }
  bool Chance(double p) { return Unit() < p; }
  // Rounds `x` up or down at random, keeping the expectation.
  int64_t Round(double x) {
    if (x <= 0) return 0;
    const int64_t whole = static_cast<int64_t>(x);
    return whole + (Chance(x - static_cast<double>(whole)) ? 1 : 0);
  }
  std::string Hex(int digits) {
    static constexpr char kDigits[] = "0123456789abcdef";
    std::string s;
    uint64_t bits = 0;
    for (int i = 0; i < digits; ++i) {
      if (i % 16 == 0) bits = gen_();
      s.push_back(kDigits[bits & 15]);
      bits >>= 4;
    }
    return s;
  }
  template <typename It>
  void Permute(It begin, It end) {  // Fisher-Yates
    const auto n = end - begin;
    for (auto i = n - 1; i > 0; --i) {
      std::swap(begin[i], begin[static_cast<decltype(i)>(Below(static_cast<uint64_t>(i) + 1))]);
    }
  }

 private:
  std::mt19937_64 gen_;
};

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

int64_t FloorDiv(int64_t a, int64_t b) { return a / b - ((a % b != 0) && ((a < 0) != (b < 0))); }

std::string Numbered(std::string_view prefix, int64_t n, int width) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%0*lld", width, static_cast<long long>(n));
  return std::string(prefix) + buf;
}

// ---------------------------------------------------------------------------
// The sender's world.

struct CatalogItem {
  const char* name;
  const char* category;
  int64_t price;  // satang (THB minor units), VAT included
};

constexpr CatalogItem kCatalog[] = {
    {"Thai iced tea 500ml", "beverages", 4500},
    {"Jasmine rice 5kg", "grocery", 18900},
    {"Fish sauce 700ml", "grocery", 3900},
    {"Coconut milk 400ml", "grocery", 2900},
    {"Green curry paste 400g", "grocery", 3500},
    {"Dried mango 200g", "snacks", 8900},
    {"Durian chips 100g", "snacks", 12900},
    {"Tom yum instant noodles", "grocery", 700},
    {"Soy milk 300ml", "beverages", 1500},
    {"Mineral water 1.5L", "beverages", 1400},
    {"Tiger balm 19g", "health", 9900},
    {"Herbal inhaler", "health", 2500},
    {"Sticky rice 1kg", "grocery", 5500},
    {"Palm sugar 500g", "grocery", 4200},
    {"Pad thai kit", "grocery", 7900},
    {"Cashew nuts 150g", "snacks", 11900},
    {"Lemongrass tea 20 bags", "beverages", 6500},
    {"Roasted chili paste 250g", "grocery", 5900},
    {"Tamarind candy 120g", "snacks", 3000},
    {"Doi Chaang coffee beans 250g", "beverages", 29000},
    {"Mosquito repellent 60ml", "household", 8900},
    {"Dish soap 500ml", "household", 3900},
    {"Herbal toothpaste 160g", "health", 6900},
    {"Rice crackers 70g", "snacks", 2500},
};
constexpr const char* kVariants[] = {"", " (family pack)", " (value pack)", " (organic)",
                                     " (limited edition)"};
constexpr const char* kCategories[] = {"beverages", "grocery", "snacks", "health", "household"};

struct Branch {
  const char* store_id;
  const char* name;
};
constexpr Branch kBranches[] = {{"st_bkk_014", "Siam Square"},
                                {"st_bkk_021", "Ari"},
                                {"st_cnx_003", "Nimman"},
                                {"st_hkt_007", "Patong"}};
constexpr const char* kPayments[] = {"cash", "promptpay", "card", "truemoney"};
constexpr const char* kRefundReasons[] = {"customer_return", "damaged_item", "wrong_item",
                                          "price_dispute"};
constexpr const char* kStockReasons[] = {"sync", "sale", "restock", "count"};
constexpr const char* kDeleteReasons[] = {"discontinued", "recalled", "duplicate_listing"};

enum class Kind { kReceipt, kProduct, kInventory };

// One event as the sender produced it, before it becomes a body.
struct Planned {
  int64_t at = 0;
  int offset_minutes = 0;
  std::string event_id;
  std::string type;
  std::optional<int64_t> version;
  std::string data;  // compact JSON object
  Kind kind = Kind::kReceipt;
  bool impossible = false;
  size_t order = 0;  // production order among events with the same `at`
  std::string body;
};

struct ProductState {
  std::string id, sku, name, category;
  int64_t price = 0;
  int64_t created_at = 0;
  int64_t last_at = 0;
  int64_t version = 0;
  bool versioned = false;  // the entity holds a version once folded
  bool deleted = false;
  // Inventory of the product.
  int64_t stock_at = 0;
  int64_t stock_version = 0;
  int64_t on_hand = 0;
  bool stocked = false;
};

struct ReceiptState {
  std::string id;
  int64_t issued_at = 0;
  int64_t last_at = 0;
  std::optional<int64_t> refunded_at;
  size_t issued_event = 0;  // index into the plan
  int64_t total = 0;
  std::string cashier;
  const char* payment = "";
};

class Generator {
 public:
  explicit Generator(const HistoryOptions& options)
      : o_(options), rng_(options.seed), id_base_(SplitMix64(options.seed ^ 0x5eedULL)) {
    account_ = "acct_" + rng_.Hex(12);
  }

  History Run();

 private:
  std::string NewEventId() { return "evt_" + HexOf(SplitMix64(id_base_ + next_id_++)); }
  static std::string HexOf(uint64_t v) {
    char buf[24];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
    return buf;
  }

  Planned& Plan(Kind kind, std::string type, int64_t at, std::optional<int64_t> version,
                std::string data) {
    Planned p;
    p.at = at;
    p.offset_minutes = kind == Kind::kReceipt ? kBangkokOffsetMinutes : 0;
    p.event_id = NewEventId();
    p.type = std::move(type);
    p.version = version;
    p.data = std::move(data);
    p.kind = kind;
    p.order = plan_.size();
    plan_.push_back(std::move(p));
    return plan_.back();
  }

  std::string Source(Kind kind) const {
    switch (kind) {
      case Kind::kReceipt:
        return "pos-terminal";
      case Kind::kProduct:
        return "catalog-admin";
      case Kind::kInventory:
        return "inventory-sync";
    }
    return "";
  }

  // The body: docs/SPEC.md §2 fields, the sender's own extras, then a metadata
  // object filled up to about the target size.
  std::string Body(const std::string& event_id, const std::string& type,
                   const std::optional<std::string>& occurred_at,
                   const std::optional<std::string>& version_json, const std::string& data_json,
                   Kind kind) {
    JsonWriter w;
    w.BeginObject().Key("event_id").String(event_id).Key("type").String(type);
    w.Key("api_version").String(kApiVersion);
    if (occurred_at) w.Key("occurred_at").String(*occurred_at);
    if (version_json) w.Key("version").Raw(*version_json);
    w.Key("account").String(account_).Key("livemode").Bool(true);
    w.Key("data").Raw(data_json);
    const std::pair<const char*, std::string> extras[] = {
        {"source", Source(kind)},
        {"request_id", "req_" + rng_.Hex(16)},
        {"trace_id", rng_.Hex(32)},
        {"locale", "th-TH"},
        {"timezone", "Asia/Bangkok"},
        {"delivery", "at-least-once"},
        {"client", "receiptroller-webhooks/3.8.2"},
        {"region", "ap-southeast-1"},
        {"schema", "https://schemas.receiptroller.example/" + type + "/" +
                       std::string(kApiVersion) + ".json"},
        {"span_id", rng_.Hex(16)},
        {"idempotency_key", "idem_" + rng_.Hex(24)},
        {"environment", "production"},
    };
    w.Key("metadata").BeginObject();
    bool first = true;
    for (const auto& [key, value] : extras) {
      const size_t entry = std::string_view(key).size() + value.size() + 6;
      if (!first && w.str().size() + entry + 2 > o_.target_body_bytes) break;
      w.Key(key).String(value);
      first = false;
    }
    w.EndObject().EndObject();
    return w.Take();
  }

  std::string BodyOf(const Planned& p, int64_t at) {
    std::optional<std::string> version;
    if (p.version) version = std::to_string(*p.version);
    return Body(p.event_id, p.type, FormatRfc3339(at, p.offset_minutes), version, p.data, p.kind);
  }

  void MakeProducts();
  void MakeInventory();
  void MakeReceipts();
  void MakeImpossible(size_t count);
  bool Impossible(int kind);
  std::string IssuedData(ReceiptState* r, int branch, int terminal);
  std::string RefundData(const ReceiptState& r);
  std::string ProductUpdateData(ProductState* p);
  std::string StockData(ProductState* p, const char* reason);
  void Deliver(History* h);
  Delivery Malformed(int kind, const std::vector<Planned>& events);

  const HistoryOptions& o_;
  Rng rng_;
  uint64_t id_base_;
  uint64_t next_id_ = 0;
  std::string account_;
  std::vector<Planned> plan_;
  std::vector<ProductState> products_;
  std::vector<ReceiptState> receipts_;
  int64_t next_stray_receipt_ = 0;
};

// Catalog setup in the first hours; repricing and renaming over the following
// days; some products discontinued.
void Generator::MakeProducts() {
  const int64_t n_catalog = static_cast<int64_t>(std::size(kCatalog));
  for (int i = 0; i < o_.products; ++i) {
    const CatalogItem& item = kCatalog[i % n_catalog];
    ProductState p;
    p.id = Numbered("prd_", i + 1, 6);
    p.sku = Numbered("SKU-", i + 1, 5);
    p.name = std::string(item.name) + (i / n_catalog < static_cast<int64_t>(std::size(kVariants))
                                           ? kVariants[i / n_catalog]
                                           : " #" + std::to_string(i / n_catalog));
    p.category = item.category;
    p.price = item.price + rng_.Range(-5, 5) * 100;
    if (p.price < 500) p.price = 500 + rng_.Range(0, 9) * 100;
    p.created_at = o_.start_micros + rng_.Range(0, 6 * kHour);
    p.version = 1;
    // Products imported from the old catalog were created without a version.
    p.versioned = !rng_.Chance(0.15);

    JsonWriter d;
    d.BeginObject()
        .Key("product_id")
        .String(p.id)
        .Key("sku")
        .String(p.sku)
        .Key("barcode")
        .String(Numbered("885", rng_.Range(0, 9999999999), 10))
        .Key("name")
        .String(p.name)
        .Key("category")
        .String(p.category)
        .Key("price")
        .Int(p.price)
        .Key("currency")
        .String("THB")
        .Key("unit")
        .String("piece")
        .Key("vat_included")
        .Bool(true)
        .EndObject();
    Plan(Kind::kProduct, "product.created", p.created_at,
         p.versioned ? std::optional<int64_t>(p.version) : std::nullopt, d.Take());
    int64_t t = p.created_at;

    const int64_t updates = rng_.Range(0, 4);
    for (int64_t u = 0; u < updates; ++u) {
      // A product saved twice in one request: same instant, next version.
      if (!(u == 0 && rng_.Chance(0.1))) t += rng_.Range(10 * kMinute, 2 * kDay);
      ++p.version;
      p.versioned = true;
      Plan(Kind::kProduct, "product.updated", t, p.version, ProductUpdateData(&p));
    }
    if (rng_.Chance(o_.delete_rate)) {
      t += rng_.Range(kHour, 4 * kDay);
      ++p.version;
      JsonWriter del;
      del.BeginObject()
          .Key("product_id")
          .String(p.id)
          .Key("reason")
          .String(kDeleteReasons[rng_.Below(std::size(kDeleteReasons))])
          .Key("deleted_by")
          .String(Numbered("usr_ops_", rng_.Range(1, 6), 2))
          .EndObject();
      Plan(Kind::kProduct, "product.deleted", t, p.version, del.Take());
      p.versioned = true;
      p.deleted = true;
    }
    p.last_at = t;
    products_.push_back(std::move(p));
  }
}

std::string Generator::ProductUpdateData(ProductState* p) {
  JsonWriter d;
  d.BeginObject().Key("product_id").String(p->id);
  const uint64_t what = rng_.Below(4);
  if (what != 1) {  // a price change, the common edit
    p->price = std::max<int64_t>(500, p->price + rng_.Range(-10, 15) * 100);
    d.Key("price").Int(p->price);
  }
  if (what == 1 || what == 3) {
    p->category = kCategories[rng_.Below(std::size(kCategories))];
    d.Key("category").String(p->category);
  }
  if (what == 2) d.Key("promotion").String(rng_.Chance(0.5) ? "2-for-1" : "member-price");
  d.Key("updated_by").String(Numbered("usr_ops_", rng_.Range(1, 6), 2));
  d.EndObject();
  return d.Take();
}

std::string Generator::StockData(ProductState* p, const char* reason) {
  if (!p->stocked) {
    p->on_hand = rng_.Range(20, 400);
    p->stocked = true;
  } else if (std::string_view(reason) == "restock") {
    p->on_hand += rng_.Range(24, 240);
  } else {
    p->on_hand = std::max<int64_t>(0, p->on_hand - rng_.Range(0, 30));
  }
  JsonWriter d;
  d.BeginObject()
      .Key("product_id")
      .String(p->id)
      .Key("sku")
      .String(p->sku)
      .Key("location")
      .String("wh_bkk_01")
      .Key("on_hand")
      .Int(p->on_hand)
      .Key("reserved")
      .Int(rng_.Range(0, std::min<int64_t>(p->on_hand, 12)))
      .Key("reason")
      .String(reason)
      .EndObject();
  return d.Take();
}

// The warehouse reports stock mostly in sync runs every six hours, on the
// hour: many products share each run's instant. Its versions are its own
// sequence numbers, increasing per product with gaps.
void Generator::MakeInventory() {
  const int64_t first_run = FloorDiv(o_.start_micros, kHour) * kHour + kHour;
  auto next_run = [&](int64_t after) {
    if (after < first_run) return first_run;
    return first_run + (FloorDiv(after - first_run, 6 * kHour) + 1) * 6 * kHour;
  };
  for (ProductState& p : products_) {
    int64_t t = p.created_at + rng_.Range(kMinute, 2 * kHour);
    p.stock_version = rng_.Range(0, 40);
    for (int k = 0; k < o_.inventory_updates; ++k) {
      const bool sync = rng_.Chance(0.6);
      t = sync ? next_run(t) : t + rng_.Range(5 * kMinute, 8 * kHour);
      p.stock_version += rng_.Range(1, 3);
      const char* reason =
          sync ? "sync" : kStockReasons[1 + rng_.Below(std::size(kStockReasons) - 1)];
      Plan(Kind::kInventory, "inventory.updated", t, p.stock_version, StockData(&p, reason));
      p.stock_at = t;
    }
  }
}

std::string Generator::IssuedData(ReceiptState* r, int branch, int terminal) {
  JsonWriter items;
  items.BeginArray();
  int64_t subtotal = 0;
  const int64_t lines = rng_.Range(1, 4);
  for (int64_t line = 1; line <= lines; ++line) {
    std::string sku, product_id, name;
    int64_t price;
    if (!products_.empty()) {
      const ProductState& p = products_[rng_.Below(products_.size())];
      sku = p.sku;
      product_id = p.id;
      name = p.name;
      price = p.price;
    } else {
      const CatalogItem& c = kCatalog[rng_.Below(std::size(kCatalog))];
      sku = Numbered("SKU-", 90000 + rng_.Range(0, 999), 5);
      name = c.name;
      price = c.price;
    }
    const int64_t qty = rng_.Chance(0.7) ? 1 : rng_.Range(2, 6);
    items.BeginObject().Key("line").Int(line).Key("sku").String(sku);
    if (!product_id.empty()) items.Key("product_id").String(product_id);
    items.Key("name")
        .String(name)
        .Key("qty")
        .Int(qty)
        .Key("unit_price")
        .Int(price)
        .Key("amount")
        .Int(qty * price)
        .EndObject();
    subtotal += qty * price;
  }
  items.EndArray();
  // Shelf prices include 7% VAT; the receipt shows the VAT part.
  const int64_t tax = (subtotal * 7 + 53) / 107;
  r->total = subtotal;
  r->payment = kPayments[rng_.Below(std::size(kPayments))];
  JsonWriter d;
  d.BeginObject()
      .Key("receipt_id")
      .String(r->id)
      .Key("store_id")
      .String(kBranches[branch].store_id)
      .Key("branch")
      .String(kBranches[branch].name)
      .Key("terminal_id")
      .String(Numbered("T-", terminal, 2))
      .Key("cashier_id")
      .String(r->cashier)
      .Key("items")
      .Raw(items.str())
      .Key("subtotal")
      .Int(subtotal - tax)
      .Key("tax")
      .Int(tax)
      .Key("total")
      .Int(subtotal)
      .Key("currency")
      .String("THB")
      .Key("payment")
      .BeginObject()
      .Key("method")
      .String(r->payment);
  if (std::string_view(r->payment) != "cash") {
    d.Key("reference").String(std::string(r->payment).substr(0, 2) + "_" + rng_.Hex(12));
  }
  d.EndObject().EndObject();
  return d.Take();
}

std::string Generator::RefundData(const ReceiptState& r) {
  JsonWriter d;
  d.BeginObject()
      .Key("receipt_id")
      .String(r.id)
      .Key("refund_id")
      .String("rf_" + rng_.Hex(14))
      .Key("amount")
      .Int(r.total)
      .Key("currency")
      .String("THB")
      .Key("reason")
      .String(kRefundReasons[rng_.Below(std::size(kRefundReasons))])
      .Key("refunded_by")
      .String(r.cashier)
      .Key("method")
      .String(r.payment)
      .EndObject();
  return d.Take();
}

// Sales over a couple of days after the catalog is set up.
void Generator::MakeReceipts() {
  const int64_t open = o_.start_micros + 6 * kHour;
  const int64_t span = std::max<int64_t>(6 * kHour, o_.receipts * 15 * kMinute);
  for (int i = 0; i < o_.receipts; ++i) {
    ReceiptState r;
    r.id = Numbered("rcp_", i + 1, 6);
    // Two terminals now and then stamp the very same microsecond.
    r.issued_at = (!receipts_.empty() && rng_.Chance(0.03)) ? receipts_.back().issued_at
                                                            : open + rng_.Range(0, span);
    const int branch = static_cast<int>(rng_.Below(std::size(kBranches)));
    const int terminal = static_cast<int>(rng_.Range(1, 6));
    r.cashier = Numbered("csh_", rng_.Range(1, 30), 2);
    std::string data = IssuedData(&r, branch, terminal);
    r.issued_event = plan_.size();
    Plan(Kind::kReceipt, "receipt.issued", r.issued_at, std::nullopt, std::move(data));
    r.last_at = r.issued_at;
    if (rng_.Chance(o_.refund_rate)) {
      // A void at the till carries the issue's own instant: rank orders them.
      const int64_t at = r.issued_at + (rng_.Chance(0.05) ? 0 : rng_.Range(2 * kMinute, 3 * kDay));
      Plan(Kind::kReceipt, "receipt.refunded", at, std::nullopt, RefundData(r));
      r.refunded_at = at;
      r.last_at = at;
    }
    receipts_.push_back(std::move(r));
  }
}

// Kinds of impossible events; each returns false when the history has no
// entity it could apply to.
bool Generator::Impossible(int kind) {
  // A random element satisfying `pred`: random probes first, so large
  // histories stay linear; a scan when those all miss.
  auto pick = [&](auto& v, auto pred) -> decltype(&v[0]) {
    if (v.empty()) return nullptr;
    for (int probe = 0; probe < 64; ++probe) {
      auto* x = &v[rng_.Below(v.size())];
      if (pred(*x)) return x;
    }
    std::vector<size_t> ok;
    for (size_t i = 0; i < v.size(); ++i) {
      if (pred(v[i])) ok.push_back(i);
    }
    if (ok.empty()) return nullptr;
    return &v[ok[rng_.Below(ok.size())]];
  };

  switch (kind) {
    case 0: {  // the POS re-sends a receipt after it was refunded
      ReceiptState* r = pick(receipts_, [](const ReceiptState& x) { return x.refunded_at; });
      if (!r) return false;
      const int64_t at = r->last_at + rng_.Range(kMinute, kDay);
      std::string data = plan_[r->issued_event].data;
      Plan(Kind::kReceipt, "receipt.issued", at, std::nullopt, std::move(data)).impossible = true;
      r->last_at = at;
      return true;
    }
    case 1: {  // a refund of a receipt this receiver never hears issued
      ReceiptState stray;
      stray.id = Numbered("rcp_", 900000 + ++next_stray_receipt_, 6);
      stray.total = rng_.Range(3, 60) * 500;
      stray.cashier = Numbered("csh_", rng_.Range(1, 30), 2);
      stray.payment = kPayments[rng_.Below(std::size(kPayments))];
      const int64_t at = o_.start_micros + rng_.Range(6 * kHour, 2 * kDay);
      Plan(Kind::kReceipt, "receipt.refunded", at, std::nullopt, RefundData(stray)).impossible =
          true;
      return true;
    }
    case 2: {  // an edit of a product already deleted
      ProductState* p = pick(products_, [](const ProductState& x) { return x.deleted; });
      if (!p) return false;
      p->last_at += rng_.Range(kMinute, kDay);
      ++p->version;
      Plan(Kind::kProduct, "product.updated", p->last_at, p->version, ProductUpdateData(p))
          .impossible = true;
      return true;
    }
    case 3: {  // a stale stock report: an old version, re-sent later
      ProductState* p = pick(products_, [](const ProductState& x) { return x.stock_version > 0; });
      if (!p || p->stock_at == 0) return false;
      p->stock_at += rng_.Range(kMinute, 6 * kHour);
      const int64_t version =
          rng_.Range(std::max<int64_t>(0, p->stock_version - 3), p->stock_version);
      Plan(Kind::kInventory, "inventory.updated", p->stock_at, version, StockData(p, "count"))
          .impossible = true;
      return true;
    }
    case 4: {  // a stale product edit from a lagging admin replica
      ProductState* p =
          pick(products_, [](const ProductState& x) { return !x.deleted && x.versioned; });
      if (!p) return false;
      p->last_at += rng_.Range(kMinute, kDay);
      const int64_t version = rng_.Range(1, p->version);
      Plan(Kind::kProduct, "product.updated", p->last_at, version, ProductUpdateData(p))
          .impossible = true;
      return true;
    }
    case 5: {  // a double submit: the same receipt, same instant, a new id
      ReceiptState* r = pick(receipts_, [](const ReceiptState&) { return true; });
      if (!r) return false;
      std::string data = plan_[r->issued_event].data;
      Plan(Kind::kReceipt, "receipt.issued", r->issued_at, std::nullopt, std::move(data))
          .impossible = true;
      return true;
    }
    case 6: {  // a second refund of a refunded receipt
      ReceiptState* r = pick(receipts_, [](const ReceiptState& x) { return x.refunded_at; });
      if (!r) return false;
      r->last_at += rng_.Range(kMinute, kDay);
      Plan(Kind::kReceipt, "receipt.refunded", r->last_at, std::nullopt, RefundData(*r))
          .impossible = true;
      return true;
    }
  }
  return false;
}

void Generator::MakeImpossible(size_t count) {
  constexpr int kKinds = 7;
  // Weighted toward the classic: a receipt re-sent after its refund.
  constexpr int kWeights[kKinds] = {4, 2, 2, 2, 1, 1, 1};
  for (size_t n = 0; n < count; ++n) {
    int total = 0;
    for (int w : kWeights) total += w;
    int64_t roll = static_cast<int64_t>(rng_.Below(static_cast<uint64_t>(total)));
    int kind = 0;
    while (roll >= kWeights[kind]) roll -= kWeights[kind++];
    for (int tries = 0; tries < kKinds; ++tries) {
      if (Impossible((kind + tries) % kKinds)) break;
    }
  }
}

Delivery Generator::Malformed(int kind, const std::vector<Planned>& events) {
  const std::string id = NewEventId();
  const std::string at = FormatRfc3339(o_.start_micros + rng_.Range(0, kDay), 0);
  const std::string receipt = Numbered("rcp_", 800000 + rng_.Range(0, 99999), 6);
  const std::string data =
      "{\"receipt_id\":\"" + receipt + "\",\"total\":12900,\"currency\":\"THB\"}";
  Delivery d;
  switch (kind) {
    case 0: {  // a connection cut mid-body
      std::string body = Body(id, "receipt.issued", at, std::nullopt, data, Kind::kReceipt);
      body.resize(body.size() * 2 / 3);
      d.body = std::move(body);
      break;
    }
    case 1:  // an impossible calendar date
      d.body = Body(id, "receipt.issued", "2026-02-30T10:15:30.000000+07:00", std::nullopt, data,
                    Kind::kReceipt);
      break;
    case 2: {  // the header names another event than the body
      if (!events.empty()) {
        d.body = events[rng_.Below(events.size())].body;
      } else {
        d.body = Body(id, "receipt.issued", at, std::nullopt, data, Kind::kReceipt);
      }
      d.headers = {{"Content-Type", "application/json"}, {"X-RR-Event-Id", NewEventId()}};
      break;
    }
    case 3:  // a receipt without its key
      d.body = Body(id, "receipt.issued", at, std::nullopt,
                    "{\"total\":12900,\"currency\":\"THB\",\"store_id\":\"st_bkk_014\"}",
                    Kind::kReceipt);
      break;
    case 4:  // a negative version
      d.body = Body(id, "product.updated", at, "-1",
                    "{\"product_id\":\"prd_000001\",\"price\":4900}", Kind::kProduct);
      break;
    case 5:  // no occurred_at
      d.body = Body(id, "receipt.refunded", std::nullopt, std::nullopt, data, Kind::kReceipt);
      break;
    default:  // data is not an object
      d.body = Body(id, "inventory.updated", at, "3", "\"prd_000001\"", Kind::kInventory);
      break;
  }
  return d;
}

// Every event at least once, some retried; shuffled; a few late; then the
// malformed bodies anywhere and the conflicting reuses after their originals.
void Generator::Deliver(History* h) {
  const std::vector<Planned>& events = plan_;
  struct Item {
    Delivery delivery;
    size_t event = SIZE_MAX;  // SIZE_MAX: malformed or conflicting
  };
  std::vector<Item> items;
  for (size_t i = 0; i < events.size(); ++i) {
    const int copies = rng_.Chance(o_.duplicate_rate) ? static_cast<int>(rng_.Range(2, 4)) : 1;
    if (copies > 1) {
      ++h->stats.retried;
      h->stats.retries += static_cast<size_t>(copies - 1);
    }
    for (int c = 0; c < copies; ++c) {
      Item item;
      item.event = i;
      item.delivery.body = events[i].body;
      // Retries often come through the sender's envelope path with headers.
      if (rng_.Chance(c == 0 ? 0.1 : 0.5)) {
        item.delivery.headers = {{"Content-Type", "application/json"},
                                 {"X-RR-Event-Id", events[i].event_id},
                                 {"X-RR-Delivery-Attempt", std::to_string(c + 1)}};
        ++h->stats.with_header;
      }
      items.push_back(std::move(item));
    }
  }
  rng_.Permute(items.begin(), items.end());

  // Late: a few early events (often ones others depend on) arrive last.
  if (!events.empty()) {
    const size_t n_late = std::min(events.size(), 1 + events.size() / 150);
    const size_t early = std::max<size_t>(1, events.size() / 3);
    std::vector<size_t> candidates(early);
    for (size_t i = 0; i < early; ++i) candidates[i] = i;
    rng_.Permute(candidates.begin(), candidates.end());
    std::vector<bool> late(events.size(), false);
    for (size_t i = 0; i < std::min(n_late, early); ++i) late[candidates[i]] = true;
    std::stable_partition(items.begin(), items.end(),
                          [&](const Item& it) { return !late[it.event]; });
    h->stats.late = std::min(n_late, early);
  }

  for (int m = 0; m < o_.malformed; ++m) {
    Item item;
    item.delivery = Malformed(m % 7, events);
    items.insert(items.begin() + static_cast<ptrdiff_t>(rng_.Below(items.size() + 1)),
                 std::move(item));
    ++h->malformed;
  }

  // Conflicts: an event resent by hand with its time edited; each after the
  // first delivery of its original, so the original is the one stored.
  std::vector<size_t> originals(events.size());
  for (size_t i = 0; i < events.size(); ++i) originals[i] = i;
  rng_.Permute(originals.begin(), originals.end());
  const size_t n_conflicts =
      std::min(originals.size(), static_cast<size_t>(std::max(0, o_.conflicts)));
  for (size_t c = 0; c < n_conflicts; ++c) {
    const Planned& original = events[originals[c]];
    int64_t shift = rng_.Range(kSecond, kHour);
    if (rng_.Chance(0.5)) shift = -shift;
    Item item;
    item.delivery.body = BodyOf(original, original.at + shift);
    item.delivery.headers = {{"X-RR-Event-Id", original.event_id}};
    size_t first = 0;
    while (items[first].event != originals[c]) ++first;
    const size_t pos = first + 1 + rng_.Below(items.size() - first);
    items.insert(items.begin() + static_cast<ptrdiff_t>(pos), std::move(item));
    ++h->conflicts;
  }

  h->deliveries.reserve(items.size());
  for (Item& it : items) h->deliveries.push_back(std::move(it.delivery));
}

History Generator::Run() {
  MakeProducts();
  MakeInventory();
  MakeReceipts();
  MakeImpossible(
      static_cast<size_t>(rng_.Round(o_.impossible_rate * static_cast<double>(plan_.size()))));

  std::stable_sort(plan_.begin(), plan_.end(), [](const Planned& a, const Planned& b) {
    return a.at != b.at ? a.at < b.at : a.order < b.order;
  });
  History h;
  h.stats.receipts = receipts_.size();
  h.stats.products = products_.size();
  for (Planned& p : plan_) {
    p.body = BodyOf(p, p.at);
    h.events.push_back(p.body);
    switch (p.kind) {
      case Kind::kReceipt:
        ++h.stats.receipt_events;
        break;
      case Kind::kProduct:
        ++h.stats.product_events;
        break;
      case Kind::kInventory:
        ++h.stats.inventory_events;
        break;
    }
    if (p.impossible) ++h.stats.impossible;
  }
  Deliver(&h);
  return h;
}

}  // namespace

History GenerateHistory(const HistoryOptions& options) { return Generator(options).Run(); }

void Shuffle(std::vector<Delivery>* deliveries, uint64_t seed) {
  Rng rng(seed);
  rng.Permute(deliveries->begin(), deliveries->end());
}

}  // namespace eventfold::sim
