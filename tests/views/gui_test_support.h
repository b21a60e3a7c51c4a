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
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <string>
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
                                       const_cast<char*>("-screen 0 1600x1000x24 -noreset"), self};
            for (char** a = argv + 1; *a; ++a) args.push_back(*a);
            args.push_back(nullptr);
            execvp("xvfb-run", args.data());  // only returns on failure
        }
    }
    qputenv("QT_QPA_PLATFORM", "offscreen");
}

// Wall-clock gaps of the GUI event loop: a 10 ms timer whose largest interval shows any freeze. On a loaded
// machine a runnable GUI thread also waits for a CPU; the kernel counts that wait per thread
// (/proc/thread-self/schedstat, second field), and it is the scheduler's, not a blocked event loop.
// So is the wait of software OpenGL's rasterizer threads (Mesa llvmpipe, under xvfb): the window holds a
// QOpenGLWidget, so every repaint of any widget ends in QRhi::endFrame, where the GUI thread sleeps on a
// condition variable until those threads, themselves waiting for a CPU, finish the frame (measured with
// perf sched_switch stacks in tst_main_window_session). stall_ms() is the largest gap minus the run-queue
// wait inside it of the GUI thread and of the slowest rasterizer thread: a GUI thread that computed or
// waited on one of our locks for 300 ms scores ~300 however loaded the machine, one that only waited for
// a CPU, directly or through the rasterizer, scores ~0.
class event_loop_probe : public QObject {
public:
    event_loop_probe() {
        m_timer.setInterval(10);
        m_timer.setTimerType(Qt::PreciseTimer);
        QObject::connect(&m_timer, &QTimer::timeout, this, [this] {
            const qint64 now = m_clock.elapsed();
            const qint64 wait = run_queue_wait_ms("/proc/thread-self/schedstat");
            const qint64 render = render_wait_delta_ms();
            if (m_last >= 0) {
                m_max_gap = std::max(m_max_gap, now - m_last);
                m_stall = std::max(m_stall, (now - m_last) - (wait - m_last_wait) - render);
            }
            m_last = now;
            m_last_wait = wait;
        });
    }
    void start() {
        m_clock.start();
        m_last = -1;
        m_max_gap = 0;
        m_stall = 0;
        render_wait_delta_ms();
        m_timer.start();
    }
    qint64 max_gap_ms() const { return m_max_gap; }
    qint64 stall_ms() const { return m_stall; }

private:
    // Time a thread has spent runnable but not running, in ms (0 where the kernel does not count it).
    static qint64 run_queue_wait_ms(const std::string& schedstat) {
        std::FILE* f = std::fopen(schedstat.c_str(), "r");
        if (!f) return 0;
        unsigned long long cpu = 0, wait = 0;
        const int n = std::fscanf(f, "%llu %llu", &cpu, &wait);
        std::fclose(f);
        return n == 2 ? static_cast<qint64>(wait / 1000000ull) : 0;
    }
    // The largest growth of a software-GL rasterizer thread's run-queue wait since the last call.
    qint64 render_wait_delta_ms() {
        qint64 most = 0;
        std::error_code ec;
        for (const auto& task : std::filesystem::directory_iterator("/proc/self/task", ec)) {
            std::FILE* f = std::fopen((task.path() / "comm").c_str(), "r");
            if (!f) continue;
            char comm[32] = {};
            const bool named = std::fgets(comm, sizeof comm, f) != nullptr;
            std::fclose(f);
            if (!named || std::string(comm).rfind("llvmpipe", 0) != 0) continue;
            const qint64 wait = run_queue_wait_ms((task.path() / "schedstat").string());
            qint64& last = m_render_wait[task.path().filename().string()];
            most = std::max(most, wait - last);
            last = wait;
        }
        return most;
    }
    QTimer m_timer;
    QElapsedTimer m_clock;
    qint64 m_last = -1, m_last_wait = 0, m_max_gap = 0, m_stall = 0;
    std::map<std::string, qint64> m_render_wait;  // per rasterizer thread id: its run-queue wait so far
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
