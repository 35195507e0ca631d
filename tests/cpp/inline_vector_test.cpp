// InlineVector: its first N elements inside the object, the rest in a heap block; each element made and destroyed
// once, whatever moves them.
#include "cuweave/inline_vector.hpp"

#include <memory>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace cuweave {
namespace {

// An element that counts the live ones (a shared_ptr, as an operation's arrays hold): a leak or a double
// destruction shows in the count.
struct Counted {
  explicit Counted(int value) : value(std::make_shared<int>(value)) { ++live; }
  Counted(Counted&& other) noexcept : value(std::move(other.value)) { ++live; }
  Counted(const Counted& other) : value(other.value) { ++live; }
  Counted& operator=(Counted&&) = delete;
  ~Counted() { --live; }
  std::shared_ptr<int> value;
  static inline int live = 0;
};

std::vector<int> values(const InlineVector<Counted, 2>& vector) {
  std::vector<int> out;
  for (const Counted& element : vector) out.push_back(*element.value);
  return out;
}

TEST(InlineVectorTest, PastTheInlineElementsAllMoveToOneHeapBlockInOrder) {
  {
    InlineVector<Counted, 2> vector;
    const Counted* inside = vector.data();
    vector.push_back(Counted(1));
    vector.push_back(Counted(2));
    EXPECT_EQ(vector.data(), inside);
    vector.push_back(Counted(3));
    EXPECT_NE(vector.data(), inside);
    vector.append(3, Counted(4));
    EXPECT_EQ(values(vector), (std::vector<int>{1, 2, 3, 4, 4, 4}));
    EXPECT_EQ(vector.size(), 6u);
    EXPECT_EQ(Counted::live, 6);
  }
  EXPECT_EQ(Counted::live, 0);
}

TEST(InlineVectorTest, ClearKeepsTheHeapBlockForTheNextElements) {
  InlineVector<Counted, 2> vector;
  for (int i = 0; i < 5; ++i) vector.push_back(Counted(i));
  const Counted* block = vector.data();
  vector.clear();
  EXPECT_TRUE(vector.empty());
  EXPECT_EQ(Counted::live, 0);
  for (int i = 0; i < 5; ++i) vector.push_back(Counted(10 + i));
  EXPECT_EQ(vector.data(), block);
  EXPECT_EQ(values(vector), (std::vector<int>{10, 11, 12, 13, 14}));
}

TEST(InlineVectorTest, MovingInlineElementsMovesEachAndLeavesTheSourceEmpty) {
  {
    InlineVector<Counted, 2> source;
    source.push_back(Counted(7));
    const std::shared_ptr<int> held = source[0].value;
    InlineVector<Counted, 2> moved(std::move(source));
    EXPECT_TRUE(source.empty());
    EXPECT_EQ(values(moved), std::vector<int>{7});
    EXPECT_EQ(moved[0].value, held);  // the same element, moved, not copied
    EXPECT_EQ(held.use_count(), 2);
    EXPECT_EQ(Counted::live, 1);
    source.push_back(Counted(8));  // the source is usable again, inside
    EXPECT_EQ(values(source), std::vector<int>{8});
  }
  EXPECT_EQ(Counted::live, 0);
}

TEST(InlineVectorTest, MovingAHeapBlockHandsItOver) {
  {
    InlineVector<Counted, 2> source;
    for (int i = 0; i < 3; ++i) source.push_back(Counted(i));
    const Counted* block = source.data();
    InlineVector<Counted, 2> target;
    target.push_back(Counted(9));
    target = std::move(source);
    EXPECT_EQ(target.data(), block);
    EXPECT_EQ(values(target), (std::vector<int>{0, 1, 2}));
    EXPECT_TRUE(source.empty());
    EXPECT_NE(source.data(), block);
    EXPECT_EQ(Counted::live, 3);
  }
  EXPECT_EQ(Counted::live, 0);
}

}  // namespace
}  // namespace cuweave
