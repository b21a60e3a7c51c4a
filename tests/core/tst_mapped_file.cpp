// mapped_file: the huge-page copy of a mapped file (SPARSELENS_HUGE_WEIGHTS=1) holds the file's bytes,
// and release() on it puts the file's pages back without changing a byte (the plain mapping's contract).
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include <gtest/gtest.h>

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

}  // namespace
