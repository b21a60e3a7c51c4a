// mapped_file: the huge-page copy of a mapped file (SPARSELENS_HUGE_WEIGHTS=1) holds the file's bytes,
// and release() on it puts the file's pages back without changing a byte (the plain mapping's contract).
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

#include "../../core/src/anon_buffer.h"
#include "../../core/src/mapped_file.h"

namespace {

std::vector<uint8_t> pattern(size_t n) {
    std::vector<uint8_t> v(n);
    uint64_t s = 0x9e3779b97f4a7c15ull;
    for (auto& b : v) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        b = static_cast<uint8_t>(s);
    }
    return v;
}

struct temp_file {
    std::string path = (std::filesystem::temp_directory_path() / ("sl_mapped_" + std::to_string(::getpid()))).string();
    explicit temp_file(const std::vector<uint8_t>& bytes) {
        std::ofstream(path, std::ios::binary).write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    }
    ~temp_file() { std::filesystem::remove(path); }
};

TEST(mapped_file, huge_page_copy_keeps_bytes_and_release_maps_the_file_back) {
    const std::vector<uint8_t> want = pattern((5u << 20) + 12345);  // not a multiple of 2 MiB or 4 KiB
    const temp_file tf(want);
    for (const char* setting : {"0", "1"}) {
        ::setenv("SPARSELENS_HUGE_WEIGHTS", setting, 1);
        auto f = sl::mapped_file::open(tf.path, true, /*weights=*/true);
        ASSERT_TRUE(f.ok()) << f.message();
        const auto& m = *f.value();
        ASSERT_EQ(m.size, want.size());
        EXPECT_EQ(m.on_huge_pages(), sl::huge_page_weights_wanted(m.size));
        if (setting[0] == '0') {
            EXPECT_FALSE(m.on_huge_pages());
        }
        EXPECT_TRUE(m.mmapped);
        EXPECT_EQ(0, std::memcmp(m.data, want.data(), want.size())) << setting;
        m.release(m.data + 100000, 3u << 20);  // unaligned both ends: only whole pages inside go back
        m.release(m.data + want.size() - 5000, 5000);
        EXPECT_EQ(0, std::memcmp(m.data, want.data(), want.size())) << setting << " after release";
    }
    // Header/vocabulary readers never copy.
    ::setenv("SPARSELENS_HUGE_WEIGHTS", "1", 1);
    auto plain = sl::mapped_file::open(tf.path, true);
    ASSERT_TRUE(plain.ok()) << plain.message();
    EXPECT_FALSE(plain.value()->on_huge_pages());
    ::unsetenv("SPARSELENS_HUGE_WEIGHTS");
}

TEST(mapped_file, huge_page_copy_reports_progress_and_can_be_cancelled) {
    ::setenv("SPARSELENS_HUGE_WEIGHTS", "1", 1);
    const std::vector<uint8_t> want = pattern((130u << 20) + 77);  // three 64 MiB steps
    const temp_file tf(want);
    if (!sl::huge_page_weights_wanted(want.size())) {
        ::unsetenv("SPARSELENS_HUGE_WEIGHTS");
        GTEST_SKIP() << "transparent huge pages are off here: no copy to report";
    }
    std::vector<float> seen;
    const sl::progress_fn watch = [&](float f) {
        seen.push_back(f);
        return true;
    };
    auto f = sl::mapped_file::open(tf.path, true, /*weights=*/true, &watch);
    ASSERT_TRUE(f.ok()) << f.message();
    EXPECT_TRUE(f.value()->on_huge_pages());
    EXPECT_EQ(0, std::memcmp(f.value()->data, want.data(), want.size()));
    ASSERT_EQ(seen.size(), 3u);
    for (size_t i = 1; i < seen.size(); ++i) EXPECT_LT(seen[i - 1], seen[i]);
    EXPECT_LT(seen.back(), 1.0f);

    const sl::progress_fn stop = [](float fraction) { return fraction < 0.4f; };
    auto c = sl::mapped_file::open(tf.path, true, /*weights=*/true, &stop);
    ASSERT_FALSE(c.ok());
    EXPECT_TRUE(c.cancelled());
    EXPECT_NE(c.message().find(tf.path), std::string::npos) << c.message();
    ::unsetenv("SPARSELENS_HUGE_WEIGHTS");
}

// The fused MLP's compact buffer: grows keeping its bytes (new bytes zero, from small pages to a
// huge-page-sized mapping and within one), moves, and unmaps on reset.
TEST(anon_buffer, grows_keeping_bytes_and_resets) {
    sl::anon_buffer b;
    EXPECT_EQ(b.size(), 0u);
    EXPECT_EQ(b.data(), nullptr);
    b.grow(1000);
    ASSERT_NE(b.data(), nullptr);
    EXPECT_EQ(b.size(), 1000u);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 4096, 0u);
    for (uint64_t i = 0; i < 1000; ++i) ASSERT_EQ(b.data()[i], 0) << i;
    const std::vector<uint8_t> p = pattern(1000);
    std::memcpy(b.data(), p.data(), p.size());
    b.grow(3000);  // within the mapped page: same address
    EXPECT_EQ(b.size(), 3000u);
    EXPECT_EQ(0, std::memcmp(b.data(), p.data(), p.size()));
    for (uint64_t i = 1000; i < 3000; ++i) ASSERT_EQ(b.data()[i], 0) << i;
    const uint64_t big = (5u << 20) + 123;  // a new mapping, 2 MiB-aligned for huge pages
    b.grow(big);
    EXPECT_EQ(b.size(), big);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % (2u << 20), 0u);
    EXPECT_EQ(0, std::memcmp(b.data(), p.data(), p.size()));
    for (uint64_t i = 1000; i < big; i += 4093) ASSERT_EQ(b.data()[i], 0) << i;
    b.data()[big - 1] = 7;
    b.grow(10);  // never shrinks
    EXPECT_EQ(b.size(), big);

    sl::anon_buffer moved(std::move(b));
    EXPECT_EQ(b.size(), 0u);
    EXPECT_EQ(b.data(), nullptr);
    EXPECT_EQ(moved.size(), big);
    EXPECT_EQ(moved.data()[big - 1], 7);
    sl::anon_buffer other;
    other.grow(100);
    other = std::move(moved);
    EXPECT_EQ(other.size(), big);
    EXPECT_EQ(0, std::memcmp(other.data(), p.data(), p.size()));
    other.reset();
    EXPECT_EQ(other.size(), 0u);
    EXPECT_EQ(other.data(), nullptr);
    other.grow(64);  // usable again after a reset, zeroed
    EXPECT_EQ(other.data()[0], 0);
}

}  // namespace
