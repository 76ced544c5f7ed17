#include "statemachine/transition_table.h"

namespace npuprof::sm {

TransitionTable::TransitionTable(std::initializer_list<std::pair<const char*, const char*>> moves,
                                 std::initializer_list<const char*> terminal_states) {
  for (const auto& [from, to] : moves) moves_.emplace(from, to);
  for (const char* s : terminal_states) terminal_.insert(s);
}

TransitionTable::TransitionTable(std::set<Move> moves, std::set<std::string> terminal_states,
                                 std::map<std::string, std::string> renamed)
    : moves_(std::move(moves)), terminal_(std::move(terminal_states)), renamed_(std::move(renamed)) {}

bool TransitionTable::Allowed(const std::string& from, const std::string& to) const {
  return moves_.count({from, to}) > 0;
}

std::string TransitionTable::Current(const std::string& stored) const {
  auto it = renamed_.find(stored);
  return it == renamed_.end() ? stored : it->second;
}

std::vector<std::string> TransitionTable::States() const {
  std::set<std::string> all;
  for (const auto& [from, to] : moves_) {
    all.insert(from);
    all.insert(to);
  }
  return {all.begin(), all.end()};
}

}  // namespace npuprof::sm
