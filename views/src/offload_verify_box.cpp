// OffloadVerifyBox: the "Verify on this machine" row of the Trade-offs panel and its result table.
#include "sparselens/views/offload_verify_box.h"

#include "sparselens/sim/offload_pass.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QProgressBar>
#include <QPushButton>
#include <QVBoxLayout>

#include "sparselens/sim/device.h"
#include "sparselens/sim/offload_pass.h"
#include "sparselens/views/engine_controller.h"

namespace sl::views {

namespace {

QString bytes_text(double b) {
    if (b >= 1e9) return QStringLiteral("%1 GB").arg(b / 1e9, 0, 'f', 2);
    if (b >= 1e6) return QStringLiteral("%1 MB").arg(b / 1e6, 0, 'f', 2);
    if (b >= 1e3) return QStringLiteral("%1 kB").arg(b / 1e3, 0, 'f', 1);
    return QStringLiteral("%1 B").arg(b, 0, 'f', 0);
}

QString percent(double f) {
    return QStringLiteral("%1%").arg(100.0 * f, 0, 'f', 1);
}

}  // namespace

OffloadVerifyBox::OffloadVerifyBox(QWidget* parent) : QWidget(parent) {
    m_verify = new QPushButton(tr("Verify on this machine"), this);
    m_verify->setToolTip(
        tr("Run the selected run's deployment config with its MLP weights read from storage "
           "(O_DIRECT) under the DRAM budget, and compare with the simulator using this "
           "machine's probed profile (sparselens probe-device --save), its flash figures taken "
           "from a one-second probe of the pack just before the run"));
    m_budget = new QLineEdit(this);
    m_budget->setPlaceholderText(tr("DRAM budget (empty: the run's device)"));
    m_budget->setToolTip(tr("DRAM for the offloaded run, e.g. 600MB (resident part plus MLP caches), or +50% for "
                            "the run's resident part plus half of its MLP weights"));
    m_budget->setMaximumWidth(220);
    m_progress = new QProgressBar(this);
    m_progress->setRange(0, 1000);
    m_progress->setTextVisible(false);
    m_progress->setMaximumHeight(12);
    m_cancel = new QPushButton(tr("Cancel"), this);
    m_probe = new QPushButton(tr("Probe this machine"), this);
    m_probe->setToolTip(
        tr("Measure this machine's storage and memory as the simulator models them (what "
           "`sparselens probe-device --save` does: a 512 MiB scratch file in ~/.cache/sparselens, "
           "about 10 s) and save the profile Verify uses"));
    m_result = new QLabel(this);
    m_result->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_result->setWordWrap(true);

    auto* row = new QHBoxLayout;
    row->setContentsMargins(0, 0, 0, 0);
    row->addWidget(m_verify);
    row->addWidget(m_budget);
    row->addWidget(m_progress, 1);
    row->addWidget(m_cancel);
    row->addWidget(m_probe);
    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(0, 0, 0, 0);
    layout->addLayout(row);
    layout->addWidget(m_result);

    connect(m_verify, &QPushButton::clicked, this, &OffloadVerifyBox::startVerify);
    connect(m_probe, &QPushButton::clicked, this, &OffloadVerifyBox::startProbe);
    connect(m_cancel, &QPushButton::clicked, this, [this] {
        if (m_controller) m_controller->cancelVerify();
    });
    setRunning(false);
}

void OffloadVerifyBox::attach(EngineController* c) {
    m_controller = c;
    const QString task = QString::fromLatin1(EngineController::taskVerify);
    const QString probe = QString::fromLatin1(EngineController::taskProbe);
    connect(c, &EngineController::taskProgress, this, [this, task, probe](const QString& t, double f) {
        if (t == task || t == probe) m_progress->setValue(static_cast<int>(f * 1000));
    });
    connect(c, &EngineController::offloadVerified, this, [this](std::shared_ptr<const offload_verify_result> r) {
        m_last = r;
        m_result->setText(resultTable(*r));
    });
    connect(c, &EngineController::taskFinished, this,
            [this, task, probe](const QString& t, bool ok, const QString& msg) {
                if (t != task && t != probe) return;
                setRunning(false);
                if (!ok || t == probe) m_result->setText(msg.toHtmlEscaped());
            });
    connect(c, &EngineController::modelLoaded, this, [this] { updateButton(); });
    updateButton();
}

void OffloadVerifyBox::setRunId(qint64 id) {
    m_runId = id;
    updateButton();
}

void OffloadVerifyBox::startVerify() {
    if (!m_controller || m_runId <= 0 || m_running) return;
    offload_verify_request req;
    req.run_id = m_runId;
    const QString b = m_budget->text().trimmed();
    if (!b.isEmpty()) {
        auto budget = offload::parse_budget(b.toStdString());
        if (!budget) {
            m_result->setText(QString::fromStdString(budget.message()).toHtmlEscaped());
            return;
        }
        req.dram_bytes = budget->bytes;
        req.mlp_share = budget->mlp_share;
    }
    m_result->setText(tr("Verifying run %1 on this machine…").arg(m_runId));
    setRunning(true);
    m_controller->verifyOffload(req);
}

void OffloadVerifyBox::setProbeSize(quint64 fileBytes, double secondsPerPoint) {
    m_probeBytes = fileBytes;
    m_probeSeconds = secondsPerPoint;
}

void OffloadVerifyBox::startProbe() {
    if (!m_controller || m_running) return;
    m_result->setText(tr("Probing this machine's storage…"));
    setRunning(true);
    m_controller->probeThisMachine(m_probeBytes, m_probeSeconds);
}

void OffloadVerifyBox::setRunning(bool on) {
    m_running = on;
    m_progress->setValue(0);
    m_progress->setVisible(on);
    m_cancel->setVisible(on);
    updateButton();
}

void OffloadVerifyBox::updateButton() {
    m_verify->setEnabled(!m_running && m_runId > 0 && m_controller && m_controller->hasModel());
    m_probe->setEnabled(!m_running && m_controller);
}

QString OffloadVerifyBox::resultTable(const offload_verify_result& r) {
    auto row = [](const QString& what, const QString& measured, const QString& simulated) {
        return QStringLiteral("<tr><td>%1</td><td align=right>%2</td><td align=right>%3</td></tr>")
            .arg(what, measured, simulated);
    };
    QString t = QStringLiteral("<b>%1</b>, run %2, on %3 (%4)%5<br>")
                    .arg(QString::fromStdString(r.method).toHtmlEscaped())
                    .arg(r.run_id)
                    .arg(QString::fromStdString(r.profile).toHtmlEscaped(), QString::fromStdString(r.io_backend),
                         r.pack_written ? tr(", pack written first") : QString());
    t += QStringLiteral("<table cellspacing=0 cellpadding=2><tr><th></th><th>%1</th><th>%2</th></tr>")
             .arg(tr("measured"), tr("simulated"));
    t += row(tr("tokens/s"), QString::number(r.tokens_per_s, 'f', 2),
             QStringLiteral("%1 (DRAM-bound %2)")
                 .arg(r.sim_tokens_per_s, 0, 'f', 2)
                 .arg(r.sim_dram_bound_tokens_per_s, 0, 'f', 2));
    t += row(tr("bytes read/token"), bytes_text(r.bytes_per_token), bytes_text(r.sim_bytes_per_token));
    t += row(tr("hit rate"), percent(r.hit_rate), percent(r.sim_hit_rate));
    t += row(tr("I/O wait"), percent(r.io_wait_share), percent(r.sim_io_wait_share));
    t += row(tr("read rate"), QStringLiteral("%1 MB/s").arg(r.read_bytes_per_s / 1e6, 0, 'f', 0),
             QStringLiteral("%1 MB/s%2")
                 .arg(r.sim_flash_bytes_per_s / 1e6, 0, 'f', 0)
                 .arg(r.flash_probed ? tr(" (pack probed just before)") : QString()));
    t += QStringLiteral("</table>");
    t += tr("Budget %1: resident %2 + caches %3%4; %5 decoded tokens")
             .arg(bytes_text(static_cast<double>(r.budget)), bytes_text(static_cast<double>(r.resident)),
                  bytes_text(static_cast<double>(r.cache_capacity)),
                  r.pinned_units ? tr(" (%1 pinned units)").arg(r.pinned_units) : QString())
             .arg(r.n_decoded);
    return t;
}

}  // namespace sl::views
