// Cache occupancy map: rows = layer x unit-group streams, columns = unit slots, colour = slot_state.
#pragma once

#include <memory>

// Before any Qt header (see heatmap_canvas.h).
#include "sparselens/views/snapshots.h"

#include <QColor>
#include <QImage>
#include <QWidget>

namespace sl::views {

class CacheMapView : public QWidget {
    Q_OBJECT
public:
    explicit CacheMapView(QWidget* parent = nullptr);

    static QColor stateColor(slot_state s);
    static QString stateName(slot_state s);
    // Rows are as wide as the widest unit group; a shorter group (DIP's gate/up input-column pairs: one
    // per model dimension, against one down column per hidden neuron) has no unit past its end.
    static QColor noSlotColor() { return {12, 12, 14}; }
    // "in-cols" for input_column_pair, "down" for down_column, ... (sim::unit_kind_name values).
    static QString groupShortName(const std::string& kind);
    QString rowLabel(int stream) const;  // "L0 in-cols"; "L0" with a single group

    // Shows frame `index` of `series` (the view keeps the series alive); out-of-range shows nothing.
    void setFrame(std::shared_ptr<const cache_snapshot_series> series, int index);
    // The map at `size` (rows and columns reduced so that the most eventful state of the slots sharing a
    // pixel wins: a single load or eviction stays visible when 14,336 units share 800 pixels).
    QImage render(QSize size) const;
    QRect mapRect() const;  // where the map is drawn inside the widget

    QSize sizeHint() const override { return {640, 240}; }

signals:
    void slotHovered(int stream, int unit, int state);

protected:
    void paintEvent(QPaintEvent*) override;
    void mouseMoveEvent(QMouseEvent* e) override;

private:
    int rows() const;
    int labelMargin() const;
    int columns() const;
    std::shared_ptr<const cache_snapshot_series> m_series;
    int m_index = -1;
};

}  // namespace sl::views
