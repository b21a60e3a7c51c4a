// `sparselens-gui [MODEL] [--tokenizer T] [--prompt P] [--generate] [--screenshots DIR]`: the desktop application.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include <QApplication>
#include <QCommandLineParser>
#include <QSettings>
#include <QTemporaryDir>

#include "sparselens/kernels/openmp_policy.h"
#include "sparselens/views/main_window.h"
#include "sparselens/views/screenshot_tour.h"

int main(int argc, char** argv) {
    sl::kernels::prefer_passive_openmp(argv);
    QApplication app(argc, argv);
    QApplication::setOrganizationName(QStringLiteral("SparseLens"));
    QApplication::setApplicationName(QStringLiteral("sparselens-gui"));
    QApplication::setApplicationVersion(QStringLiteral("0.1.0"));

    QCommandLineParser cli;
    cli.setApplicationDescription(QStringLiteral("SparseLens: activation-sparsity workbench for on-device LLM inference"));
    cli.addHelpOption();
    cli.addVersionOption();
    cli.addPositionalArgument(QStringLiteral("model"), QStringLiteral("Model file to open (GGUF or llama2.c .bin)"),
                              QStringLiteral("[MODEL]"));
    const QCommandLineOption tokenizer({QStringLiteral("z"), QStringLiteral("tokenizer")},
                                       QStringLiteral("llama2.c tokenizer.bin (default: embedded or beside the model)"),
                                       QStringLiteral("file"));
    const QCommandLineOption prompt({QStringLiteral("i"), QStringLiteral("prompt")},
                                    QStringLiteral("Prompt text to start with"), QStringLiteral("text"));
    const QCommandLineOption generate(QStringLiteral("generate"),
                                      QStringLiteral("Generate from the prompt as soon as the model is loaded"));
    const QCommandLineOption screenshots(QStringLiteral("screenshots"),
                                         QStringLiteral("Run the screenshot tour on MODEL, write the PNGs to DIR and exit"),
                                         QStringLiteral("dir"));
    cli.addOption(tokenizer);
    cli.addOption(prompt);
    cli.addOption(generate);
    cli.addOption(screenshots);
    cli.process(app);

    if (cli.isSet(screenshots)) {
        const QStringList args = cli.positionalArguments();
        if (args.size() != 1) {
            std::fprintf(stderr, "sparselens-gui: --screenshots needs exactly one MODEL\n");
            return 1;
        }
        // Fresh settings (default layout, no recent files) in a throw-away place: reproducible pictures,
        // and the user's own settings stay untouched.
        QTemporaryDir settings;
        QSettings::setPath(QSettings::NativeFormat, QSettings::UserScope, settings.path());
        QSettings::setPath(QSettings::IniFormat, QSettings::UserScope, settings.path());
        for (const char* xdg : {"XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"})  // the startup session too
            qputenv(xdg, settings.path().toLocal8Bit());
        sl::views::MainWindow w;
        sl::views::ScreenshotTour::options o;
        o.model = args.front();
        o.tokenizer = cli.value(tokenizer);
        o.outDir = cli.value(screenshots);
        if (cli.isSet(prompt)) o.prompt = cli.value(prompt);
        sl::views::ScreenshotTour tour(&w, o);
        QObject::connect(&tour, &sl::views::ScreenshotTour::progress, [](const QString& s) {
            std::fprintf(stderr, "[screenshots] %s\n", qPrintable(s));
        });
        const bool ok = tour.run();
        for (const QString& n : tour.notes()) std::fprintf(stderr, "[screenshots] skipped: %s\n", qPrintable(n));
        if (!ok) {
            std::fprintf(stderr, "sparselens-gui: %s\n", qPrintable(tour.error()));
            return 1;
        }
        for (const QString& f : tour.written()) std::printf("%s\n", qPrintable(f));
        return 0;
    }

    sl::views::MainWindow w;
    if (cli.isSet(prompt)) w.setPrompt(cli.value(prompt));
    const QStringList args = cli.positionalArguments();
    if (args.size() > 1) cli.showHelp(2);
    w.show();
    if (!args.isEmpty()) {
        w.setGenerateOnLoad(cli.isSet(generate));
        w.openModel(args.front(), cli.value(tokenizer));
    }
    return app.exec();
}
