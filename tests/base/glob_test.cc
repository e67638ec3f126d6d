#include "core/base/glob.h"

#include <gtest/gtest.h>

namespace quark {
namespace {

TEST(GlobTest, StarCrossesDotsAsInQuark) {
  EXPECT_TRUE(GlobMatch("*.mlp.down_proj", "model.layers.0.mlp.down_proj"));
  EXPECT_TRUE(GlobMatch("*k_proj", "model.layers.11.self_attn.k_proj"));
  EXPECT_FALSE(GlobMatch("*k_proj", "model.layers.11.self_attn.q_proj"));
  EXPECT_TRUE(GlobMatch("lm_head", "lm_head"));
  EXPECT_FALSE(GlobMatch("lm_head", "model.lm_head"));
  EXPECT_TRUE(GlobMatch("model.layers.[0-3].*", "model.layers.2.mlp.up_proj"));
}

TEST(GlobTest, DetectsGlobCharacters) {
  EXPECT_TRUE(HasGlobChars("*.q_proj"));
  EXPECT_TRUE(HasGlobChars("layer?"));
  EXPECT_FALSE(HasGlobChars("model.layers.0.mlp.down_proj"));
}

}  // namespace
}  // namespace quark
