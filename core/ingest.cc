#include "eventfold/ingest.h"

#include "core/field_values.h"
#include "core/json_writer.h"

namespace eventfold {

std::optional<std::string_view> FindHeader(const Headers& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (EqualsIgnoringCase(key, name)) return value;
  }
  return std::nullopt;
}

std::string_view OutcomeName(Outcome outcome) {
  switch (outcome) {
    case Outcome::kAccepted:
      return "accepted";
    case Outcome::kDuplicate:
      return "duplicate";
    case Outcome::kConflict:
      return "conflict";
    case Outcome::kInvalid:
      return "invalid";
    case Outcome::kUnauthorized:
      return "unauthorized";
    case Outcome::kTooLarge:
      return "too_large";
    case Outcome::kOverloaded:
      return "overloaded";
    case Outcome::kStorageError:
      return "storage_error";
  }
  return "unknown";
}

int HttpStatus(Outcome outcome) {
  switch (outcome) {
    case Outcome::kAccepted:
    case Outcome::kDuplicate:
      return 200;
    case Outcome::kConflict:
      return 409;
    case Outcome::kInvalid:
      return 400;
    case Outcome::kUnauthorized:
      return 401;
    case Outcome::kTooLarge:
      return 413;
    case Outcome::kOverloaded:
      return 429;
    case Outcome::kStorageError:
      return 503;
  }
  return 503;
}

std::string IngestResult::ResponseBody() const {
  JsonWriter w;
  w.BeginObject().Key("status").String(OutcomeName(outcome));
  if (!message.empty()) w.Key("error").String(message);
  w.EndObject();
  return w.Take();
}

}  // namespace eventfold
