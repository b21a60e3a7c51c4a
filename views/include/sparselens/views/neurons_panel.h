// Neurons panel: sorted heavy-hitter importance per layer (log scale) with FFSplit's split and a
// "top x% holds y% of the norm" readout, and GRIFFIN's flocking (prompt vs generation Jaccard) per layer.
#pragma once

#include <memory>
#include <vector>

// Before any Qt header (see heatmap_canvas.h).
#include "sparselens/views/snapshots.h"

#include <QWidget>

class QBarSet;
class QChart;
class QComboBox;
class QLabel;
class QLineSeries;
class QLogValueAxis;
class QSlider;
class QSplitter;
class QValueAxis;
class QBarCategoryAxis;
class QBarSeries;

namespace sl::views {

class NeuronsPanel : public QWidget {
    Q_OBJECT
public:
    explicit NeuronsPanel(QWidget* parent = nullptr);

    // Snapshots older (by generation) than the one shown are ignored.
    void setNeuronStats(std::shared_ptr<const sl::views::neuron_snapshot> stats);
    void setLayer(int layer);
    int layer() const;

    // Slider position as a share of the layer's neurons, in percent (0.1% steps).
    void setTopPercent(double pct);
    double topPercent() const;
    // Share of the layer's total heavy-hitter norm held by its round(pct% x n) most important neurons.
    double shareOfTop(double pct) const;
    QString readout() const;

    // Read-only access for tests and for embedding in reports.
    const QLineSeries* importanceSeries() const { return m_importance; }
    const QLineSeries* splitSeries() const { return m_split; }
    const QLineSeries* pinnedSeries() const { return m_pinned; }
    const QLineSeries* cursorSeries() const { return m_cursor; }
    const QBarSet* flockingSet() const { return m_flockSet; }

signals:
    void layerChanged(int layer);

protected:
    // Until the user drags the splitter, it keeps a 3:2 split at every size.
    void resizeEvent(QResizeEvent* e) override;

private:
    QSplitter* m_splitter = nullptr;
    bool m_userSplit = false;  // the user moved the splitter: keep their sizes
    void rebuildLayer();
    void rebuildFlocking();
    void updateCursor();

    std::shared_ptr<const neuron_snapshot> m_stats;
    std::vector<double> m_prefix;  // prefix sums of the layer's (non-negative, finite) importances
    double m_yMin = 1, m_yMax = 10;      // the data's importance range
    double m_axisLo = 1, m_axisHi = 10;  // the log axis' range (powers of its base)

    QComboBox* m_layer = nullptr;
    QSlider* m_slider = nullptr;
    QLabel *m_readout = nullptr, *m_engineShares = nullptr, *m_sharesDetail = nullptr;
    QChart *m_impChart = nullptr, *m_flockChart = nullptr;
    QLineSeries *m_importance = nullptr, *m_split = nullptr, *m_pinned = nullptr, *m_cursor = nullptr;
    QValueAxis* m_rankAxis = nullptr;
    QLogValueAxis* m_impAxis = nullptr;
    QBarSeries* m_flockSeries = nullptr;
    QBarSet* m_flockSet = nullptr;
    QBarCategoryAxis* m_flockLayers = nullptr;
    QValueAxis* m_flockAxis = nullptr;
};

}  // namespace sl::views
