// HeatmapCanvas rendered for real (xcb under xvfb-run, or offscreen): pixel colours of every mode, the
// column permutation, tiling, the prompt boundary, hover mapping, zoom anchoring, refused snapshots,
// the ImGui overlay, and the frame time at 2,048 x 14,336. Without a GL context the test fails.
#include "sparselens/views/colormaps.h"
#include "sparselens/views/heatmap_canvas.h"

#include <QElapsedTimer>
#include <QSignalSpy>

#include <cmath>
#include <cstdlib>
#include <random>

#include "gui_test_support.h"

using namespace sl::views;

namespace {

// rows x cols, value (r + 1) * (c + 1) / 24 with alternating signs: rows differ in magnitude, so the
// absolute and the relative (row-normalised) modes give different pictures.
std::shared_ptr<activation_snapshot> small_matrix(int rows = 4, int cols = 6, int n_prompt = 2) {
    auto s = std::make_shared<activation_snapshot>();
    s->generation = 1;
    s->layer = 0;
    s->where = sl::probe::glu;
    s->n_tokens = rows;
    s->n_prompt = n_prompt;
    s->width = cols;
    for (int r = 0; r < rows; ++r)
        for (int c = 0; c < cols; ++c) s->values.push_back(((r + c) % 2 ? -1.0f : 1.0f) * (r + 1) * (c + 1) / 24.0f);
    return s;
}

bool near(QColor a, QColor b, int tol = 3) {
    return std::abs(a.red() - b.red()) <= tol && std::abs(a.green() - b.green()) <= tol && std::abs(a.blue() - b.blue()) <= tol;
}

QString str(QColor c) { return QStringLiteral("(%1,%2,%3)").arg(c.red()).arg(c.green()).arg(c.blue()); }

}  // namespace

class TestHeatmapCanvas : public QObject {
    Q_OBJECT
    HeatmapCanvas* m_canvas = nullptr;

    QImage grab() {
        QImage img = m_canvas->grabFramebuffer();
        if (img.format() != QImage::Format_RGB32) img = img.convertToFormat(QImage::Format_RGB32);
        return img;
    }
    QColor pixelAtCell(const QImage& img, int token, int col) {
        const QPointF p = m_canvas->cellCenter(token, col) * m_canvas->devicePixelRatioF();
        return img.pixelColor(static_cast<int>(p.x()), static_cast<int>(p.y()));
    }

private slots:
    void initTestCase() {
        QString why;
        if (!HeatmapCanvas::openGLAvailable(&why))  // fail, never skip: the canvas is what this test is for
            QFAIL(qPrintable(QStringLiteral("no usable OpenGL (%1); run under xvfb-run -a (Mesa llvmpipe)").arg(why)));
        m_canvas = new HeatmapCanvas;
        m_canvas->resize(240, 160);
        m_canvas->show();
        QVERIFY(QTest::qWaitForWindowExposed(m_canvas));
        m_canvas->grabFramebuffer();  // forces initializeGL
        qInfo("QPA platform: %s; GL: %s", qPrintable(QGuiApplication::platformName()), qPrintable(m_canvas->glInfo()));
        if (!m_canvas->glReady())
            QFAIL(qPrintable(QStringLiteral("no usable OpenGL context: %1").arg(m_canvas->glFailure())));
        m_canvas->setOverlayVisible(false);  // pixel tests below must not hit the ImGui window
    }
    void cleanupTestCase() { delete m_canvas; }  // null-safe after a failed initTestCase

    void init() {
        m_canvas->setSnapshot(small_matrix());
        m_canvas->setColumnPermutation({});
        m_canvas->setMode(heatmap_mode::absolute);
        m_canvas->setColormap(colormap::viridis);
        m_canvas->setLogScale(false);
        m_canvas->setScaleMax(1.0f);
        m_canvas->setHighlightedToken(-1);
        m_canvas->setMaxTileSideForTesting(0);
        m_canvas->resetView();
    }

    void absoluteLinearEveryCell() {
        const QImage img = grab();
        const auto& v = m_canvas->snapshot()->values;
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 6; ++c) {
                const QColor want = colormap_color(colormap::viridis, std::fabs(v[r * 6 + c]));
                const QColor got = pixelAtCell(img, r, c);
                QVERIFY2(near(got, want), qPrintable(QStringLiteral("cell %1,%2: %3 vs %4").arg(r).arg(c).arg(str(got), str(want))));
            }
        QCOMPARE(m_canvas->glErrorCount(), 0);
    }

    void absoluteLogAndColormap() {
        m_canvas->setLogScale(true);
        m_canvas->setLogDecades(2.0f);
        m_canvas->setColormap(colormap::magma);
        const QImage img = grab();
        const auto& v = m_canvas->snapshot()->values;
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 6; ++c) {
                const float t = std::clamp(std::log10(std::fabs(v[r * 6 + c])) / 2.0f + 1.0f, 0.0f, 1.0f);
                QVERIFY2(near(pixelAtCell(img, r, c), colormap_color(colormap::magma, t)), qPrintable(str(pixelAtCell(img, r, c))));
            }
        QVERIFY(std::fabs(m_canvas->scaleMin() - 0.01f) < 1e-6f);
    }

    void relativeNormalisesRows() {
        m_canvas->setMode(heatmap_mode::relative);
        m_canvas->setAutoScale(true);
        QCOMPARE(m_canvas->scaleMax(), 1.0f);
        const QImage img = grab();
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 6; ++c)  // |v| / row max = (c + 1) / 6 in every row
                QVERIFY(near(pixelAtCell(img, r, c), colormap_color(colormap::viridis, (c + 1) / 6.0f)));
        // ...which the absolute mode does not give (rows differ by their magnitude).
        m_canvas->setMode(heatmap_mode::absolute);
        QVERIFY(!near(pixelAtCell(grab(), 0, 5), colormap_color(colormap::viridis, 1.0f), 20));
    }

    void maskOverlayShowsSkippedEntries() {
        auto s = small_matrix();
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 6; ++c) s->kept.push_back((r + c) % 3 != 0);
        m_canvas->setSnapshot(s);
        m_canvas->setScaleMax(1.0f);
        // Absolute mode ignores the mask.
        QVERIFY(near(pixelAtCell(grab(), 0, 0), colormap_color(colormap::viridis, s->values[0])));
        m_canvas->setMode(heatmap_mode::mask_overlay);
        const QImage img = grab();
        const QColor m = HeatmapCanvas::maskColor(), h = HeatmapCanvas::maskHatchColor();
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 6; ++c) {
                const QColor got = pixelAtCell(img, r, c);
                if ((r + c) % 3 != 0) {
                    QVERIFY(near(got, colormap_color(colormap::viridis, std::fabs(s->values[r * 6 + c]))));
                } else {
                    QVERIFY2(near(got, m, 1) || near(got, h, 1), qPrintable(str(got)));
                    // Hatched: both colours appear inside the cell.
                    const QPointF p = m_canvas->cellCenter(r, c);
                    bool saw_m = false, saw_h = false;
                    for (int dy = -5; dy <= 5; ++dy)
                        for (int dx = -5; dx <= 5; ++dx) {
                            const QColor q = img.pixelColor(static_cast<int>(p.x()) + dx, static_cast<int>(p.y()) + dy);
                            saw_m |= near(q, m, 1);
                            saw_h |= near(q, h, 1);
                        }
                    QVERIFY(saw_m && saw_h);
                }
            }
    }

    void columnPermutation() {
        QVERIFY(m_canvas->setColumnPermutation({5, 4, 3, 2, 1, 0}));
        const QImage img = grab();
        const auto& v = m_canvas->snapshot()->values;
        for (int r = 0; r < 4; ++r)
            for (int c = 0; c < 6; ++c)
                QVERIFY(near(pixelAtCell(img, r, c), colormap_color(colormap::viridis, std::fabs(v[r * 6 + (5 - c)]))));
        // Not a permutation, or the wrong length: refused, index order again.
        QVERIFY(!m_canvas->setColumnPermutation({0, 0, 1, 2, 3, 4}));
        QVERIFY(!m_canvas->hasColumnPermutation());
        QVERIFY(!m_canvas->setColumnPermutation({0, 1, 2}));
        QVERIFY(!m_canvas->setColumnPermutation({0, 1, 2, 3, 4, 99}));
        QVERIFY(near(pixelAtCell(grab(), 0, 0), colormap_color(colormap::viridis, std::fabs(v[0]))));
    }

    void tiledUploadMatchesSingleTexture() {
        auto s = std::make_shared<activation_snapshot>();
        s->n_tokens = 9;
        s->width = 13;
        s->n_prompt = 3;
        std::mt19937 rng(7);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        for (int i = 0; i < 9 * 13; ++i) s->values.push_back(u(rng));
        for (int i = 0; i < 9 * 13; ++i) s->kept.push_back(rng() % 2);
        m_canvas->setSnapshot(s);
        m_canvas->setMode(heatmap_mode::mask_overlay);
        std::vector<int32_t> perm(13);
        for (int i = 0; i < 13; ++i) perm[i] = (i * 5) % 13;
        QVERIFY(m_canvas->setColumnPermutation(perm));
        const QImage whole = grab();
        QCOMPARE(m_canvas->tiling().layers(), 1);
        m_canvas->setMaxTileSideForTesting(4);  // 13 columns -> 4 tiles of 4, 9 rows -> 3 tiles of 3
        const QImage tiled = grab();
        QCOMPARE(m_canvas->tiling().tiles_x, 4);
        QCOMPARE(m_canvas->tiling().tiles_y, 3);
        QCOMPARE(m_canvas->tiling().tile_w, 4);
        QCOMPARE(m_canvas->tiling().tile_h, 3);
        QVERIFY(whole == tiled);
        QCOMPARE(m_canvas->glErrorCount(), 0);
    }

    void tilingArithmetic() {
        const heatmap_tiling t = heatmap_tiling_for(2048, 40000, 16384);
        QCOMPARE(t.tiles_x, 3);
        QCOMPARE(t.tile_w, 13334);
        QCOMPARE(t.tiles_y, 1);
        QCOMPARE(t.tile_h, 2048);
        QCOMPARE(heatmap_tiling_for(0, 5, 16).layers(), 0);
        QCOMPARE(heatmap_tiling_for(5, 5, 0).layers(), 0);
    }

    void promptBoundaryAndHighlight() {
        const QImage img = grab();
        const int y = static_cast<int>(std::lround(2 * m_canvas->viewScale().y()));  // n_prompt = 2
        const QColor line = HeatmapCanvas::boundaryColor();
        for (int x : {5, 100, 230}) {
            QVERIFY2(near(img.pixelColor(x, y - 1), line, 1), qPrintable(str(img.pixelColor(x, y - 1))));
            QVERIFY(near(img.pixelColor(x, y), line, 1));
            QVERIFY(!near(img.pixelColor(x, y - 4), line, 40));
            QVERIFY(!near(img.pixelColor(x, y + 4), line, 40));
        }
        // No line when there is no generation part.
        m_canvas->setSnapshot(small_matrix(4, 6, 4));
        QVERIFY(!near(grab().pixelColor(100, y), line, 40));
        // The highlighted token row is brightened, the others are not.
        m_canvas->setSnapshot(small_matrix());
        const QColor before = pixelAtCell(grab(), 3, 2);
        m_canvas->setHighlightedToken(3);
        const QImage hl = grab();
        QVERIFY(pixelAtCell(hl, 3, 2).lightness() > before.lightness() + 10);
        QVERIFY(near(pixelAtCell(hl, 1, 2), pixelAtCell(img, 1, 2), 0));
    }

    void hoverMapsPixelToTokenAndNeuron() {
        QVERIFY(m_canvas->setColumnPermutation({2, 0, 1, 5, 4, 3}));
        QSignalSpy cells(m_canvas, &HeatmapCanvas::cellHovered);
        QSignalSpy tokens(m_canvas, &HeatmapCanvas::tokenHovered);
        const QPointF p = m_canvas->cellCenter(3, 1) + QPointF(7, -6);  // inside the cell, off centre
        QMouseEvent move(QEvent::MouseMove, p, m_canvas->mapToGlobal(p), Qt::NoButton, Qt::NoButton, Qt::NoModifier);
        QCoreApplication::sendEvent(m_canvas, &move);
        QCOMPARE(cells.count(), 1);
        QCOMPARE(cells.at(0).at(0).toInt(), 3);
        QCOMPARE(cells.at(0).at(1).toInt(), 0);  // display column 1 shows neuron 0
        QCOMPARE(cells.at(0).at(2).toFloat(), m_canvas->snapshot()->values[3 * 6 + 0]);
        QCOMPARE(tokens.count(), 1);
        QCOMPARE(tokens.at(0).at(0).toInt(), 3);
        // Off the matrix: no cell.
        QVERIFY(!m_canvas->cellAt(QPointF(-3, 10)).has_value());
        QVERIFY(!m_canvas->cellAt(QPointF(10, 500)).has_value());
    }

    void zoomIsAnchoredAtTheCursor() {
        const QPointF anchor = m_canvas->cellCenter(2, 4) + QPointF(3, 3);
        const auto before = m_canvas->cellAt(anchor);
        QVERIFY(before.has_value());
        QWheelEvent wheel(anchor, m_canvas->mapToGlobal(anchor), QPoint(), QPoint(0, 240), Qt::NoButton, Qt::NoModifier,
                          Qt::NoScrollPhase, false);
        QCoreApplication::sendEvent(m_canvas, &wheel);
        QVERIFY(m_canvas->viewScale().x() > 40.0 * 1.3);
        QVERIFY(m_canvas->isInteracting());  // progressive: a coarse frame now, the full one after the input settles
        grab();
        QTRY_VERIFY(!m_canvas->isInteracting());
        const auto after = m_canvas->cellAt(anchor);
        QVERIFY(after.has_value());
        QCOMPARE(after->token, before->token);
        QCOMPARE(after->column, before->column);
        QVERIFY(near(grab().pixelColor(static_cast<int>(anchor.x()), static_cast<int>(anchor.y())),
                      colormap_color(colormap::viridis, std::fabs(before->value))));
        // Drag pans: the cell under the cursor follows the mouse.
        QTest::mousePress(m_canvas, Qt::LeftButton, Qt::NoModifier, anchor.toPoint());
        QMouseEvent move(QEvent::MouseMove, anchor + QPointF(-30, 0), m_canvas->mapToGlobal(anchor + QPointF(-30, 0)),
                         Qt::NoButton, Qt::LeftButton, Qt::NoModifier);
        QCoreApplication::sendEvent(m_canvas, &move);
        QTest::mouseRelease(m_canvas, Qt::LeftButton, Qt::NoModifier, (anchor + QPointF(-30, 0)).toPoint());
        const auto moved = m_canvas->cellAt(anchor + QPointF(-30, 0));
        QVERIFY(moved.has_value());
        QCOMPARE(moved->column, before->column);
        QTRY_VERIFY(!m_canvas->isInteracting());
    }

    void overviewKeepsIsolatedPeaksVisible() {
        auto s = std::make_shared<activation_snapshot>();
        s->n_tokens = 64;
        s->width = 4096;
        s->values.assign(64 * 4096, 0.0f);
        s->values[17 * 4096 + 3001] = 1.0f;  // one heavy hitter among 262,144 zeros
        m_canvas->setSnapshot(s);
        m_canvas->setScaleMax(1.0f);
        m_canvas->setMaxSamplesPerAxis(16);  // 4096 / 240 = 17 columns per pixel
        const QColor top = colormap_color(colormap::viridis, 1.0f);
        const auto count_peak = [&] {
            const QImage img = grab();
            int n = 0;
            for (int y = 0; y < img.height(); ++y)
                for (int x = 0; x < img.width(); ++x) n += near(img.pixelColor(x, y), top, 30);
            return n;
        };
        QVERIFY(count_peak() > 0);
        m_canvas->setMaxSamplesPerAxis(1);  // nearest sampling misses it
        QCOMPARE(count_peak(), 0);
        m_canvas->setMaxSamplesPerAxis(4);
    }

    void refusesMismatchedSnapshots() {
        auto bad = small_matrix();
        bad->values.pop_back();
        m_canvas->setSnapshot(bad);
        QVERIFY(m_canvas->snapshot() == nullptr);
        QVERIFY(!m_canvas->statusMessage().isEmpty());
        QVERIFY(!m_canvas->cellAt(QPointF(10, 10)).has_value());
        grab();
        auto neg = small_matrix();
        neg->n_tokens = -4;
        m_canvas->setSnapshot(neg);
        QVERIFY(m_canvas->snapshot() == nullptr);
        grab();
        auto badmask = small_matrix();
        badmask->kept = {1, 0, 1};
        m_canvas->setSnapshot(badmask);
        QVERIFY(m_canvas->snapshot() != nullptr);
        m_canvas->setMode(heatmap_mode::mask_overlay);
        QVERIFY(m_canvas->cellAt(m_canvas->cellCenter(0, 1))->kept);  // mask ignored: everything kept
        grab();
        auto nan = small_matrix();
        nan->values[0] = std::nanf("");
        nan->values[1] = INFINITY;
        m_canvas->setSnapshot(nan);
        const QImage img = grab();
        QVERIFY(near(pixelAtCell(img, 0, 0), HeatmapCanvas::invalidColor(), 1));
        QVERIFY(near(pixelAtCell(img, 0, 1), HeatmapCanvas::invalidColor(), 1));
        m_canvas->setSnapshot(nullptr);
        grab();
        QCOMPARE(m_canvas->glErrorCount(), 0);
    }

    void imguiOverlayRenders() {
        if (!HeatmapCanvas::hasImGuiOverlay()) QSKIP("built without SPARSELENS_WITH_IMGUI");
        m_canvas->setOverlayVisible(true);
        const QImage with = grab();
        QVERIFY2(m_canvas->overlayActive(), "the ImGui renderer did not initialise in this GL context");
        m_canvas->setOverlayVisible(false);
        const QImage without = grab();
        // Closed, the overlay is a small "View" button in the bottom-right corner; the top rows (the
        // prompt) are not covered.
        const QRect button = m_canvas->overlayButtonRect();
        const int w = m_canvas->width(), h = m_canvas->height();
        QVERIFY2(button.isValid() && button.right() >= w - 12 && button.bottom() >= h - 12,
                 qPrintable(QStringLiteral("%1,%2 %3x%4").arg(button.x()).arg(button.y()).arg(button.width()).arg(button.height())));
        QVERIFY(button.width() <= 100 && button.height() <= 40);
        int differing = 0;
        for (int y = button.top(); y <= button.bottom(); ++y)
            for (int x = button.left(); x <= button.right(); ++x) differing += with.pixel(x, y) != without.pixel(x, y);
        QVERIFY(differing > 100);
        int topLeft = 0;
        for (int y = 0; y < 30; ++y)
            for (int x = 0; x < 120; ++x) topLeft += with.pixel(x, y) != without.pixel(x, y);
        QCOMPARE(topLeft, 0);
        // Clicking the button opens the controls above it: a larger area changes.
        QVERIFY(!m_canvas->overlayOpen());
        m_canvas->setOverlayVisible(true);
        grab();
        const QPoint at = button.center() + QPoint(button.width() / 4, 0);  // on the "View" label
        QTest::mouseMove(m_canvas, at);
        QMouseEvent move(QEvent::MouseMove, QPointF(at), m_canvas->mapToGlobal(QPointF(at)), Qt::NoButton,
                         Qt::NoButton, Qt::NoModifier);
        QCoreApplication::sendEvent(m_canvas, &move);
        grab();
        QTest::mousePress(m_canvas, Qt::LeftButton, Qt::NoModifier, at);
        grab();
        QTest::mouseRelease(m_canvas, Qt::LeftButton, Qt::NoModifier, at);
        grab();
        const QImage open = grab();
        QVERIFY(m_canvas->overlayOpen());
        int changed = 0;
        for (int y = 10; y < button.top() - 4; ++y)
            for (int x = w - 150; x < w - 10; ++x) changed += open.pixel(x, y) != without.pixel(x, y);
        QVERIFY2(changed > 1000, qPrintable(QString::number(changed)));
        m_canvas->setOverlayVisible(false);
        QCOMPARE(m_canvas->glErrorCount(), 0);
    }

    // 2,048 tokens x 14,336 neurons (Llama-3-8B's hidden size): prints the frame times; asserts only
    // that it renders without GL errors.
    void largeMatrixFrameTime() {
        const int rows = 2048, cols = 14336;
        auto s = std::make_shared<activation_snapshot>();
        s->n_tokens = rows;
        s->n_prompt = 1024;
        s->width = cols;
        s->values.resize(static_cast<size_t>(rows) * cols);
        s->kept.resize(s->values.size());
        uint32_t x = 12345;
        for (size_t i = 0; i < s->values.size(); ++i) {
            x = x * 1664525u + 1013904223u;
            s->values[i] = (static_cast<float>(x >> 8) / 16777216.0f - 0.5f) * ((x & 0xFF) == 0 ? 40.0f : 1.0f);
            s->kept[i] = (x >> 3) & 1;
        }
        HeatmapCanvas big;
        big.resize(1000, 600);
        big.show();
        QVERIFY(QTest::qWaitForWindowExposed(&big));
        big.grabFramebuffer();
        QVERIFY(big.glReady());
        QElapsedTimer t;
        t.start();
        big.setSnapshot(s);
        const double set_ms = t.nsecsElapsed() / 1e6;
        t.restart();
        const QImage first = big.grabFramebuffer();
        const double first_ms = t.nsecsElapsed() / 1e6;
        QVERIFY(!first.isNull());
        big.setFrameTiming(true);
        const auto redraws = [&](const char* what, int n, auto&& change) {
            QElapsedTimer tt;
            double heat = 0, comp = 0;
            tt.start();
            for (int i = 0; i < n; ++i) {
                change(i);
                big.grabFramebuffer();
                heat += big.lastHeatmapPassMs();
                comp += big.lastCompositeMs();
            }
            qInfo("  %-46s %7.1f ms/frame (GL: heatmap pass %6.1f, composite %5.1f)", what, tt.nsecsElapsed() / 1e6 / n,
                  heat / n, comp / n);
        };
        qInfo("2048 x 14336 heatmap in a 1000 x 600 canvas (%s):", qPrintable(big.glInfo()));
        qInfo("  %-46s %7.1f ms", "setSnapshot (row max, p99.9 on the CPU)", set_ms);
        qInfo("  %-46s %7.1f ms", "first frame (upload 117 MB + 29 MB mask)", first_ms);
        qInfo("  wall time per grabFramebuffer() (render + read-back):");
        redraws("zoom steps, absolute (fit -> 4x -> fit)", 6, [&](int i) {
            big.zoomAt(QPointF(500, 300), i < 3 ? 1.6 : 1 / 1.6, i < 3 ? 1.6 : 1 / 1.6);
        });
        big.resetView();
        redraws("overview, absolute, 4x4 samples per pixel", 3, [&](int) { big.setLogScale(!big.logScale()); });
        big.setMode(heatmap_mode::relative);
        redraws("overview, relative", 3, [&](int) { big.setLogScale(!big.logScale()); });
        big.setMode(heatmap_mode::mask_overlay);
        redraws("overview, mask overlay", 3, [&](int) { big.setLogScale(!big.logScale()); });
        std::vector<int32_t> perm(cols);
        for (int i = 0; i < cols; ++i) perm[static_cast<size_t>(i)] = (i * 7919) % cols;
        QVERIFY(big.setColumnPermutation(perm));
        redraws("overview, mask overlay, scattered column order", 3, [&](int) { big.setLogScale(!big.logScale()); });
        redraws("column order switch (permutation upload)", 4,
                [&](int i) { QVERIFY(big.setColumnPermutation(i % 2 ? std::vector<int32_t>{} : perm)); });
        big.setMaxSamplesPerAxis(1);
        redraws("overview, nearest sample", 3, [&](int) { big.setLogScale(!big.logScale()); });
        big.setMaxSamplesPerAxis(4);
        // What a wheel turn or a drag draws: half resolution, nearest sample.
        redraws("interactive zoom (wheel events, progressive)", 6, [&](int i) {
            const QPointF at(400, 250);
            QWheelEvent wheel(at, big.mapToGlobal(at), QPoint(), QPoint(0, i < 3 ? 120 : -120), Qt::NoButton,
                              Qt::NoModifier, Qt::NoScrollPhase, false);
            QCoreApplication::sendEvent(&big, &wheel);
        });
        QVERIFY(big.isInteracting());
        redraws("hover / highlight only (cached heatmap)", 10, [&](int i) { big.setHighlightedToken(i * 100); });
        QCOMPARE(big.glErrorCount(), 0);
        QCOMPARE(big.tiling().layers(), heatmap_tiling_for(rows, cols, big.maxTextureSize()).layers());
    }
};

SL_GUI_TEST_MAIN(TestHeatmapCanvas, false)

#include "tst_heatmap_canvas.moc"
