// A call site a caller found itself, noted for the operations the thread issues meanwhile (trace::CallSiteNote):
// what a hook in another library uses where it read the site without the GIL.
#include <gtest/gtest.h>

#include <cstdint>

#include "cuweave/trace.hpp"

namespace cuweave::trace {
namespace {

TEST(CallSiteNote, AGivenSiteIsTheThreadsUntilTheNoteEndsWhileCallSitesAreWanted) {
  const std::uint32_t outer = intern_call_site("train.py", 12, "step");
  const std::uint32_t inner = intern_call_site("train.py", 13, "step");
  want_call_sites(true);
  ASSERT_EQ(current_call_site(), 0u);  // no provider here (no Python), nothing noted
  {
    const CallSiteNote noted(outer);
    EXPECT_EQ(current_call_site(), outer);
    {
      const CallSiteNote nested(inner);
      EXPECT_EQ(current_call_site(), inner);
      const CallSiteNote unknown(0);  // notes nothing: the site noted before stays
      EXPECT_EQ(current_call_site(), inner);
    }
    EXPECT_EQ(current_call_site(), outer);
  }
  EXPECT_EQ(current_call_site(), 0u);
  want_call_sites(false);
  {
    const CallSiteNote noted(outer);  // neither a trace nor the sanitizer asks: nothing is noted
    EXPECT_EQ(current_call_site(), 0u);
  }
  EXPECT_EQ(call_site(outer).line, 12);
}

}  // namespace
}  // namespace cuweave::trace
