// Activations panel: the heatmap canvas with layer / matrix / mode / column-order selectors and a legend.
#pragma once

#include <cstdint>
#include <memory>
#include <string_view>

// Before any Qt header (see heatmap_canvas.h).
#include "sparselens/views/snapshots.h"
#include "sparselens/views/heatmap_canvas.h"

#include <QWidget>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QPushButton;

namespace sl::views {

class ColorLegend;

enum class column_order : uint8_t {
    index = 0,         // neuron id
    griffin = 1,       // GRIFFIN's prompt statistic (row-normalised L2), highest first
    heavy_hitter = 2,  // heavy-hitter norm, most important first
};
std::string_view column_order_name(column_order o);

class ActivationsPanel : public QWidget {
    Q_OBJECT
public:
    explicit ActivationsPanel(QWidget* parent = nullptr);
    ~ActivationsPanel() override;

    // Snapshots older (by generation) than the one shown are ignored.
    void setActivations(std::shared_ptr<const sl::views::activation_snapshot> snap);
    void setNeuronOrders(std::shared_ptr<const sl::views::neuron_snapshot> stats);
    void highlightToken(int pos);
    int layer() const;
    sl::probe probe() const;
    void setLayerCount(int n);

    void setMode(heatmap_mode m);
    heatmap_mode mode() const;
    void setOrder(column_order o);
    column_order order() const;
    // The order actually applied: falls back to index when the statistics do not fit the matrix.
    column_order effectiveOrder() const { return m_effectiveOrder; }
    // Never null. Without OpenGL it is kept out of the window (see the constructor) but still answers
    // cellAt()/orders, so the panel's logic is the same everywhere.
    HeatmapCanvas* canvas() const { return m_canvas; }
    ColorLegend* legend() const { return m_legend; }

signals:
    void selectionChanged(int layer, int probe);
    void tokenHovered(int pos);

private:
    void applyOrder();
    void updateLegend();
    void syncScaleControls();
    void updateTitle();

    HeatmapCanvas* m_canvas = nullptr;
    ColorLegend* m_legend = nullptr;
    QComboBox *m_layer = nullptr, *m_probe = nullptr, *m_mode = nullptr, *m_order = nullptr;
    QComboBox* m_cmap = nullptr;
    QCheckBox *m_log = nullptr, *m_auto = nullptr;
    QDoubleSpinBox* m_max = nullptr;
    QPushButton* m_reset = nullptr;
    QLabel *m_title = nullptr, *m_readout = nullptr, *m_noGL = nullptr;
    std::shared_ptr<const activation_snapshot> m_snap;
    std::shared_ptr<const neuron_snapshot> m_stats;
    column_order m_effectiveOrder = column_order::index;
};

}  // namespace sl::views
