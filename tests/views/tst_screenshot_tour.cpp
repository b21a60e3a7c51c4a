// The screenshot tour on stories260K: every expected PNG is written at its size, none is a flat colour,
// the heatmap region really holds a rendered matrix, and its three modes differ.
#include <QDir>
#include <QImage>
#include <QSet>
#include <QSettings>
#include <QTemporaryDir>

#include "gui_test_support.h"
#include "sparselens/views/main_window.h"
#include "sparselens/views/screenshot_tour.h"
#include "sparselens/views/session_panel.h"
#include "sparselens/views/tradeoffs_panel.h"

using namespace sl::views;

namespace {

// Distinct colours in the middle `side` x `side` pixels: a rendered heatmap has many, a blank canvas one.
int distinct_colours_in_centre(const QImage& img, int side) {
    const QImage rgb = img.convertToFormat(QImage::Format_RGB32);
    QSet<QRgb> seen;
    const int x0 = std::max(0, rgb.width() / 2 - side / 2), y0 = std::max(0, rgb.height() / 2 - side / 2);
    for (int y = y0; y < std::min(rgb.height(), y0 + side); ++y)
        for (int x = x0; x < std::min(rgb.width(), x0 + side); ++x) seen.insert(rgb.pixel(x, y));
    return static_cast<int>(seen.size());
}

}  // namespace

class TestScreenshotTour : public QObject {
    Q_OBJECT

private slots:
    void isFlat() {
        QImage img(8, 8, QImage::Format_RGB32);
        img.fill(Qt::black);
        QVERIFY(ScreenshotTour::isFlat(img));
        QVERIFY(ScreenshotTour::isFlat(QImage()));
        img.setPixel(7, 7, qRgb(0, 0, 1));
        QVERIFY(!ScreenshotTour::isFlat(img));
    }

    void tourWritesEveryView() {
        QSettings().clear();
        QTemporaryDir out;
        QVERIFY(out.isValid());
        const QString dir = out.filePath(QStringLiteral("shots"));  // created by the tour
        MainWindow w;
        ScreenshotTour::options o;
        o.model = QString::fromStdString(sl::test::shared_path("models/stories260K_f32.bin"));
        o.tokenizer = QString::fromStdString(sl::test::shared_path("models/tok512.bin"));
        o.outDir = dir;
        o.timeoutMs = 60000;
        ScreenshotTour tour(&w, o);
        QVERIFY2(tour.run(), qPrintable(tour.error()));
        for (const QString& n : tour.notes()) qInfo("note: %s", qPrintable(n));

        QStringList expected = ScreenshotTour::fileNames();
        if (!w.findChild<TradeoffsPanel*>()) expected.removeAll(QStringLiteral("tradeoffs.png"));
        if (!w.findChild<SessionPanel*>()) expected.removeAll(QStringLiteral("session.png"));
        QVERIFY(expected.size() >= 8);
        QCOMPARE(tour.written().size(), expected.size());
        for (const QString& name : expected) {
            const QString path = QDir(dir).absoluteFilePath(name);
            QVERIFY2(tour.written().contains(path), qPrintable(path));
            const QImage img(path);
            QVERIFY2(!img.isNull(), qPrintable(path + QStringLiteral(": not a readable PNG")));
            QVERIFY2(!ScreenshotTour::isFlat(img), qPrintable(path + QStringLiteral(": a single flat colour")));
            const QSize want = name == QLatin1String("window.png") ? o.windowSize : ScreenshotTour::shotSize(name);
            if (want.isValid()) {
                QCOMPARE(img.size(), want);
            } else {  // the Activations view, grabbed in place: inside the window, not a sliver
                QVERIFY(img.width() >= 320 && img.height() >= 240);
                QVERIFY(img.width() <= o.windowSize.width() && img.height() <= o.windowSize.height());
            }
        }

        // The heatmap (the middle of the Activations view) was rendered, and each mode draws differently.
        const QImage abs(QDir(dir).absoluteFilePath(QStringLiteral("activations-absolute.png")));
        const QImage rel(QDir(dir).absoluteFilePath(QStringLiteral("activations-relative.png")));
        const QImage mask(QDir(dir).absoluteFilePath(QStringLiteral("activations-mask.png")));
        QVERIFY2(distinct_colours_in_centre(abs, 100) > 20, "the heatmap area of activations-absolute.png is blank");
        QVERIFY(abs != rel);
        QVERIFY(abs != mask);
        QVERIFY(rel != mask);
        // The whole window shows the heatmap too (OpenGL content in the window grab).
        const QImage win(QDir(dir).absoluteFilePath(QStringLiteral("window.png")));
        QVERIFY(distinct_colours_in_centre(win, 100) > 20);
    }
};

SL_GUI_TEST_MAIN(TestScreenshotTour, true)
#include "tst_screenshot_tour.moc"
