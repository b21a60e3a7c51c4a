// `sparselens-gui [MODEL] [--tokenizer T] [--prompt P] [--generate]`: the desktop application.
#include <unistd.h>

#include <cstdlib>

#include <QApplication>
#include <QCommandLineParser>

#include "sparselens/views/main_window.h"

namespace {

// As the CLI does (see app/cli/main.cpp): libgomp's spinning barrier starves the GUI thread and the
// engine thread on shared cores; the policy is read before main(), so re-exec once with it set.
void prefer_passive_openmp(char** argv) {
    if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
    setenv("OMP_WAIT_POLICY", "passive", 1);
    execv("/proc/self/exe", argv);  // only returns on failure: then carry on with the default policy
}

}  // namespace

int main(int argc, char** argv) {
    prefer_passive_openmp(argv);
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
    cli.addOption(tokenizer);
    cli.addOption(prompt);
    cli.addOption(generate);
    cli.process(app);

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
