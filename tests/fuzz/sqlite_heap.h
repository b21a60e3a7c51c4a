// SQLite heap for the session fuzz target: size-class free lists over an mmap'd arena, installed with
// SQLITE_CONFIG_MALLOC before SQLite initialises. Why: SQLite makes hundreds of small allocations per
// opened database and, through ASan's allocator (quarantine, stack depot), they cost most of each
// execution. SQLite is not the code under test; our code's own allocations still go through ASan. The
// heap counts live blocks, so the harness can check that every statement and connection an input opened
// was released (a leak LeakSanitizer no longer sees).
#pragma once

#include <sqlite3.h>
#include <sys/mman.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace sl::fuzz {

class sqlite_heap {
public:
    // Installs the heap (single-threaded, no memory statistics: the fuzzer calls SQLite from one thread).
    static void install() {
        static sqlite3_mem_methods methods{x_malloc, x_free, x_realloc, x_size, x_roundup, x_init, x_shutdown, nullptr};
        if (sqlite3_config(SQLITE_CONFIG_SINGLETHREAD) != SQLITE_OK ||
            sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) != SQLITE_OK ||
            sqlite3_config(SQLITE_CONFIG_MALLOC, &methods) != SQLITE_OK || sqlite3_initialize() != SQLITE_OK)
            std::abort();  // the harness's environment, not an input
    }
    // Blocks SQLite holds right now.
    static int64_t live_blocks() { return live; }

private:
    // Classes 16 B << k for k < n_classes; larger blocks are mmap'd one by one. The header keeps the
    // class (or the mapping's size) and pads the payload to 16 bytes.
    static constexpr int n_classes = 17;  // up to 1 MiB
    static constexpr size_t header = 16;
    static constexpr size_t chunk = size_t{8} << 20;
    struct node {
        node* next;
    };
    static inline node* free_list[n_classes] = {};
    static inline char* cursor = nullptr;
    static inline size_t left = 0;
    static inline int64_t live = 0;

    static int class_of(size_t n) {
        int k = 0;
        while ((size_t{16} << k) < n) ++k;
        return k;
    }
    static void* map(size_t n) {
        void* p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) std::abort();
        return p;
    }
    static void* x_malloc(int n) {
        if (n <= 0) return nullptr;
        const size_t want = static_cast<size_t>(n);
        const int k = class_of(want);
        char* block;
        if (k >= n_classes) {
            const size_t total = (want + header + 4095) & ~size_t{4095};
            block = static_cast<char*>(map(total));
            std::memcpy(block, &total, sizeof total);
        } else if (free_list[k]) {
            block = reinterpret_cast<char*>(free_list[k]) - header;
            free_list[k] = free_list[k]->next;
        } else {
            const size_t total = header + (size_t{16} << k);
            if (left < total) {
                cursor = static_cast<char*>(map(chunk));
                left = chunk;
            }
            block = cursor;
            cursor += total;
            left -= total;
            const size_t tag = static_cast<size_t>(k);
            std::memcpy(block, &tag, sizeof tag);
        }
        ++live;
        return block + header;
    }
    static size_t stored(void* p) {
        size_t v;
        std::memcpy(&v, static_cast<char*>(p) - header, sizeof v);
        return v;
    }
    static int x_size(void* p) {
        const size_t v = stored(p);
        return static_cast<int>(v < n_classes ? size_t{16} << v : v - header);
    }
    static void x_free(void* p) {
        if (!p) return;
        --live;
        const size_t v = stored(p);
        if (v >= n_classes) {
            munmap(static_cast<char*>(p) - header, v);
            return;
        }
        node* f = static_cast<node*>(p);
        f->next = free_list[v];
        free_list[v] = f;
    }
    static void* x_realloc(void* p, int n) {
        if (!p) return x_malloc(n);
        if (n <= x_size(p)) return p;
        void* q = x_malloc(n);
        if (q) {
            std::memcpy(q, p, static_cast<size_t>(x_size(p)));
            x_free(p);
        }
        return q;
    }
    static int x_roundup(int n) {
        const int k = class_of(static_cast<size_t>(n));
        return k < n_classes ? static_cast<int>(size_t{16} << k) : n;
    }
    static int x_init(void*) { return SQLITE_OK; }
    static void x_shutdown(void*) {}
};

}  // namespace sl::fuzz
