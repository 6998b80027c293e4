// The members every JSON form of a refused delivery shares: "status",
// "outcome", "reason", "headers", "body_bytes" and "body_prefix", in that
// order. `eventfold refused` prints them after the delivery's quarantine
// seq and RFC 3339 time; cluster mode's refused records (the wire format a
// receiver publishes for the fold workers to keep) after its time in
// microseconds. One writer, so the two cannot drift apart.
//
// Thread-safety: a pure function over its arguments.

#ifndef EVENTFOLD_CORE_REFUSED_JSON_H_
#define EVENTFOLD_CORE_REFUSED_JSON_H_

#include "core/json_writer.h"
#include "eventfold/quarantine.h"

namespace eventfold {

// Writes the members above into the object `w` has open.
void WriteRefusedMembers(JsonWriter* w, const RefusedDelivery& r);

}  // namespace eventfold

#endif  // EVENTFOLD_CORE_REFUSED_JSON_H_
