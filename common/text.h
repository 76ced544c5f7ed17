// Small text helpers shared by parsers, the SSH layer and the views. Pure.
#pragma once

#include <string>
#include <string_view>

namespace npuprof {

// s without leading and trailing ASCII whitespace (space, \t, \r, \n, \f, \v).
std::string_view Trim(std::string_view s);

// The last component of a '/'-separated path (a remote one: no file system
// is asked), trailing slashes ignored: "/a/b_ascend_pt/" -> "b_ascend_pt",
// "name" -> "name", "/" -> "/".
std::string PathBaseName(std::string_view path);

}  // namespace npuprof
