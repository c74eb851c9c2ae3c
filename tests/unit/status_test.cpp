// Status: a code and, for a failure, a message; a success carries no
// message and moves at the cost of two words.
#include "core/status.h"

#include <gtest/gtest.h>

namespace conflux {
namespace {

TEST(Status, SuccessHasNoMessage) {
  const Status ok = Status::Ok();
  EXPECT_TRUE(ok.ok());
  EXPECT_EQ(ok.code(), cfxSuccess);
  EXPECT_TRUE(ok.message().empty());
  Status still = Status::Ok();
  still.prepend("allreduce #3: ");
  EXPECT_TRUE(still.message().empty());
}

TEST(Status, MessagesSurviveCopiesMovesAndPrepends) {
  Status st = timeout_error("waiting for rank 2");
  st.prepend("allreduce #7: ").prepend("rank 0: ");
  EXPECT_EQ(st.code(), cfxTimeout);
  EXPECT_EQ(st.message(), "rank 0: allreduce #7: waiting for rank 2");
  const Status copy = st;
  EXPECT_EQ(copy.message(), st.message());
  Status assigned;
  assigned = copy;
  EXPECT_EQ(assigned.message(), st.message());
  assigned = assigned;  // self-assignment keeps it
  EXPECT_EQ(assigned.message(), st.message());
  const Status moved = std::move(st);
  EXPECT_EQ(moved.code(), cfxTimeout);
  EXPECT_EQ(moved.message(), copy.message());
  // A failure made without a message gains one from its context.
  Status bare(cfxInternalError, "");
  bare.prepend("executor: ");
  EXPECT_EQ(bare.message(), "executor: ");
}

TEST(Status, ResultCarriesEitherAValueOrTheFailure) {
  Result<int> good = 5;
  ASSERT_TRUE(good.ok());
  EXPECT_EQ(good.value(), 5);
  EXPECT_TRUE(good.status().ok());
  Result<int> bad = invalid_argument("count too large");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), cfxInvalidArgument);
  EXPECT_EQ(bad.status().message(), "count too large");
}

}  // namespace
}  // namespace conflux
