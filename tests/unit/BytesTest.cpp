// The one byte image of a struct and the one hex formatter.
#include "support/Bytes.h"

#include <gtest/gtest.h>

namespace morpheus {
namespace {

struct Pair {
  uint32_t a;
  uint16_t b, c;
};

TEST(Bytes, StructsRoundTripThroughTheirImage) {
  Pair pair{0x0a000001, 80, 17};
  Bytes image = bytesOf(pair);
  ASSERT_EQ(image.size(), sizeof(Pair));
  EXPECT_EQ(image[0], 0x01) << "little-endian, as the kernel stores it";
  Pair back = fromBytes<Pair>(image);
  EXPECT_EQ(back.a, pair.a);
  EXPECT_EQ(back.b, pair.b);
  EXPECT_EQ(back.c, pair.c);
  EXPECT_EQ(bytesOf(image), image) << "bytes are their own image";
}

TEST(Bytes, HexIsSpacedAndBreaksLinesWhenAsked) {
  EXPECT_EQ(toHex({}), "");
  EXPECT_EQ(toHex({0, 1, 0xab, 0xff}), "00 01 ab ff");
  Bytes seventeen(17, 0x11);
  std::string dump = hexDump(seventeen);
  EXPECT_EQ(dump.find('\n'), 16 * 3 - 1) << dump;
  EXPECT_EQ(dump.substr(dump.size() - 3), "\n11") << dump;
  EXPECT_EQ(toHex({1, 2, 3}, 2), "01 02\n03");
}

} // namespace
} // namespace morpheus
