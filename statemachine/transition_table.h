// TransitionTable: the legal state moves of one run kind.
//
// Contract: Allowed(from, to) holds exactly for the listed moves; IsTerminal
// for the listed terminal states. A table may also name states it renamed:
// Current(stored) maps the old name a stored StateChanged may still carry to
// today's name (every other name maps to itself). The fold (engine.cc ApplyWith)
// and the replay verifier apply Current to stored names before anything else
// looks at them, so an old log folds, replays and verifies as it did.
#pragma once

#include <initializer_list>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace npuprof::sm {

class TransitionTable {
 public:
  using Move = std::pair<std::string, std::string>;

  TransitionTable(std::initializer_list<std::pair<const char*, const char*>> moves,
                  std::initializer_list<const char*> terminal_states);
  // A table computed in code (memory_profile_steps.cc), with its renamed states (old -> new).
  TransitionTable(std::set<Move> moves, std::set<std::string> terminal_states,
                  std::map<std::string, std::string> renamed = {});

  bool Allowed(const std::string& from, const std::string& to) const;
  bool IsTerminal(const std::string& state) const { return terminal_.count(state) > 0; }
  // Today's name of a state a stored event carries (an old name of a renamed state, or itself).
  std::string Current(const std::string& stored) const;
  const std::set<Move>& moves() const { return moves_; }
  const std::map<std::string, std::string>& renamed() const { return renamed_; }
  std::vector<std::string> States() const;

 private:
  std::set<Move> moves_;
  std::set<std::string> terminal_;
  std::map<std::string, std::string> renamed_;
};

}  // namespace npuprof::sm
