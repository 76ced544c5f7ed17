// TransitionTable: the legal state moves of one run kind.
#pragma once

#include <initializer_list>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace npuprof::sm {

class TransitionTable {
 public:
  TransitionTable(std::initializer_list<std::pair<const char*, const char*>> moves,
                  std::initializer_list<const char*> terminal_states);

  bool Allowed(const std::string& from, const std::string& to) const;
  bool IsTerminal(const std::string& state) const { return terminal_.count(state) > 0; }
  const std::set<std::pair<std::string, std::string>>& moves() const { return moves_; }
  std::vector<std::string> States() const;

 private:
  std::set<std::pair<std::string, std::string>> moves_;
  std::set<std::string> terminal_;
};

}  // namespace npuprof::sm
