// RunsTableModel and RunsFilterProxy under QAbstractItemModelTester (fatal mode) through reset, insert,
// remove, numeric sorting (missing values included) and method / text filtering.
#include <QAbstractItemModelTester>
#include <QtTest>

#include "sparselens/sessions/run_convert.h"
#include "sparselens/views/runs_model.h"

using namespace sl::views;
namespace ss = sl::sessions;

namespace {

ss::run_record run(int64_t id, const std::string& method, float density, double dppl, std::optional<double> sim,
                   const std::string& label = {}) {
    ss::run_record r;
    r.id = id;
    r.created = "2025-01-0" + std::to_string(1 + id % 9) + "T00:00:00Z";
    r.method = method;
    sl::method_config c = sl::method_default_config();
    c.name = method;
    c.density = density;
    r.params_json = ss::method_config_to_json(c);
    r.ppl_dense = 10;
    r.ppl = 10 + dppl;
    r.kld_mean = dppl / 10;
    r.top1 = 0.9;
    r.mlp_density = density;
    r.cpu_tok_s = 100 * density;
    r.sim_tok_s = sim;
    if (sim) r.hit_rate = 0.5, r.device_name = "apple-a18";
    r.label = label;
    return r;
}

std::vector<ss::run_record> sample() {
    return {run(2, "dip", 0.5f, 0.2, 40.0, "tune coarse"), run(10, "cats", 0.7f, 0.05, std::nullopt, "manual"),
            run(9, "dip", 0.3f, 0.9, 55.0, "sweep coarse"), run(4, "teal", 0.6f, 0.1, 7.5)};
}

// Source rows of the proxy's rows, top to bottom.
std::vector<int64_t> ids_in_order(const QSortFilterProxyModel& p) {
    std::vector<int64_t> out;
    for (int r = 0; r < p.rowCount(); ++r) out.push_back(p.index(r, 0).data(RunsTableModel::RunIdRole).toLongLong());
    return out;
}

}  // namespace

class TestRunsModel : public QObject {
    Q_OBJECT
private slots:
    void modelPassesTesterThroughChanges() {
        RunsTableModel m;
        QAbstractItemModelTester tester(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
        QSignalSpy reset(&m, &QAbstractItemModel::modelReset);
        QSignalSpy inserted(&m, &QAbstractItemModel::rowsInserted);
        m.setRuns(sample());  // from empty: an insertion
        QCOMPARE(inserted.count(), 1);
        QCOMPARE(m.rowCount(), 4);
        QCOMPARE(m.columnCount(), int(RunsTableModel::ColumnCount));
        // A refresh that only adds rows at the end inserts them.
        auto more = sample();
        more.push_back(run(11, "chess", 0.4f, 0.3, 20.0));
        m.setRuns(more);
        QCOMPARE(inserted.count(), 2);
        QCOMPARE(reset.count(), 0);
        QCOMPARE(m.rowCount(), 5);
        m.appendRun(run(12, "dip", 0.8f, 0.01, 30.0));
        QCOMPARE(inserted.count(), 3);
        QVERIFY(m.removeRun(10));
        QVERIFY(!m.removeRun(10));
        QCOMPARE(m.rowOfId(10), -1);
        QCOMPARE(m.rowCount(), 5);
        // Anything else resets.
        const int resets = reset.count();
        m.setRuns(sample());
        QCOMPARE(reset.count(), resets + 1);
        m.setRuns({});
        QCOMPARE(m.rowCount(), 0);
    }

    void displaysUnitsAndMissingValues() {
        RunsTableModel m;
        m.setRuns(sample());
        const int cats = m.rowOfId(10);
        QCOMPARE(m.index(cats, RunsTableModel::ColSimTokS).data().toString(), QStringLiteral("—"));
        QVERIFY(!m.index(cats, RunsTableModel::ColSimTokS).data(RunsTableModel::SortRole).isValid());
        QCOMPARE(m.index(cats, RunsTableModel::ColDeltaPpl).data().toString(), QStringLiteral("+0.0500"));
        QCOMPARE(m.index(cats, RunsTableModel::ColDensity).data().toString(), QStringLiteral("70.0%"));
        QCOMPARE(m.index(cats, RunsTableModel::ColDensity).data(RunsTableModel::SortRole).toDouble(), double(0.7f));
        QCOMPARE(m.index(0, RunsTableModel::ColMethod).data(RunsTableModel::MethodRole).toString(), QStringLiteral("dip"));
        QCOMPARE(m.headerData(RunsTableModel::ColDeltaPpl, Qt::Horizontal).toString(), QStringLiteral("ΔPPL"));
        // Created: local time to the minute, sorted by and hovering to the stored UTC ISO string.
        const QModelIndex created = m.index(cats, RunsTableModel::ColCreated);
        const QString iso = created.data(Qt::ToolTipRole).toString();
        QVERIFY(iso.endsWith(QLatin1Char('Z')));
        QCOMPARE(created.data(RunsTableModel::SortRole).toString(), iso);
        const QDateTime utc(QDate::fromString(iso.left(10), Qt::ISODate), QTime(0, 0), Qt::UTC);
        QCOMPARE(created.data().toString(), utc.toLocalTime().toString(QStringLiteral("yyyy-MM-dd HH:mm")));
        // A run whose parameters do not parse still shows (density unknown).
        auto bad = sample();
        bad[0].params_json = "{\"density\": \"half\"}";
        m.setRuns(bad);
        QCOMPARE(m.index(0, RunsTableModel::ColDensity).data().toString(), QStringLiteral("—"));
    }

    void proxySortsNumericallyAndFilters() {
        RunsTableModel m;
        RunsFilterProxy p;
        p.setSourceModel(&m);
        QAbstractItemModelTester tm(&m, QAbstractItemModelTester::FailureReportingMode::Fatal);
        QAbstractItemModelTester tp(&p, QAbstractItemModelTester::FailureReportingMode::Fatal);
        m.setRuns(sample());

        p.sort(RunsTableModel::ColId, Qt::AscendingOrder);
        QCOMPARE(ids_in_order(p), (std::vector<int64_t>{2, 4, 9, 10}));  // as text it would be 10, 2, 4, 9
        p.sort(RunsTableModel::ColSimTokS, Qt::DescendingOrder);
        QCOMPARE(ids_in_order(p), (std::vector<int64_t>{9, 2, 4, 10}));  // 55 > 40 > 7.5 (as text 7.5 first); missing last
        p.sort(RunsTableModel::ColSimTokS, Qt::AscendingOrder);
        QCOMPARE(ids_in_order(p).front(), int64_t{10});
        p.sort(RunsTableModel::ColDeltaPpl, Qt::AscendingOrder);
        QCOMPARE(ids_in_order(p), (std::vector<int64_t>{10, 4, 2, 9}));
        p.sort(RunsTableModel::ColMethod, Qt::AscendingOrder);
        QCOMPARE(p.index(0, RunsTableModel::ColMethod).data().toString(), QStringLiteral("cats"));

        // Sorted insertions keep the order (dynamic sort).
        p.sort(RunsTableModel::ColId, Qt::DescendingOrder);
        m.appendRun(run(3, "dip", 0.45f, 0.3, 45.0));
        QCOMPARE(ids_in_order(p), (std::vector<int64_t>{10, 9, 4, 3, 2}));

        p.setMethodFilter("dip");
        QCOMPARE(ids_in_order(p), (std::vector<int64_t>{9, 3, 2}));
        p.setTextFilter("TUNE");  // case-insensitive, matches the label
        QCOMPARE(ids_in_order(p), (std::vector<int64_t>{2}));
        p.setTextFilter("sweep 9");  // every word must match: label and id
        QCOMPARE(ids_in_order(p), (std::vector<int64_t>{9}));
        p.setMethodFilter({});
        p.setTextFilter("a18");  // device
        QCOMPARE(ids_in_order(p), (std::vector<int64_t>{9, 4, 3, 2}));
        p.setTextFilter("nothing-matches");
        QCOMPARE(p.rowCount(), 0);
        m.setRuns(sample());  // reset while everything is filtered out
        QCOMPARE(p.rowCount(), 0);
        p.setTextFilter({});
        QCOMPARE(p.rowCount(), 4);
        QVERIFY(m.removeRun(9));
        QCOMPARE(ids_in_order(p), (std::vector<int64_t>{10, 4, 2}));
    }
};

QTEST_GUILESS_MAIN(TestRunsModel)
#include "tst_runs_model.moc"
