// NCCL's double binary tree rank math, exhaustively for n = 1..1100: each
// tree is a tree (one root, parents and children agree, every rank reaches
// the root), depth ~ log2 n, and no rank is interior in both trees (but
// rank 0 for odd n, as in NCCL).
#include "algo/algorithms.h"

#include <gtest/gtest.h>

namespace conflux::algo {
namespace {

void check_tree(int n, int t, int* max_depth) {
  int roots = 0;
  for (int r = 0; r < n; ++r) {
    TreeLinks l = dtree_links(n, t, r);
    if (l.parent < 0) {
      ++roots;
      EXPECT_EQ(r, dtree_root(n, t)) << "n=" << n << " tree " << t;
    } else {
      ASSERT_LT(l.parent, n);
      TreeLinks p = dtree_links(n, t, l.parent);
      EXPECT_TRUE(p.child0 == r || p.child1 == r) << "n=" << n << " tree " << t << " rank " << r;
    }
    for (int c : {l.child0, l.child1}) {
      if (c < 0) continue;
      ASSERT_LT(c, n);
      EXPECT_EQ(dtree_links(n, t, c).parent, r) << "n=" << n << " tree " << t << " rank " << r;
    }
    EXPECT_NE(l.child0, l.child1 >= 0 ? l.child1 : -2);
  }
  // Depth of every rank, by memoised walks to the root (a cycle never ends).
  std::vector<int> depth(n, -1);
  for (int r = 0; r < n; ++r) {
    std::vector<int> path;
    int x = r;
    while (x >= 0 && depth[x] < 0 && path.size() <= static_cast<size_t>(n)) {
      path.push_back(x);
      x = dtree_links(n, t, x).parent;
    }
    ASSERT_LE(path.size(), static_cast<size_t>(n)) << "cycle, n=" << n;
    int d = x < 0 ? -1 : depth[x];
    for (auto it = path.rbegin(); it != path.rend(); ++it) depth[*it] = ++d;
    *max_depth = std::max(*max_depth, depth[r]);
  }
  EXPECT_EQ(roots, 1) << "n=" << n << " tree " << t;
}

TEST(DoubleBinaryTree, TwoTreesOverEveryRankCount) {
  for (int n = 1; n <= 1100; ++n) {
    int log2n = 0;
    while ((1 << log2n) < n) ++log2n;
    for (int t = 0; t < 2; ++t) {
      int depth = 0;
      check_tree(n, t, &depth);
      EXPECT_LE(depth, log2n + 1) << "n=" << n;
    }
    for (int r = 0; r < n; ++r) {
      auto interior = [&](int t) {
        TreeLinks l = dtree_links(n, t, r);
        return l.child0 >= 0 || l.child1 >= 0;
      };
      // As in NCCL, one exception: for odd n, rank 0 roots tree 0 with a
      // single child and is interior in the shifted tree 1.
      bool exception = n <= 2 || (n % 2 == 1 && r == 0);
      EXPECT_TRUE(exception || !(interior(0) && interior(1))) << "n=" << n << " rank " << r;
      EXPECT_TRUE(r != 0 || dtree_links(n, 0, 0).child0 == -1);  // tree 0's root has one child
    }
  }
}

TEST(DoubleBinaryTree, MatchesNcclForEightRanks) {
  // ncclGetBtree(8): 0 -> 4; 4 -> 2, 6; 2 -> 1, 3; 6 -> 5, 7.
  EXPECT_EQ(btree_links(8, 0).child1, 4);
  EXPECT_EQ(btree_links(8, 4).parent, 0);
  EXPECT_EQ(btree_links(8, 4).child0, 2);
  EXPECT_EQ(btree_links(8, 4).child1, 6);
  EXPECT_EQ(btree_links(8, 6).child0, 5);
  EXPECT_EQ(btree_links(8, 6).child1, 7);
  EXPECT_EQ(btree_links(8, 3).parent, 2);
  // Even n mirrors: tree 1 is rooted at 7 and 3 = 7 - 4 is its child.
  EXPECT_EQ(dtree_root(8, 1), 7);
  EXPECT_EQ(dtree_links(8, 1, 3).parent, 7);
  // Odd n shifts by one: tree 1 is rooted at 1.
  EXPECT_EQ(dtree_root(7, 1), 1);
}

}  // namespace
}  // namespace conflux::algo
