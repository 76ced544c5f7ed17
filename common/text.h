// Small text helpers shared by parsers and the SSH layer. Pure.
#pragma once

#include <string_view>

namespace npuprof {

// s without leading and trailing ASCII whitespace (space, \t, \r, \n, \f, \v).
std::string_view Trim(std::string_view s);

}  // namespace npuprof
