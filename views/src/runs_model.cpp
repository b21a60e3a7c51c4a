// RunsTableModel and RunsFilterProxy.
#include "sparselens/views/runs_model.h"

#include <algorithm>
#include <cmath>

#include <QDateTime>

#include "sparselens/sessions/run_convert.h"

namespace sl::views {

namespace {

// The target density a run was configured with (params_json); NaN when the parameters do not parse.
double target_density(const sessions::run_record& r) {
    result<method_config> c = sessions::method_config_from_json(r.params_json, "run");
    return c.ok() ? static_cast<double>(c->density) : std::nan("");
}

// The method with the knobs it ran with ("teal: attention 50%"), from params_json.
std::string method_tooltip(const sessions::run_record& r) {
    result<method_config> c = sessions::method_config_from_json(r.params_json, "run");
    if (!c.ok()) return r.method + ": " + c.message();
    const std::string knobs = method_knobs_text(*c);
    return knobs.empty() ? r.method + ": no other knobs" : r.method + ": " + knobs;
}

QVariant number_or_missing(double v) { return std::isfinite(v) ? QVariant(v) : QVariant(); }
QVariant optional_number(const std::optional<double>& v) { return v ? number_or_missing(*v) : QVariant(); }

QString fixed(double v, int decimals) { return std::isfinite(v) ? QString::number(v, 'f', decimals) : QStringLiteral("—"); }

}  // namespace

RunsTableModel::RunsTableModel(QObject* parent) : QAbstractTableModel(parent) {}

void RunsTableModel::setRuns(std::vector<sessions::run_record> runs) {
    const bool extends = runs.size() > m_runs.size() &&
                         std::equal(m_runs.begin(), m_runs.end(), runs.begin(),
                                    [](const auto& a, const auto& b) { return a.id == b.id && a.created == b.created; });
    std::vector<double> density;
    density.reserve(runs.size());
    for (const sessions::run_record& r : runs) density.push_back(target_density(r));
    if (extends) {
        beginInsertRows({}, static_cast<int>(m_runs.size()), static_cast<int>(runs.size()) - 1);
        m_runs = std::move(runs);
        m_density = std::move(density);
        endInsertRows();
        return;
    }
    beginResetModel();
    m_runs = std::move(runs);
    m_density = std::move(density);
    endResetModel();
}

void RunsTableModel::appendRun(sessions::run_record run) {
    const int row = static_cast<int>(m_runs.size());
    beginInsertRows({}, row, row);
    m_density.push_back(target_density(run));
    m_runs.push_back(std::move(run));
    endInsertRows();
}

bool RunsTableModel::removeRun(int64_t id) {
    const int row = rowOfId(id);
    if (row < 0) return false;
    beginRemoveRows({}, row, row);
    m_runs.erase(m_runs.begin() + row);
    m_density.erase(m_density.begin() + row);
    endRemoveRows();
    return true;
}

const sessions::run_record* RunsTableModel::runAt(int row) const {
    return row >= 0 && row < static_cast<int>(m_runs.size()) ? &m_runs[static_cast<size_t>(row)] : nullptr;
}

int RunsTableModel::rowOfId(int64_t id) const {
    for (size_t i = 0; i < m_runs.size(); ++i)
        if (m_runs[i].id == id) return static_cast<int>(i);
    return -1;
}

int RunsTableModel::rowCount(const QModelIndex& parent) const {
    return parent.isValid() ? 0 : static_cast<int>(m_runs.size());
}

int RunsTableModel::columnCount(const QModelIndex& parent) const { return parent.isValid() ? 0 : ColumnCount; }

QVariant RunsTableModel::data(const QModelIndex& index, int role) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid)) return {};
    const sessions::run_record& r = m_runs[static_cast<size_t>(index.row())];
    if (role == RunIdRole) return QVariant::fromValue<qint64>(r.id);
    if (role == MethodRole) return QString::fromStdString(r.method);
    if (role == Qt::TextAlignmentRole) {
        const int c = index.column();
        const bool text = c == ColCreated || c == ColMethod || c == ColDevice || c == ColLabel;
        return QVariant::fromValue(text ? Qt::AlignLeft | Qt::AlignVCenter : Qt::AlignRight | Qt::AlignVCenter);
    }
    if (role == Qt::ToolTipRole && index.column() == ColLabel) return QString::fromStdString(r.label);
    if (role == Qt::ToolTipRole && index.column() == ColCreated) return QString::fromStdString(r.created);
    if (role == Qt::ToolTipRole && index.column() == ColMethod) return QString::fromStdString(method_tooltip(r));
    if (role != Qt::DisplayRole && role != SortRole) return {};
    const bool sort = role == SortRole;
    switch (index.column()) {
    case ColId: return sort ? QVariant::fromValue<qint64>(r.id) : QVariant(QString::number(r.id));
    case ColCreated: {
        // Shown in local time to the minute; sorted by (and the tooltip gives) the stored UTC ISO string.
        const QString iso = QString::fromStdString(r.created);
        if (sort) return iso;
        const QDateTime t = QDateTime::fromString(iso, Qt::ISODate);
        return t.isValid() ? t.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm")) : iso;
    }
    case ColMethod: return QString::fromStdString(r.method);
    case ColDensity: {
        const double d = m_density[static_cast<size_t>(index.row())];
        return sort ? number_or_missing(d) : QVariant(fixed(100.0 * d, 1) + (std::isfinite(d) ? "%" : ""));
    }
    case ColDeltaPpl: {
        const double d = r.ppl - r.ppl_dense;
        return sort ? number_or_missing(d) : QVariant((d >= 0 ? "+" : "") + fixed(d, 4));
    }
    case ColKld: return sort ? number_or_missing(r.kld_mean) : QVariant(fixed(r.kld_mean, 5));
    case ColTop1: return sort ? number_or_missing(100.0 * r.top1) : QVariant(fixed(100.0 * r.top1, 1));
    case ColMlpDensity: return sort ? number_or_missing(100.0 * r.mlp_density) : QVariant(fixed(100.0 * r.mlp_density, 1) + "%");
    case ColCpuTokS: return sort ? number_or_missing(r.cpu_tok_s) : QVariant(fixed(r.cpu_tok_s, 1));
    case ColSimTokS:
        if (sort) return optional_number(r.sim_tok_s);
        return r.sim_tok_s ? fixed(*r.sim_tok_s, 2) : QStringLiteral("—");
    case ColHitRate:
        if (sort) return r.hit_rate ? number_or_missing(100.0 * *r.hit_rate) : QVariant();
        return r.hit_rate ? fixed(100.0 * *r.hit_rate, 1) + "%" : QStringLiteral("—");
    case ColDevice: return QString::fromStdString(r.device_name);
    case ColLabel: return QString::fromStdString(r.label);
    default: return {};
    }
}

QVariant RunsTableModel::headerData(int section, Qt::Orientation orientation, int role) const {
    if (orientation != Qt::Horizontal || section < 0 || section >= ColumnCount) return {};
    static const char* const names[ColumnCount] = {"Id",  "Created", "Method",    "Density",  "ΔPPL",
                                                   "KLD", "Top-1 %", "MLP dens.", "CPU tok/s", "Sim tok/s",
                                                   "Hit rate", "Device", "Label"};
    static const char* const tips[ColumnCount] = {
        "Run id in the session", "When the run was recorded (local time; the tooltip has the UTC time)", "Sparsity method",
        "Target MLP density the method was configured with", "Perplexity minus dense perplexity on the same windows",
        "Mean KL divergence from the dense model", "Share of tokens whose top-1 prediction matches dense",
        "MLP weights the kernels actually read", "Decode tokens/s measured on this CPU",
        "Simulated tokens/s on the target device", "Simulated DRAM cache hit rate", "Simulated device",
        "Label given when the run was recorded"};
    if (role == Qt::DisplayRole) return tr(names[section]);
    if (role == Qt::ToolTipRole) return tr(tips[section]);
    return {};
}

RunsFilterProxy::RunsFilterProxy(QObject* parent) : QSortFilterProxyModel(parent) {
    setSortRole(RunsTableModel::SortRole);
    setDynamicSortFilter(true);
}

void RunsFilterProxy::setMethodFilter(const QString& method) {
    if (method == m_method) return;
    m_method = method;
    invalidateRowsFilter();
}

void RunsFilterProxy::setTextFilter(const QString& text) {
    if (text == m_text) return;
    m_text = text;
    m_words = text.split(QChar(' '), Qt::SkipEmptyParts);
    invalidateRowsFilter();
}

bool RunsFilterProxy::filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const {
    const QAbstractItemModel* m = sourceModel();
    if (!m) return false;
    if (!m_method.isEmpty() && m->index(sourceRow, 0, sourceParent).data(RunsTableModel::MethodRole).toString() != m_method)
        return false;
    if (m_words.isEmpty()) return true;
    QString hay;
    for (int c : {RunsTableModel::ColId, RunsTableModel::ColMethod, RunsTableModel::ColLabel, RunsTableModel::ColDevice,
                  RunsTableModel::ColCreated})
        hay += m->index(sourceRow, c, sourceParent).data(Qt::DisplayRole).toString() + QChar('\n');
    return std::all_of(m_words.begin(), m_words.end(), [&](const QString& w) { return hay.contains(w, Qt::CaseInsensitive); });
}

bool RunsFilterProxy::lessThan(const QModelIndex& left, const QModelIndex& right) const {
    const QVariant a = left.data(sortRole()), b = right.data(sortRole());
    if (!a.isValid() || !b.isValid()) return !a.isValid() && b.isValid();
    const bool na = a.typeId() == QMetaType::Double || a.typeId() == QMetaType::LongLong;
    const bool nb = b.typeId() == QMetaType::Double || b.typeId() == QMetaType::LongLong;
    if (na && nb) {
        if (a.typeId() == QMetaType::LongLong && b.typeId() == QMetaType::LongLong) return a.toLongLong() < b.toLongLong();
        return a.toDouble() < b.toDouble();
    }
    return QString::localeAwareCompare(a.toString(), b.toString()) < 0;
}

}  // namespace sl::views
