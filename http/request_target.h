// What a request's target and Host field may be (RFC 9112 §3.2, RFC 9110
// §7.2, RFC 3986 §3.2), checked by the HTTP server before a request reaches
// a receiver. Pure functions, no state.
//
// Why by hand: Beast checks the request line's characters, not the URI
// grammar, and Boost.URL (which does) is not in Debian 12's Boost 1.74.

#ifndef EVENTFOLD_HTTP_REQUEST_TARGET_H_
#define EVENTFOLD_HTTP_REQUEST_TARGET_H_

#include <optional>
#include <string>
#include <string_view>

namespace eventfold::http {

// True when `value` is a valid Host field value: uri-host [":" port], where
// uri-host is an IPv6 literal in brackets or a reg-name (an IPv4 address is
// one) of unreserved characters, percent-encodings and sub-delims, and port
// is digits. An empty value is valid (RFC 9112 §3.2: a target without an
// authority). Userinfo ("user@host") and IPvFuture literals are refused.
bool ValidHost(std::string_view value);

// The origin-form (path and query) a request target names:
// - origin-form ("/path?q") is returned as it is;
// - absolute-form ("http://host/path?q", which a server must accept, RFC
//   9112 §3.2.2) becomes the path and query after its authority ("/" when it
//   has no path); its scheme must be http or https and its authority a valid
//   Host value (above), not empty.
// nullopt for anything else (e.g. "path" without a slash), and for a target
// holding a fragment ('#') or a byte outside printable ASCII. OPTIONS's "*"
// and CONNECT's authority-form are the caller's to allow.
std::optional<std::string> OriginForm(std::string_view target);

}  // namespace eventfold::http

#endif  // EVENTFOLD_HTTP_REQUEST_TARGET_H_
