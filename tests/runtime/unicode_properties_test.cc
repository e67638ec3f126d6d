// The tokenizer's Unicode 16.0 General_Category table and the rewrite of a split pattern's \p{X} into its ranges
// (issue #33, item 4). Expected categories are the Unicode 16.0 UCD's (UnicodeData.txt).
#include "core/runtime/unicode_properties.h"

#include <gtest/gtest.h>

#include <string>

namespace quark::runtime::tokenizer_json {
namespace {

TEST(UnicodePropertiesTest, CategoriesOfOldAndNewCodePoints) {
  EXPECT_EQ(GeneralCategory(U'A'), "Lu");
  EXPECT_EQ(GeneralCategory(U'z'), "Ll");
  EXPECT_EQ(GeneralCategory(U'7'), "Nd");
  EXPECT_EQ(GeneralCategory(U' '), "Zs");
  EXPECT_EQ(GeneralCategory(0), "Cc");
  EXPECT_EQ(GeneralCategory(0x4E00), "Lo");    // CJK
  EXPECT_EQ(GeneralCategory(0x00BD), "No");    // ½
  EXPECT_EQ(GeneralCategory(0x0378), "Cn");    // unassigned
  EXPECT_EQ(GeneralCategory(0x10FFFF), "Cn");  // a noncharacter
  EXPECT_EQ(GeneralCategory(0x10FFFD), "Co");  // private use, the last assigned code point
  // Unicode 15.0: Kawi and Nag Mundari digits; 16.0: Garay, Gurung Khema, Ol Onal, Sunuwar, Myanmar Extended-C,
  // outlined digits; and letters of those scripts.
  for (const char32_t digit : {0x11F50, 0x11F59, 0x1E4F0, 0x1E4F9, 0x10D40, 0x10D49, 0x16130, 0x16139, 0x1E5F1,
                               0x1E5FA, 0x11BF0, 0x11BF9, 0x116D0, 0x116E3, 0x1CCF0, 0x1CCF9}) {
    EXPECT_EQ(GeneralCategory(digit), "Nd") << std::hex << static_cast<uint32_t>(digit);
    EXPECT_TRUE(HasGeneralCategory(digit, "N"));
    EXPECT_FALSE(HasGeneralCategory(digit, "L"));
  }
  EXPECT_EQ(GeneralCategory(0x1E4D0), "Lo");  // NAG MUNDARI LETTER O (15.0)
  EXPECT_EQ(GeneralCategory(0x10D50), "Lu");  // GARAY CAPITAL LETTER A (16.0)
  EXPECT_EQ(GeneralCategory(0x10D70), "Ll");  // GARAY SMALL LETTER A (16.0)
  EXPECT_TRUE(HasGeneralCategory(U'A', "L&"));
  EXPECT_FALSE(HasGeneralCategory(0x4E00, "L&"));
}

TEST(UnicodePropertiesTest, PropertiesBecomeRangesInsideAndOutsideClasses) {
  auto nd = WithUnicode16Properties(R"(\p{Nd})", "p");
  ASSERT_TRUE(nd.ok()) << nd.status();
  EXPECT_EQ(nd->rfind(R"([\x{30}-\x{39}\x{660}-\x{669})", 0), 0u) << nd->substr(0, 60);
  EXPECT_NE(nd->find(R"(\x{1e4f0}-\x{1e4f9})"), std::string::npos);
  EXPECT_EQ(nd->back(), ']');
  auto in_class = WithUnicode16Properties(R"([^\s\p{N}]+)", "p");
  ASSERT_TRUE(in_class.ok());
  EXPECT_EQ(in_class->rfind(R"([^\s\x{30}-\x{39})", 0), 0u) << in_class->substr(0, 60);
  EXPECT_EQ(in_class->substr(in_class->size() - 2), "]+");
  auto negated = WithUnicode16Properties(R"(\P{L}|\pN)", "p");
  ASSERT_TRUE(negated.ok());
  EXPECT_EQ(negated->rfind(R"([^\x{41}-\x{5a}\x{61}-\x{7a})", 0), 0u) << negated->substr(0, 60);
  EXPECT_NE(negated->find(R"(|[\x{30}-\x{39})"), std::string::npos);
  // Left to PCRE2: scripts, \P inside a class, literals, escaped backslashes, POSIX classes.
  for (const std::string kept : {R"(\p{Han}+)", R"([\P{L}x])", R"(\Q\p{L}\E)", R"(\\p{L})", R"([[:alpha:]\]])",
                                 R"(\p{Any})", R"([]a])"}) {
    auto same = WithUnicode16Properties(kept, "p");
    ASSERT_TRUE(same.ok()) << kept;
    EXPECT_EQ(*same, kept);
  }
  auto bad = WithUnicode16Properties(R"(a\p{L)", "pre_tokenizer.pattern.Regex");
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(), "pre_tokenizer.pattern.Regex: regex has an unterminated \\p{ at offset 1");
}

}  // namespace
}  // namespace quark::runtime::tokenizer_json
