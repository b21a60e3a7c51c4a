// SessionPanel: session file actions, runs table, config export/import, job rows with progress and Cancel.
#include "sparselens/views/session_panel.h"

#include <QAction>
#include <QComboBox>
#include <QDialog>
#include <QDialogButtonBox>
#include <QFileDialog>
#include <QFileInfo>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QItemSelectionModel>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenu>
#include <QMessageBox>
#include <QProgressBar>
#include <QPushButton>
#include <QTableView>
#include <QVBoxLayout>

#include "sparselens/sessions/jobs.h"
#include "sparselens/sessions/run_convert.h"
#include "sparselens/views/runs_model.h"

namespace sl::views {

namespace ss = sl::sessions;

namespace {

QString default_file_dialog(QWidget* parent, SessionPanel::FileRole role, const QString& suggestion) {
    const QString sessions = QObject::tr("SparseLens sessions (*.slsession)");
    const QString configs = QObject::tr("Deployment configs (*.json)");
    switch (role) {
    case SessionPanel::FileRole::NewSession:
        return QFileDialog::getSaveFileName(parent, QObject::tr("New session"), suggestion, sessions);
    case SessionPanel::FileRole::OpenSession:
        return QFileDialog::getOpenFileName(parent, QObject::tr("Open session"), suggestion, sessions);
    case SessionPanel::FileRole::SaveSessionAs:
        return QFileDialog::getSaveFileName(parent, QObject::tr("Save session as"), suggestion, sessions);
    case SessionPanel::FileRole::ExportConfig:
        return QFileDialog::getSaveFileName(parent, QObject::tr("Export deployment config"), suggestion, configs);
    case SessionPanel::FileRole::ImportConfig:
        return QFileDialog::getOpenFileName(parent, QObject::tr("Import deployment config"), suggestion, configs);
    case SessionPanel::FileRole::CalibrationText:
        return QFileDialog::getOpenFileName(parent, QObject::tr("Calibration text"), suggestion,
                                            QObject::tr("Text (*.txt);;All files (*)"));
    }
    return {};
}

QString with_extension(QString path, const QString& ext) {
    if (!path.isEmpty() && QFileInfo(path).suffix().isEmpty()) path += ext;
    return path;
}

// Methods the tuner can tune (dense has no density knob; FFSplit's svd rank follows the density).
QStringList tunable_methods() {
    QStringList out;
    for (const std::string& m : method_names())
        if (m != "dense") out << QString::fromStdString(m);
    return out;
}

// The Sweep… and Tune… dialogs: a method checklist, one text field (densities or budgets), and for the
// tuner the objective. Returns false when cancelled; the fields keep what was accepted.
bool edit_job_params(QWidget* parent, bool tune, QStringList& methods, QString& values, QString* objective) {
    QDialog d(parent);
    d.setObjectName(tune ? "tuneDialog" : "sweepDialog");
    d.setWindowTitle(tune ? QObject::tr("Tune") : QObject::tr("Sweep"));
    auto* list = new QListWidget(&d);
    list->setObjectName("methods");
    for (const QString& m : tunable_methods()) {
        auto* item = new QListWidgetItem(m, list);
        item->setFlags(Qt::ItemIsEnabled | Qt::ItemIsUserCheckable);
        item->setCheckState(methods.contains(m) ? Qt::Checked : Qt::Unchecked);
        QString tip = QString::fromStdString(method_description(m.toStdString()));
        if (method_needs_calibration(m.toStdString())) tip += QObject::tr(" (needs a calibration)");
        item->setToolTip(tip);
    }
    auto* edit = new QLineEdit(values, &d);
    edit->setObjectName("values");
    auto* form = new QFormLayout;
    form->addRow(QObject::tr("Methods"), list);
    if (tune) {
        edit->setToolTip(QObject::tr("Accuracy budgets, comma-separated: ppl+X, ppl*X, ppl<X, kld<X, top1>X"));
        form->addRow(QObject::tr("Budgets"), edit);
    } else {
        edit->setToolTip(QObject::tr("Target MLP densities in (0, 1], comma-separated"));
        form->addRow(QObject::tr("Densities"), edit);
    }
    QComboBox* obj = nullptr;
    if (tune) {
        obj = new QComboBox(&d);
        obj->setObjectName("objective");
        obj->addItem(QObject::tr("Simulated tok/s"), "sim");
        obj->addItem(QObject::tr("CPU tok/s"), "cpu");
        obj->setCurrentIndex(objective && *objective == "cpu" ? 1 : 0);
        form->addRow(QObject::tr("Maximise"), obj);
    }
    auto* errLabel = new QLabel(&d);
    errLabel->setObjectName("error");
    errLabel->setStyleSheet("color: #c00");
    errLabel->setWordWrap(true);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, &d);
    auto* layout = new QVBoxLayout(&d);
    layout->addLayout(form);
    layout->addWidget(errLabel);
    layout->addWidget(buttons);
    QObject::connect(buttons, &QDialogButtonBox::rejected, &d, &QDialog::reject);
    QObject::connect(buttons, &QDialogButtonBox::accepted, &d, [&] {
        QStringList chosen;
        for (int i = 0; i < list->count(); ++i)
            if (list->item(i)->checkState() == Qt::Checked) chosen << list->item(i)->text();
        if (chosen.isEmpty()) {
            errLabel->setText(QObject::tr("Choose at least one method."));
            return;
        }
        const std::string text = edit->text().toStdString();
        if (tune) {
            result<std::vector<sim::accuracy_budget>> b = ss::parse_budgets(text);
            if (!b.ok()) {
                errLabel->setText(QString::fromStdString(b.message()));
                return;
            }
            if (b->empty()) {
                errLabel->setText(QObject::tr("Give at least one budget (e.g. ppl+0.2)."));
                return;
            }
        } else if (result<std::vector<float>> dens = ss::parse_densities(text); !dens.ok()) {
            errLabel->setText(QString::fromStdString(dens.message()));
            return;
        }
        d.accept();
    });
    if (d.exec() != QDialog::Accepted) return false;
    methods.clear();
    for (int i = 0; i < list->count(); ++i)
        if (list->item(i)->checkState() == Qt::Checked) methods << list->item(i)->text();
    values = edit->text().trimmed();
    if (obj && objective) *objective = obj->currentData().toString();
    return true;
}

}  // namespace

SessionPanel::SessionPanel(QWidget* parent) : QWidget(parent) {
    m_chooser = [this](FileRole role, const QString& s) { return default_file_dialog(this, role, s); };
    m_confirm = [this](const QString& q) {
        return QMessageBox::question(this, tr("Session"), q, QMessageBox::Yes | QMessageBox::No, QMessageBox::No) ==
               QMessageBox::Yes;
    };

    m_header = new QLabel(tr("No session"), this);
    m_header->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* newButton = new QPushButton(tr("New…"), this);
    auto* openButton = new QPushButton(tr("Open…"), this);
    m_saveAs = new QPushButton(tr("Save As…"), this);
    newButton->setToolTip(tr("Create a new session file (*.slsession)"));
    openButton->setToolTip(tr("Open a session file"));
    m_saveAs->setToolTip(tr("Every run is saved as it is recorded; Save As copies the session to a new file and continues there"));
    connect(newButton, &QPushButton::clicked, this, &SessionPanel::newSession);
    connect(openButton, &QPushButton::clicked, this, &SessionPanel::openSession);
    connect(m_saveAs, &QPushButton::clicked, this, &SessionPanel::saveSessionAs);
    auto* fileRow = new QHBoxLayout;
    fileRow->addWidget(m_header, 1);
    fileRow->addWidget(newButton);
    fileRow->addWidget(openButton);
    fileRow->addWidget(m_saveAs);

    m_methodBox = new QComboBox(this);
    m_methodBox->addItem(tr("All methods"), QString());
    m_filterEdit = new QLineEdit(this);
    m_filterEdit->setPlaceholderText(tr("Filter: id, method, label, device, date…"));
    m_filterEdit->setClearButtonEnabled(true);
    m_count = new QLabel(this);
    auto* filterRow = new QHBoxLayout;
    filterRow->addWidget(m_methodBox);
    filterRow->addWidget(m_filterEdit, 1);
    filterRow->addWidget(m_count);

    m_model = new RunsTableModel(this);
    m_proxy = new RunsFilterProxy(this);
    m_proxy->setSourceModel(m_model);
    m_table = new QTableView(this);
    m_table->setModel(m_proxy);
    m_table->setSortingEnabled(true);
    m_table->sortByColumn(RunsTableModel::ColId, Qt::AscendingOrder);
    m_table->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_table->setSelectionMode(QAbstractItemView::SingleSelection);
    m_table->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_table->setContextMenuPolicy(Qt::CustomContextMenu);
    m_table->verticalHeader()->setVisible(false);
    m_table->horizontalHeader()->setStretchLastSection(true);
    m_table->setAlternatingRowColors(true);
    connect(m_table, &QWidget::customContextMenuRequested, this, &SessionPanel::showContextMenu);
    connect(m_table, &QAbstractItemView::doubleClicked, this, [this] { restoreSelected(); });
    connect(m_table->selectionModel(), &QItemSelectionModel::selectionChanged, this, [this] {
        const std::optional<int64_t> id = selectedRunId();
        updateButtons();
        emit runSelected(id.value_or(0));
    });
    connect(m_methodBox, &QComboBox::currentIndexChanged, this, [this] {
        m_proxy->setMethodFilter(m_methodBox->currentData().toString());
        updateHeader();
    });
    connect(m_filterEdit, &QLineEdit::textChanged, this, [this](const QString& t) {
        m_proxy->setTextFilter(t);
        updateHeader();
    });

    m_export = new QPushButton(tr("Export config…"), this);
    m_export->setToolTip(tr("Write the selected run as a deployment config (JSON + calibration sidecar)"));
    m_import = new QPushButton(tr("Import config…"), this);
    m_import->setToolTip(tr("Load a deployment config's method and device settings (checked against the loaded model)"));
    connect(m_export, &QPushButton::clicked, this, &SessionPanel::exportSelected);
    connect(m_import, &QPushButton::clicked, this, &SessionPanel::importConfig);
    auto* configRow = new QHBoxLayout;
    configRow->addWidget(m_export);
    configRow->addWidget(m_import);
    configRow->addStretch(1);

    m_message = new QLabel(this);
    m_message->setWordWrap(true);
    m_message->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto* layout = new QVBoxLayout(this);
    layout->setContentsMargins(4, 4, 4, 4);
    layout->addLayout(fileRow);
    layout->addLayout(filterRow);
    layout->addWidget(m_table, 1);
    layout->addLayout(configRow);
    layout->addWidget(makeTaskRow(taskCalibrate, tr("Calibrate…"), tr("Calibrate the loaded model on a text file")));
    layout->addWidget(makeTaskRow(taskSweep, tr("Sweep…"), tr("Evaluate methods x densities and record them as a sweep")));
    layout->addWidget(makeTaskRow(taskTune, tr("Tune…"), tr("Search each method for the fastest setting within accuracy budgets")));
    layout->addWidget(m_message);
    updateHeader();
    updateButtons();
}

SessionPanel::~SessionPanel() = default;

QWidget* SessionPanel::makeTaskRow(const QString& task, const QString& label, const QString& tip) {
    auto* w = new QWidget(this);
    task_row r;
    r.action = new QPushButton(label, w);
    r.action->setToolTip(tip);
    r.bar = new QProgressBar(w);
    r.bar->setRange(0, 1000);
    r.bar->setVisible(false);
    r.cancel = new QPushButton(tr("Cancel"), w);
    r.cancel->setVisible(false);
    r.status = new QLabel(w);
    auto* l = new QHBoxLayout(w);
    l->setContentsMargins(0, 0, 0, 0);
    l->addWidget(r.action);
    l->addWidget(r.bar, 1);
    l->addWidget(r.cancel);
    l->addWidget(r.status, 1);
    if (task == taskCalibrate) connect(r.action, &QPushButton::clicked, this, &SessionPanel::startCalibration);
    if (task == taskSweep) connect(r.action, &QPushButton::clicked, this, &SessionPanel::startSweep);
    if (task == taskTune) connect(r.action, &QPushButton::clicked, this, &SessionPanel::startTune);
    connect(r.cancel, &QPushButton::clicked, this, [this, c = r.cancel] {
        c->setEnabled(false);  // until the engine reports the job finished (cancelled)
        emit cancelRequested();
    });
    m_tasks[task] = r;
    return w;
}

const std::vector<ss::run_record>& SessionPanel::runs() const { return m_model->runs(); }

QString SessionPanel::lastMessage() const { return m_message->text(); }

QProgressBar* SessionPanel::progressBar(const QString& task) const {
    auto it = m_tasks.find(task);
    return it == m_tasks.end() ? nullptr : it->second.bar;
}
QPushButton* SessionPanel::cancelButton(const QString& task) const {
    auto it = m_tasks.find(task);
    return it == m_tasks.end() ? nullptr : it->second.cancel;
}
QPushButton* SessionPanel::actionButton(const QString& task) const {
    auto it = m_tasks.find(task);
    return it == m_tasks.end() ? nullptr : it->second.action;
}

const ss::run_record* SessionPanel::selectedRun() const {
    const QModelIndexList rows = m_table->selectionModel()->selectedRows();
    if (rows.isEmpty()) return nullptr;
    return m_model->runAt(m_proxy->mapToSource(rows.front()).row());
}

std::optional<int64_t> SessionPanel::selectedRunId() const {
    const ss::run_record* r = selectedRun();
    return r ? std::optional(r->id) : std::nullopt;
}

void SessionPanel::setMessage(const QString& text, bool error) {
    m_message->setStyleSheet(error ? "color: #c00" : QString());
    m_message->setText(text);
}

QString SessionPanel::chooseFile(FileRole role, const QString& suggestion) {
    return m_chooser ? m_chooser(role, suggestion) : QString();
}

void SessionPanel::setSessionPath(const QString& path) {
    m_path = path;
    m_store.reset();
    if (!path.isEmpty()) {
        result<ss::session_store> s = ss::session_store::open(path.toStdString(), /*read_only=*/true);
        if (s.ok()) m_store = std::make_unique<ss::session_store>(std::move(*s));
        else setMessage(QString::fromStdString(s.message()), true);
    }
    refresh();
}

void SessionPanel::refresh() {
    std::vector<ss::run_record> runs;
    if (m_store) {
        result<std::vector<ss::run_record>> r = m_store->runs();
        if (!r.ok()) {
            setMessage(QString::fromStdString(r.message()), true);
            return;  // keep what is shown
        }
        runs = std::move(*r);
    }
    const std::optional<int64_t> keep = selectedRunId();
    m_model->setRuns(std::move(runs));
    // Every column as wide as its values and header (the label column takes the rest).
    m_table->resizeColumnsToContents();
    updateMethodBox();
    updateHeader();
    if (keep) selectRun(*keep);
    updateButtons();
    emit runsChanged(m_model->runs());
}

void SessionPanel::updateMethodBox() {
    QStringList methods;
    for (const ss::run_record& r : m_model->runs()) {
        const QString m = QString::fromStdString(r.method);
        if (!methods.contains(m)) methods << m;
    }
    methods.sort();
    const QString current = m_methodBox->currentData().toString();
    const QSignalBlocker block(m_methodBox);
    while (m_methodBox->count() > 1) m_methodBox->removeItem(1);
    for (const QString& m : methods) m_methodBox->addItem(m, m);
    // A filter on a method that has no runs left still applies (the table is then empty), so it is kept.
    if (!current.isEmpty() && m_methodBox->findData(current) < 0) m_methodBox->addItem(current, current);
    m_methodBox->setCurrentIndex(std::max(0, m_methodBox->findData(current)));
}

void SessionPanel::updateHeader() {
    if (!m_store) {
        m_header->setText(m_path.isEmpty() ? tr("No session") : tr("Session %1 (not readable)").arg(QFileInfo(m_path).fileName()));
    } else {
        QString name = QFileInfo(m_path).completeBaseName();
        if (result<ss::session_info> i = m_store->info(); i.ok() && !i->name.empty()) name = QString::fromStdString(i->name);
        m_header->setText(tr("<b>%1</b> — %2").arg(name.toHtmlEscaped(), m_path.toHtmlEscaped()));
        m_header->setToolTip(tr("Saved automatically: every run is written to the session file when it is recorded"));
    }
    const int shown = m_proxy->rowCount(), total = m_model->rowCount();
    m_count->setText(shown == total ? tr("%n run(s)", nullptr, total) : tr("%1 of %2 runs").arg(shown).arg(total));
}

void SessionPanel::updateButtons() {
    const bool have = !m_path.isEmpty();
    const bool selected = selectedRun() != nullptr;
    m_saveAs->setEnabled(have);
    m_export->setEnabled(have && selected);
    for (auto& [task, r] : m_tasks) r.action->setEnabled(m_running.isEmpty());
    // Sweeps and tunes are recorded in the session: they need one.
    if (m_running.isEmpty()) {
        m_tasks[taskSweep].action->setEnabled(have);
        m_tasks[taskTune].action->setEnabled(have);
    }
}

void SessionPanel::selectRun(qint64 id) {
    const int row = m_model->rowOfId(id);
    if (row < 0) {
        if (id == 0) m_table->clearSelection();
        return;
    }
    const QModelIndex p = m_proxy->mapFromSource(m_model->index(row, 0));
    if (!p.isValid()) return;  // filtered out
    if (selectedRunId() == std::optional<int64_t>(id)) return;
    m_table->selectionModel()->select(p, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    m_table->scrollTo(p);
}

void SessionPanel::newSession() {
    const QString path = with_extension(chooseFile(FileRole::NewSession, QFileInfo(m_path).absolutePath()), ".slsession");
    if (path.isEmpty()) return;
    if (QFileInfo::exists(path)) {
        // session_store::create never replaces a file; open it instead of failing later.
        setMessage(tr("%1 already exists: opening it").arg(path), false);
        emit openSessionRequested(path);
        return;
    }
    emit newSessionRequested(path);
}

void SessionPanel::openSession() {
    const QString path = chooseFile(FileRole::OpenSession, QFileInfo(m_path).absolutePath());
    if (!path.isEmpty()) emit openSessionRequested(path);
}

void SessionPanel::saveSessionAs() {
    if (m_path.isEmpty()) return;
    const QString path = with_extension(chooseFile(FileRole::SaveSessionAs, m_path), ".slsession");
    if (path.isEmpty()) return;
    if (QFileInfo(path).absoluteFilePath() == QFileInfo(m_path).absoluteFilePath()) {
        setMessage(tr("The session is saved already: every run is written when it is recorded."), false);
        return;
    }
    emit saveAsRequested(path, QFileInfo::exists(path));
}

void SessionPanel::exportSelected() {
    const ss::run_record* r = selectedRun();
    if (!r) {
        setMessage(tr("Select a run to export."), true);
        return;
    }
    const QString suggestion = QFileInfo(m_path).absolutePath() + QStringLiteral("/run%1-%2.json").arg(r->id).arg(QString::fromStdString(r->method));
    const QString path = with_extension(chooseFile(FileRole::ExportConfig, suggestion), ".json");
    if (!path.isEmpty()) emit exportRequested(r->id, path);
}

void SessionPanel::importConfig() {
    const QString path = chooseFile(FileRole::ImportConfig, QFileInfo(m_path).absolutePath());
    if (!path.isEmpty()) emit importRequested(path);
}

void SessionPanel::deleteSelected() {
    const ss::run_record* r = selectedRun();
    if (!r) return;
    const qint64 id = r->id;
    if (m_confirm && !m_confirm(tr("Delete run %1 (%2) and its export records from the session?").arg(id).arg(QString::fromStdString(r->method))))
        return;
    emit deleteRunRequested(id);
}

void SessionPanel::restoreSelected() {
    const ss::run_record* r = selectedRun();
    if (!r) return;
    const ss::run_record run = *r;
    emit runActivated(run);
    result<method_config> c = ss::method_config_from_json(run.params_json, m_path.toStdString() + ": run " + std::to_string(run.id));
    if (!c.ok()) {
        setMessage(QString::fromStdString(c.message()), true);
        return;
    }
    emit restoreRequested(*c);
}

void SessionPanel::startCalibration() {
    const QString path = chooseFile(FileRole::CalibrationText, QFileInfo(m_path).absolutePath());
    if (path.isEmpty()) return;
    taskStarted(taskCalibrate);
    emit calibrateRequested(path);
}

void SessionPanel::startSweep() {
    if (!edit_job_params(this, false, m_sweepMethods, m_sweepDensities, nullptr)) return;
    result<std::vector<float>> d = ss::parse_densities(m_sweepDensities.toStdString());
    if (!d.ok()) return;  // the dialog validated it
    QList<double> densities;
    for (float f : *d) densities << static_cast<double>(f);
    taskStarted(taskSweep);
    emit sweepRequested(m_sweepMethods, densities);
}

void SessionPanel::startTune() {
    if (!edit_job_params(this, true, m_tuneMethods, m_tuneBudgets, &m_tuneObjective)) return;
    taskStarted(taskTune);
    emit tuneRequested(m_tuneBudgets, m_tuneMethods, m_tuneObjective);
}

void SessionPanel::taskStarted(const QString& task) {
    auto it = m_tasks.find(task);
    if (it == m_tasks.end()) return;
    m_running = task;
    task_row& r = it->second;
    r.bar->setRange(0, 0);  // busy until the first progress report
    r.bar->setVisible(true);
    r.cancel->setVisible(true);
    r.cancel->setEnabled(true);
    r.status->setText(tr("queued"));
    r.status->setStyleSheet(QString());
    updateButtons();
}

void SessionPanel::setProgress(const QString& task, double fraction) {
    auto it = m_tasks.find(task);
    if (it == m_tasks.end()) return;
    if (m_running != task) taskStarted(task);  // started elsewhere (menu, CLI-like shortcut)
    task_row& r = it->second;
    r.bar->setRange(0, 1000);
    r.bar->setValue(static_cast<int>(std::clamp(fraction, 0.0, 1.0) * 1000.0 + 0.5));
    r.status->setText(tr("%1%").arg(100.0 * std::clamp(fraction, 0.0, 1.0), 0, 'f', 0));
}

void SessionPanel::setTaskFinished(const QString& task, bool ok, const QString& message) {
    auto it = m_tasks.find(task);
    if (it == m_tasks.end()) {
        setMessage(message, !ok);
        return;
    }
    task_row& r = it->second;
    r.bar->setVisible(false);
    r.cancel->setVisible(false);
    r.status->setText(message);
    r.status->setToolTip(message);
    r.status->setStyleSheet(ok ? QString() : QStringLiteral("color: #c00"));
    if (m_running == task) m_running.clear();
    updateButtons();
}

void SessionPanel::showContextMenu(const QPoint& pos) {
    const QModelIndex idx = m_table->indexAt(pos);
    if (idx.isValid())
        m_table->selectionModel()->select(idx, QItemSelectionModel::ClearAndSelect | QItemSelectionModel::Rows);
    if (!selectedRun()) return;
    QMenu menu(this);
    menu.addAction(tr("Restore settings"), this, &SessionPanel::restoreSelected);
    menu.addAction(tr("Export config…"), this, &SessionPanel::exportSelected);
    menu.addSeparator();
    menu.addAction(tr("Delete run"), this, &SessionPanel::deleteSelected);
    menu.exec(m_table->viewport()->mapToGlobal(pos));
}

}  // namespace sl::views
