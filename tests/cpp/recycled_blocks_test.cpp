// RecycledBlocks: freed blocks of the first size taken come back to the next take; others go to the heap.
#include "cuweave/recycled_blocks.hpp"

#include <algorithm>
#include <cstring>
#include <vector>

#include <gtest/gtest.h>

namespace cuweave {
namespace {

TEST(RecycledBlocksTest, AFreedBlockIsTheNextTakenLastFreedFirst) {
  RecycledBlocks blocks;
  void* a = blocks.take(48);
  void* b = blocks.take(48);
  ASSERT_NE(a, b);
  std::memset(a, 1, 48);  // usable memory of the size asked
  blocks.give_back(a, 48);
  blocks.give_back(b, 48);
  EXPECT_EQ(blocks.take(48), b);
  EXPECT_EQ(blocks.take(48), a);
  blocks.give_back(a, 48);
  blocks.give_back(b, 48);
}

TEST(RecycledBlocksTest, BlocksOfAnotherSizeAreNeverKept) {
  RecycledBlocks blocks;
  void* first = blocks.take(48);
  void* other = blocks.take(16);
  blocks.give_back(other, 16);  // freed: a take of 48 must not get it
  void* next = blocks.take(48);
  EXPECT_NE(next, other);
  blocks.give_back(first, 48);
  blocks.give_back(next, 48);
  void* small = blocks.take(16);  // from the heap, not the 48-byte blocks kept
  EXPECT_NE(small, first);
  EXPECT_NE(small, next);
  blocks.give_back(small, 16);
}

TEST(RecycledBlocksTest, KeepsAtMostItsLimitAndFreesTheRest) {
  // Run under ASan by CI: blocks past the limit are freed at once, the kept ones with the owner, none leaked.
  RecycledBlocks blocks;
  std::vector<void*> taken;
  for (int i = 0; i < 5000; ++i) taken.push_back(blocks.take(32));
  for (void* block : taken) blocks.give_back(block, 32);
  std::vector<void*> again;
  for (int i = 0; i < 5000; ++i) again.push_back(blocks.take(32));
  std::size_t reused = 0;
  for (void* block : again) reused += std::find(taken.begin(), taken.end(), block) != taken.end();
  EXPECT_GE(reused, 4096u);
  for (void* block : again) blocks.give_back(block, 32);
}

}  // namespace
}  // namespace cuweave
