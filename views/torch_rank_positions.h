// Where each rank of a torch-profile run sits in its deployment, read from
// its manifest, so that `npuprof compare` matches ranks by place rather than
// by the rank directory's name or its index in the list. Pure: no I/O.
//
// A rank's position is (node, rank_in_node):
//  * node: the index of the machine that wrote the rank directory in the
//    deployment (manifest "nodes" [{node, machine}], head = 0; else the order
//    of "remote_profile_roots"; a one-node run's ranks are all node 0, and so
//    is a directory that names no machine). A machine the manifest does not
//    place gets the next index after the placed ones, in order of appearance.
//  * rank_in_node: the directory's index among that node's directories in the
//    order the manifest lists them (each node's listing, sorted by name), so
//    a one-node run keeps the positions it always had.
// Positions of two runs are compared in (node, rank_in_node) order; a
// position one run lacks is null in that run's slot (docs/COMPARE.md).
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace npuprof::views {

struct RankKey {
  int node = 0;
  int rank_in_node = 0;
  bool operator<(const RankKey& o) const {
    return node != o.node ? node < o.node : rank_in_node < o.rank_in_node;
  }
  bool operator==(const RankKey& o) const { return node == o.node && rank_in_node == o.rank_in_node; }
};

struct RankAt {
  RankKey key;
  std::string machine;                // the directory's, else the run's machine
  const nlohmann::json* dir = nullptr;  // the manifest's remote_profile_dirs entry (points into it)
};

// The ranks of one manifest with their positions, in (node, rank_in_node)
// order. The pointers are into manifest, which must outlive the result.
std::vector<RankAt> RankPositions(const nlohmann::json& manifest);

// Every position any run has, sorted.
std::vector<RankKey> UnionOfPositions(const std::vector<std::vector<RankAt>>& runs);

// The rank of a run at key, or nullptr.
const RankAt* FindPosition(const std::vector<RankAt>& run, const RankKey& key);

// "node 1 rank 0"
std::string PositionText(const RankKey& key);
// A run's shape: "2 node(s): 2+2 rank(s)" / "1 node(s): 2 rank(s)" / "no ranks".
std::string ShapeText(const std::vector<RankAt>& run);
// {"nodes": n, "ranks_per_node": [..], "machines": [..]}: the nodes that wrote ranks.
nlohmann::json ShapeJson(const std::vector<RankAt>& run);

}  // namespace npuprof::views
