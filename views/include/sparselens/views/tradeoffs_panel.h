// Trade-offs panel (issue 7, panel 7): every run of the session as a scatter of accuracy against simulated
// tokens/s, CPU tokens/s or MLP density, one colour per method, with each method's Pareto front, tuner
// runs ringed, recommendations starred and unsaved live results hollow. Clicking a point restores it.
// Under the chart, "Verify on this machine" runs the selected run offloaded here (OffloadVerifyBox).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include <QColor>
#include <QWidget>

#include "sparselens/core/methods.h"
#include "sparselens/sessions/session_store.h"
#include "sparselens/views/snapshots.h"

class QCheckBox;
class QComboBox;
class QLabel;
class QPointF;
QT_BEGIN_NAMESPACE
class QChart;
class QChartView;
class QLineSeries;
class QScatterSeries;
class QXYSeries;
QT_END_NAMESPACE

namespace sl::views {

class EngineController;
class OffloadVerifyBox;

// A method's colour in every chart (fixed for the shipped methods, a stable pick for others).
QColor method_color(const std::string& method);

class TradeoffsPanel : public QWidget {
    Q_OBJECT
public:
    enum class XAxis { SimTokS, CpuTokS, MlpDensity };
    enum class YAxis { DeltaPpl, Kld };

    explicit TradeoffsPanel(QWidget* parent = nullptr);
    ~TradeoffsPanel() override;

    void setRuns(std::vector<sessions::run_record> runs);
    // An evaluation from the Tuning panel that is not (yet) a run: drawn hollow. A partial result (slider
    // still moving) replaces the previous partial one; complete results accumulate (the last 256 kept).
    void addLiveResult(std::shared_ptr<const tuning_result> r);
    // Several at once, in order, with one redraw (results that arrived while the panel was hidden).
    void addLiveResults(std::vector<std::shared_ptr<const tuning_result>> results);
    void clearLiveResults();
    // Runs a tune recommended (tune_job_result::recommended_run_ids): drawn as stars.
    void setRecommendedRuns(const std::vector<int64_t>& ids);
    void setAxes(XAxis x, YAxis y, bool logY);

    XAxis xAxis() const { return m_x; }
    YAxis yAxis() const { return m_y; }
    bool logY() const { return m_logY; }
    // Log x: by default on for a tok/s axis whose points span more than a decade; setLogX overrides that
    // until the x metric changes. Never on the density axis.
    void setLogX(bool on);
    bool logX() const { return m_logX; }

    // What is drawn (the chart's series are rebuilt on every change; these stay valid until then).
    QChart* chart() const;
    QChartView* chartView() const { return m_view; }
    QScatterSeries* scatterOf(const std::string& method) const;  // saved runs; null when none is drawn
    QLineSeries* frontOf(const std::string& method) const;
    QScatterSeries* liveOf(const std::string& method) const;
    // Where the run is drawn in chart values, when it is drawn (it has the x metric).
    bool valueOfRun(int64_t id, QPointF* out) const;

    // "Verify on this machine" for the selected run runs on `controller` (not owned).
    void attachController(EngineController* controller);
    OffloadVerifyBox* verifyBox() const { return m_verifyBox; }

    static QString runSummary(const sessions::run_record& r);
    static QString liveSummary(const tuning_result& r);

public slots:
    // Rings the run (e.g. the row selected in the Session panel); 0: none. Redraws on the next event-loop
    // turn, so it is safe from a handler of this panel's own signals.
    void selectRun(qint64 id);

signals:
    void runActivated(const sl::sessions::run_record& run);
    void restoreRequested(const sl::method_config& config);
    void messageChanged(const QString& message);  // e.g. a run whose parameters do not parse

private:
    struct point_ref {
        int run = -1;   // index into m_runs
        int live = -1;  // index into m_live
    };
    void rebuild();
    bool pointOf(const sessions::run_record& r, QPointF* out) const;
    bool pointOf(const tuning_result& r, QPointF* out) const;
    void addSeries(QXYSeries* s, std::vector<point_ref> refs, bool interactive);
    const point_ref* refAt(QXYSeries* s, const QPointF& p) const;
    void onClicked(QXYSeries* s, const QPointF& p);
    void onHovered(QXYSeries* s, const QPointF& p, bool state);

    QComboBox* m_xCombo = nullptr;
    QComboBox* m_yCombo = nullptr;
    QCheckBox* m_logCheck = nullptr;
    QCheckBox* m_logXCheck = nullptr;
    QLabel* m_status = nullptr;
    QChartView* m_view = nullptr;
    OffloadVerifyBox* m_verifyBox = nullptr;

    XAxis m_x = XAxis::SimTokS;
    YAxis m_y = YAxis::DeltaPpl;
    bool m_logY = false;
    bool m_logX = false;     // as drawn
    int m_logXChoice = -1;   // -1 automatic, 0 off, 1 on (the user's)
    std::vector<sessions::run_record> m_runs;
    std::vector<std::shared_ptr<const tuning_result>> m_live;
    std::shared_ptr<const tuning_result> m_partial;
    std::vector<std::shared_ptr<const tuning_result>> m_liveSnapshot;  // what the live series show (m_live + partial)
    bool m_rebuildQueued = false;
    std::set<int64_t> m_recommended;
    int64_t m_selected = 0;

    std::map<QXYSeries*, std::vector<point_ref>> m_refs;
    std::map<std::string, QScatterSeries*> m_scatter, m_liveSeries;
    std::map<std::string, QLineSeries*> m_front;
};

}  // namespace sl::views
