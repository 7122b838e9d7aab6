#include "server/find_policy.h"

namespace convtune {
namespace {

// clang-format off
constexpr FindPolicy kPolicies[] = {
  //  mode                 reads  verifies  falls   dynamic  searches  bounded
  {v1::NORMAL,             false, false,    false,  false,   false,    false},
  {v1::FAST,               true,  false,    true,   false,   false,    false},
  {v1::HYBRID,             true,  false,    false,  false,   false,    false},
  {v1::DYNAMIC_HYBRID,     true,  false,    false,  true,    false,    false},
  {v1::TRUST_VERIFY,       true,  true,     false,  true,    true,     true},
  {v1::TRUST_VERIFY_FULL,  true,  true,     false,  true,    true,     false},
};
// clang-format on

}  // namespace

const FindPolicy* PolicyFor(v1::FindMode mode) {
  for (const FindPolicy& p : kPolicies) {
    if (p.mode == mode) return &p;
  }
  return nullptr;
}

}  // namespace convtune
