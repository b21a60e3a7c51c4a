// Shared main() for the QtTest GUI tests: picks the Qt platform, isolates QSettings, skips without ../shared.
#pragma once

#include <QApplication>
#include <QElapsedTimer>
#include <QStandardPaths>
#include <QTimer>
#include <QtTest>

#include <limits.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "test_support.h"

namespace sl::test {

// True when DISPLAY names an X server this process can reach (a local one needs its socket).
inline bool x11_reachable() {
    const std::string display = qEnvironmentVariable("DISPLAY").toStdString();
    if (display.empty()) return false;
    if (display[0] != ':') return true;  // host:display (e.g. ssh forwarding): trust it
    const size_t dot = display.find('.');
    const std::string number = display.substr(1, dot == std::string::npos ? std::string::npos : dot - 1);
    return std::filesystem::exists("/tmp/.X11-unix/X" + number);
}

// The platform plugin: an explicit QT_QPA_PLATFORM always wins; xcb when an X server is reachable
// (scripts/test.sh runs ctest under xvfb-run); without one the test re-runs itself under its own
// xvfb-run when that exists, because Qt's offscreen platform has no OpenGL here and QOpenGLWidget
// (the canvases) crashes on it; offscreen is the last resort.
inline void choose_qpa_platform(char** argv) {
    if (qEnvironmentVariableIsSet("QT_QPA_PLATFORM")) return;
    if (x11_reachable()) {
        qputenv("QT_QPA_PLATFORM", "xcb");
        return;
    }
    if (!qEnvironmentVariableIsSet("SL_TEST_UNDER_XVFB") && std::system("command -v xvfb-run >/dev/null 2>&1") == 0) {
        char self[PATH_MAX] = {};
        const ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
        if (n > 0) {
            setenv("SL_TEST_UNDER_XVFB", "1", 1);
            std::vector<char*> args = {const_cast<char*>("xvfb-run"), const_cast<char*>("-a"), const_cast<char*>("-s"),
                                       const_cast<char*>("-screen 0 1600x1000x24"), self};
            for (char** a = argv + 1; *a; ++a) args.push_back(*a);
            args.push_back(nullptr);
            execvp("xvfb-run", args.data());  // only returns on failure
        }
    }
    qputenv("QT_QPA_PLATFORM", "offscreen");
}

// Wall-clock gaps of the GUI event loop: a 10 ms timer whose largest interval shows any freeze. A
// baseline thread of the same process wakes every 5 ms meanwhile: on a loaded machine the whole process
// is descheduled at times, and a GUI gap during which the baseline did not run either is the scheduler's,
// not a blocked event loop. stall_ms() is the largest GUI gap minus the longest baseline silence inside it:
// a GUI thread blocked for 300 ms while the baseline kept running scores ~300, a process that did not run
// for 300 ms scores ~0.
class event_loop_probe : public QObject {
public:
    event_loop_probe() {
        m_timer.setInterval(10);
        m_timer.setTimerType(Qt::PreciseTimer);
        QObject::connect(&m_timer, &QTimer::timeout, this, [this] {
            const qint64 now = now_ms();
            if (m_last >= 0) {
                m_max_gap = std::max(m_max_gap, now - m_last);
                if (now - m_last > 40) m_gaps.emplace_back(m_last, now);
            }
            m_last = now;
        });
    }
    ~event_loop_probe() override { stop_baseline(); }
    void start() {
        stop_baseline();
        m_last = -1;
        m_max_gap = 0;
        m_gaps.clear();
        m_wakeups.clear();
        m_run = true;
        m_baseline = std::thread([this] {
            while (m_run) {
                {
                    std::lock_guard<std::mutex> lock(m_mutex);
                    m_wakeups.push_back(now_ms());
                }
                std::this_thread::sleep_for(std::chrono::milliseconds(5));
            }
        });
        m_timer.start();
    }
    qint64 max_gap_ms() const { return m_max_gap; }
    qint64 stall_ms() {
        std::vector<qint64> w;
        {
            std::lock_guard<std::mutex> lock(m_mutex);
            w = m_wakeups;
        }
        qint64 worst = 0;
        for (const auto& [a, b] : m_gaps) {
            // Longest stretch of [a, b] without a baseline wake-up.
            qint64 prev = a, silence = 0;
            for (auto it = std::upper_bound(w.begin(), w.end(), a); it != w.end() && *it < b; ++it) {
                silence = std::max(silence, *it - prev);
                prev = *it;
            }
            silence = std::max(silence, b - prev);
            worst = std::max(worst, (b - a) - silence);
        }
        return worst;
    }

private:
    static qint64 now_ms() {
        using namespace std::chrono;
        return duration_cast<milliseconds>(steady_clock::now().time_since_epoch()).count();
    }
    void stop_baseline() {
        m_run = false;
        if (m_baseline.joinable()) m_baseline.join();
    }
    QTimer m_timer;
    qint64 m_last = -1, m_max_gap = 0;
    std::vector<std::pair<qint64, qint64>> m_gaps;  // GUI gaps over 40 ms: [previous tick, tick]
    std::thread m_baseline;
    std::atomic<bool> m_run{false};
    std::mutex m_mutex;
    std::vector<qint64> m_wakeups;  // ascending
};

}  // namespace sl::test

// main() of a GUI test; with needs_shared the executable exits 77 (skipped) without ../shared.
#define SL_GUI_TEST_MAIN(TestClass, needs_shared)                                           \
    int main(int argc, char** argv) {                                                       \
        if ((needs_shared) && !sl::test::have_shared()) {                                   \
            std::printf("SKIP: fixtures not found at %s\n", sl::test::shared_dir().c_str()); \
            return 77;                                                                      \
        }                                                                                   \
        sl::test::choose_qpa_platform(argv);                                                \
        QStandardPaths::setTestModeEnabled(true); /* QSettings go to a test location */     \
        QApplication app(argc, argv);                                                       \
        app.setOrganizationName(QStringLiteral("SparseLensTest"));                          \
        app.setApplicationName(QStringLiteral(#TestClass));                                 \
        TestClass t;                                                                        \
        return QTest::qExec(&t, argc, argv);                                                \
    }
