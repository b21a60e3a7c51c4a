// The runs of a session as a Qt table (Session panel) and the proxy that sorts and filters it.
#pragma once

#include <cstdint>
#include <vector>

#include <QAbstractTableModel>
#include <QSortFilterProxyModel>

#include "sparselens/sessions/session_store.h"

namespace sl::views {

class RunsTableModel : public QAbstractTableModel {
    Q_OBJECT
public:
    enum Column : int {
        ColId, ColCreated, ColMethod, ColDensity, ColDeltaPpl, ColKld, ColTop1, ColMlpDensity,
        ColCpuTokS, ColSimTokS, ColHitRate, ColDevice, ColLabel, ColumnCount
    };
    // Qt::UserRole (SortRole): a number for numeric columns (so 10 sorts after 9), text otherwise, and
    // an invalid QVariant for a missing value (a run that was not simulated).
    static constexpr int SortRole = Qt::UserRole;
    static constexpr int RunIdRole = Qt::UserRole + 1;   // qint64, any column
    static constexpr int MethodRole = Qt::UserRole + 2;  // QString, any column

    explicit RunsTableModel(QObject* parent = nullptr);

    // Replaces the rows. When `runs` is the current rows plus more at the end (the usual refresh after
    // a run was recorded) the new rows are inserted instead of resetting, so selection and scroll stay.
    void setRuns(std::vector<sessions::run_record> runs);
    void appendRun(sessions::run_record run);
    bool removeRun(int64_t id);

    const std::vector<sessions::run_record>& runs() const { return m_runs; }
    const sessions::run_record* runAt(int row) const;
    int rowOfId(int64_t id) const;  // -1 when absent

    int rowCount(const QModelIndex& parent = {}) const override;
    int columnCount(const QModelIndex& parent = {}) const override;
    QVariant data(const QModelIndex& index, int role = Qt::DisplayRole) const override;
    QVariant headerData(int section, Qt::Orientation orientation, int role = Qt::DisplayRole) const override;

private:
    std::vector<sessions::run_record> m_runs;
    std::vector<double> m_density;  // per row: the configured target density (params_json), parsed once
};

// Sorts by RunsTableModel::SortRole (numbers numerically, missing values first in ascending order) and
// filters by method (exact; empty: all) and free text (case-insensitive substring of id, method, label,
// device or creation time; every whitespace-separated word must match).
class RunsFilterProxy : public QSortFilterProxyModel {
    Q_OBJECT
public:
    explicit RunsFilterProxy(QObject* parent = nullptr);

    void setMethodFilter(const QString& method);
    void setTextFilter(const QString& text);
    QString methodFilter() const { return m_method; }
    QString textFilter() const { return m_text; }

protected:
    bool filterAcceptsRow(int sourceRow, const QModelIndex& sourceParent) const override;
    bool lessThan(const QModelIndex& left, const QModelIndex& right) const override;

private:
    QString m_method, m_text;
    QStringList m_words;
};

}  // namespace sl::views
