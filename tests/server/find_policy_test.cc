// The find policy table against the specification's description of each
// mode (../shared/spec/find-and-immediate.rst, "Find modes").
#include "server/find_policy.h"

#include <gtest/gtest.h>

namespace convtune {
namespace {

TEST(FindPolicyTest, EachModeAsTheSpecificationDescribesIt) {
  const FindPolicy& normal = *PolicyFor(v1::NORMAL);
  EXPECT_FALSE(normal.reads_find_db);  // benchmarks all the solvers
  EXPECT_FALSE(normal.dynamic_only);

  const FindPolicy& fast = *PolicyFor(v1::FAST);
  EXPECT_TRUE(fast.reads_find_db);
  EXPECT_TRUE(fast.falls_back_on_miss);  // a miss uses immediate mode
  EXPECT_FALSE(fast.verifies_system_db);

  const FindPolicy& hybrid = *PolicyFor(v1::HYBRID);
  EXPECT_TRUE(hybrid.reads_find_db);
  EXPECT_FALSE(hybrid.falls_back_on_miss);  // a miss runs a find
  EXPECT_FALSE(hybrid.dynamic_only);

  const FindPolicy& dynamic = *PolicyFor(v1::DYNAMIC_HYBRID);
  EXPECT_TRUE(dynamic.reads_find_db);
  EXPECT_FALSE(dynamic.falls_back_on_miss);
  EXPECT_TRUE(dynamic.dynamic_only);  // skipping non-dynamic kernels
  EXPECT_FALSE(dynamic.searches_configs);

  for (v1::FindMode m : {v1::TRUST_VERIFY, v1::TRUST_VERIFY_FULL}) {
    const FindPolicy& verify = *PolicyFor(m);
    EXPECT_TRUE(verify.reads_find_db);
    EXPECT_TRUE(verify.verifies_system_db);  // a FindDb hit is evaluated
    EXPECT_TRUE(verify.dynamic_only);        // tuning skips non-dynamic kernels
    EXPECT_TRUE(verify.searches_configs);
  }
  EXPECT_TRUE(PolicyFor(v1::TRUST_VERIFY)->bounded);
  EXPECT_FALSE(
      PolicyFor(v1::TRUST_VERIFY_FULL)->bounded);  // no limits on tuning time
  for (v1::FindMode m :
       {v1::NORMAL, v1::FAST, v1::HYBRID, v1::DYNAMIC_HYBRID}) {
    EXPECT_FALSE(PolicyFor(m)->verifies_system_db) << m;
    EXPECT_FALSE(PolicyFor(m)->bounded) << m;
    EXPECT_EQ(PolicyFor(m)->mode, m);
  }
  EXPECT_EQ(PolicyFor(static_cast<v1::FindMode>(4)), nullptr);
  EXPECT_EQ(PolicyFor(v1::FIND_MODE_UNSPECIFIED), nullptr);
}

}  // namespace
}  // namespace convtune
