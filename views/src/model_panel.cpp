// Model panel: file controls, model card, load progress, calibration status.
#include "sparselens/views/model_panel.h"

#include "progress_strip.h"

#include <QComboBox>
#include <QFileInfo>
#include <QHBoxLayout>
#include <QLabel>
#include <QPushButton>
#include <QTextDocument>
#include <QVBoxLayout>

namespace sl::views {

QString formatBytes(double bytes) {
    if (bytes >= 1e9) return QStringLiteral("%1 GB").arg(bytes / 1e9, 0, 'f', bytes >= 1e11 ? 0 : 2);
    if (bytes >= 1e6) return QStringLiteral("%1 MB").arg(bytes / 1e6, 0, 'f', bytes >= 1e8 ? 0 : 2);
    if (bytes >= 1e3) return QStringLiteral("%1 KB").arg(bytes / 1e3, 0, 'f', bytes >= 1e5 ? 0 : 1);
    return QStringLiteral("%1 B").arg(bytes, 0, 'f', 0);
}

ModelPanel::ModelPanel(QWidget* parent) : QWidget(parent) {
    auto* top = new QHBoxLayout;
    m_open = new QPushButton(tr("Open model…"), this);
    m_open->setToolTip(tr("Open a GGUF or llama2.c model file (Ctrl+O). Files can also be dropped on the window."));
    m_recent = new QComboBox(this);
    m_recent->setToolTip(tr("Recently opened models: pick one to open it again"));
    m_recent->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_recent->setMinimumContentsLength(12);
    top->addWidget(m_open);
    top->addWidget(m_recent, 1);

    m_loadLabel = new QLabel(this);
    m_progress = new ProgressStrip(this);
    m_progress->setToolTip(tr("Loading progress"));
    m_cancel = new QPushButton(tr("Cancel"), this);
    m_cancel->setToolTip(tr("Stop loading; the previous model stays loaded"));
    auto* load = new QHBoxLayout;
    load->addWidget(m_progress, 1);
    load->addWidget(m_cancel);

    m_card = new QLabel(tr("No model loaded. Open a model file or drop one here."), this);
    m_card->setWordWrap(true);
    m_card->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_card->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    m_card->setToolTip(tr("Shapes, weight types and bytes by component of the loaded model"));

    m_calibration = new QLabel(tr("Calibration: none"), this);
    m_calibration->setWordWrap(true);
    m_calibration->setToolTip(tr("Activation statistics the threshold methods (CATS, CHESS, TEAL…) need. "
                                 "MODEL.calib beside the model is used when it matches; otherwise the "
                                 "evaluation text is used the first time a method needs one."));
    m_calibrate = new QPushButton(tr("Calibrate on eval text"), this);
    m_calibrate->setToolTip(tr("Record activation statistics on the current evaluation text now"));
    m_calibrate->setEnabled(false);

    auto* v = new QVBoxLayout(this);
    v->addLayout(top);
    v->addWidget(m_loadLabel);
    v->addLayout(load);
    v->addWidget(m_card, 1);
    v->addWidget(m_calibration);
    v->addWidget(m_calibrate);
    setLoading(false);

    connect(m_open, &QPushButton::clicked, this, &ModelPanel::openRequested);
    connect(m_cancel, &QPushButton::clicked, this, &ModelPanel::cancelRequested);
    connect(m_calibrate, &QPushButton::clicked, this, &ModelPanel::calibrateRequested);
    connect(m_recent, &QComboBox::activated, this, [this](int i) {
        const QString path = m_recent->itemData(i).toString();
        if (!path.isEmpty()) emit recentRequested(path);
    });
}

void ModelPanel::setRecentFiles(const QStringList& paths) {
    m_recent->clear();
    m_recent->addItem(paths.isEmpty() ? tr("(no recent files)") : tr("Recent files…"));
    for (const QString& p : paths) {
        m_recent->addItem(QFileInfo(p).fileName(), p);
        m_recent->setItemData(m_recent->count() - 1, p, Qt::ToolTipRole);
    }
    m_recent->setEnabled(!paths.isEmpty());
}

void ModelPanel::setLoading(bool loading, const QString& what, double fraction) {
    m_loading = loading;
    m_progress->setVisible(loading);
    m_cancel->setVisible(loading);
    m_loadLabel->setVisible(loading);
    m_loadLabel->setText(what);
    m_progress->setFraction(fraction);
}

void ModelPanel::setModelCard(std::shared_ptr<const model_card> c) {
    if (!c) return;
    const model_card& m = *c;
    const double total = double(m.attention_bytes + m.mlp_bytes + m.embedding_bytes + m.other_bytes);
    auto share = [&](uint64_t b) {
        return QStringLiteral("%1 (%2%)").arg(formatBytes(double(b))).arg(total > 0 ? 100.0 * double(b) / total : 0, 0, 'f', 1);
    };
    uint64_t stored = 0;
    for (const model_card::type_share& t : m.tensor_types) stored += t.bytes;
    QString html = QStringLiteral("<b>%1</b><br><small>%2</small><table cellspacing='2'>").arg(
        QString::fromStdString(m.name).toHtmlEscaped(), QString::fromStdString(m.path).toHtmlEscaped());
    auto row = [&](const QString& k, const QString& v) {
        html += QStringLiteral("<tr><td>%1</td><td>%2</td></tr>").arg(k, v.toHtmlEscaped());
    };
    row(tr("architecture"), QString::fromStdString(m.architecture));
    row(tr("format"), QString::fromStdString(m.format));
    row(tr("file"), formatBytes(double(m.file_bytes)));
    row(tr("layers"), QString::number(m.n_layers));
    row(tr("dim / hidden"), QStringLiteral("%1 / %2").arg(m.dim).arg(m.hidden_dim));
    row(tr("heads / kv heads"), QStringLiteral("%1 / %2 (head width %3)").arg(m.n_heads).arg(m.n_kv_heads).arg(m.head_dim));
    row(tr("vocabulary"), QString::number(m.vocab_size));
    row(tr("context"), QString::number(m.seq_len));
    row(tr("MLP weights"), QString::fromStdString(m.weight_type));
    for (size_t i = 0; i < m.tensor_types.size(); ++i) {
        const model_card::type_share& t = m.tensor_types[i];
        row(i == 0 ? tr("tensor types") : QString(),
            tr("%1: %2 tensors, %3 (%4%), %5 bits/weight")
                .arg(QString::fromStdString(t.type))
                .arg(t.tensors)
                .arg(formatBytes(double(t.bytes)))
                .arg(stored ? 100.0 * double(t.bytes) / double(stored) : 0.0, 0, 'f', 1)
                .arg(t.bits_per_weight, 0, 'f', 2));
    }
    row(tr("attention"), share(m.attention_bytes));
    row(tr("MLP"), share(m.mlp_bytes));
    row(tr("embeddings"), share(m.embedding_bytes) + (m.tied_embeddings ? tr(" (tied)") : QString()));
    row(tr("norms"), share(m.other_bytes));
    row(tr("tokenizer"), m.has_tokenizer ? QString::fromStdString(m.tokenizer_source) : tr("none"));
    row(tr("vocabulary kind"), QString::fromStdString(m.tokenizer_kind));
    row(tr("chat format"), QString::fromStdString(m.chat_format));
    html += QStringLiteral("</table>");
    m_card->setText(html);
    m_calibrate->setEnabled(m.has_tokenizer);
    setCalibration(m.has_calibration, QString::fromStdString(m.calibration_source));
}

void ModelPanel::setCalibration(bool present, const QString& description) {
    m_calibration->setText(present ? tr("Calibration: %1").arg(description)
                                   : tr("Calibration: none (made on the eval text when a method needs one)"));
}

QString ModelPanel::cardText() const {
    QTextDocument d;
    d.setHtml(m_card->text());
    return d.toPlainText();
}

}  // namespace sl::views
