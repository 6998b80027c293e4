// The request target and Host grammar the HTTP server enforces
// (http/request_target.h), case by case against RFC 9112 §3.2 and RFC 3986.

#include "http/request_target.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>

namespace eventfold::http {
namespace {

TEST(RequestTarget, ValidHostTakesAHostAndPortOrNothing) {
  for (const char* ok :
       {"", "t", "example.com", "example.com:8080", "127.0.0.1:80", "[::1]", "[::1]:8080",
        "[2001:db8::1]", "a%41b", "x:", "sub-delims!$&'()*+,;=.~_"}) {
    EXPECT_TRUE(ValidHost(ok)) << ok;
  }
  for (const char* bad : {"a b", "x/y", "[::1", "[]", "[::1]x", "[::1]:a", "[v1.x]", "u@x", "x:abc",
                          "x:80:80", "a%4", "a%zz", "x?y", "x#y", "\xff"}) {
    EXPECT_FALSE(ValidHost(bad)) << bad;
  }
}

TEST(RequestTarget, OriginFormIsTheTargetAndAbsoluteFormItsPath) {
  EXPECT_EQ(OriginForm("/hooks"), "/hooks");
  EXPECT_EQ(OriginForm("/v1/feed?after=3"), "/v1/feed?after=3");
  EXPECT_EQ(OriginForm("/"), "/");
  EXPECT_EQ(OriginForm("http://x/healthz"), "/healthz");
  EXPECT_EQ(OriginForm("HTTPS://x:8443/a/b?c=d"), "/a/b?c=d");
  EXPECT_EQ(OriginForm("http://x"), "/");
  EXPECT_EQ(OriginForm("http://x?q=1"), "/?q=1");
  EXPECT_EQ(OriginForm("http://[::1]:80/p"), "/p");
}

TEST(RequestTarget, AnythingElseIsNoTarget) {
  for (const char* bad :
       {"", "hooks", "*", "x:80", "ftp://x/a", "http:/x/a", "http:///a", "http://u@x/a",
        "http://a b/", "/a#frag", "/a b", "/a\x7f", "/a\xff", "/a\t"}) {
    EXPECT_EQ(OriginForm(bad), std::nullopt) << bad;
  }
}

}  // namespace
}  // namespace eventfold::http
