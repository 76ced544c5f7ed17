// The lines of a command's output, as views into it (pure; no copy).
//
// Lines end at '\n'; the text after the last '\n' is a line when it is not
// empty, so "a\nb\n" and "a\nb" are both {"a", "b"}, "" is {}, and "a\n\nb"
// keeps its empty line: {"a", "", "b"}. A '\r' stays part of its line
// (bytes from a target are bytes: the caller decides what a line holds).
// The views point into `text`: it must outlive them.
#pragma once

#include <string_view>
#include <vector>

namespace npuprof {

std::vector<std::string_view> SplitLines(std::string_view text);

}  // namespace npuprof
