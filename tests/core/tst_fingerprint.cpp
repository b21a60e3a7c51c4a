// SHA-256 against the FIPS 180-2 test vectors, and the file path against the in-memory one.
#include <gtest/gtest.h>

#include <span>
#include <string>
#include <vector>

#include "sparselens/core/fingerprint.h"
#include "test_support.h"

TEST(Fingerprint, FipsVectors) {
    EXPECT_EQ(sl::sha256_hex(std::string_view("abc")),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(sl::sha256_hex(std::string_view("")),
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(sl::sha256_hex(std::string_view("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")),
              "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

TEST(Fingerprint, FileMatchesBytesAcrossBlocks) {
    std::vector<uint8_t> big(3u << 20);
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 131 + (i >> 9));
    const std::string path = sl::test::write_temp("fingerprint.bin", big);
    int calls = 0;
    auto h = sl::sha256_file(path, [&](float) { ++calls; return true; });
    ASSERT_TRUE(h.ok()) << h.message();
    EXPECT_EQ(*h, sl::sha256_hex(std::span<const uint8_t>(big)));
    EXPECT_GE(calls, 2);
    auto cancelled = sl::sha256_file(path, [](float) { return false; });
    ASSERT_FALSE(cancelled.ok());
    EXPECT_TRUE(cancelled.cancelled());
    auto missing = sl::sha256_file(path + ".nope");
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.message().find(".nope"), std::string::npos);
}
