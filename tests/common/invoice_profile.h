// "receiptroller-invoices": the built-in ReceiptRoller profile plus an
// `invoice` entity, the changed profile of the profile-switch tests.

#ifndef EVENTFOLD_TESTS_COMMON_INVOICE_PROFILE_H_
#define EVENTFOLD_TESTS_COMMON_INVOICE_PROFILE_H_

namespace eventfold::test_util {

inline constexpr const char* kInvoiceProfile = R"({"name":"receiptroller-invoices",
 "entities":[
  {"name":"receipt","key":"data.receipt_id",
   "transitions":[{"type":"receipt.issued","from":["none"],"to":"issued"},
                  {"type":"receipt.refunded","from":["issued"],"to":"refunded"}]},
  {"name":"product","key":"data.product_id",
   "transitions":[{"type":"product.created","from":["none"],"to":"active"},
                  {"type":"product.updated","from":["active"],"to":"active"},
                  {"type":"product.deleted","from":["active"],"to":"deleted"}]},
  {"name":"inventory","key":"data.product_id",
   "transitions":[{"type":"inventory.updated","from":["none","tracked"],"to":"tracked"}]},
  {"name":"invoice","key":"data.invoice_id",
   "transitions":[{"type":"invoice.paid","from":["none"],"to":"paid"}]}]})";

}  // namespace eventfold::test_util

#endif  // EVENTFOLD_TESTS_COMMON_INVOICE_PROFILE_H_
