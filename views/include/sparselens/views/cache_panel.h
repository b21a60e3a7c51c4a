// Cache panel: the occupancy map stepped token by token (scrubber, play/pause) with hit-rate and
// flash-bytes charts and a cursor at the current token.
#pragma once

#include <memory>

// Before any Qt header (see heatmap_canvas.h).
#include "sparselens/views/snapshots.h"

#include <QTimer>
#include <QWidget>

class QChart;
class QLabel;
class QLineSeries;
class QPushButton;
class QSlider;
class QSplitter;
class QSpinBox;
class QValueAxis;

namespace sl::views {

class CacheMapView;
class ColorLegend;

class CachePanel : public QWidget {
    Q_OBJECT
public:
    explicit CachePanel(QWidget* parent = nullptr);

    // Series older (by generation) than the one shown are ignored. Keeps the current frame when it exists.
    void setSeries(std::shared_ptr<const sl::views::cache_snapshot_series> series);

    int frameCount() const;
    int currentFrame() const;
    void setCurrentFrame(int index);
    bool isPlaying() const { return m_timer.isActive(); }
    void setPlaying(bool on);

    CacheMapView* mapView() const { return m_map; }
    QSlider* scrubber() const { return m_slider; }
    const QLineSeries* hitRateSeries() const { return m_hit; }
    const QLineSeries* flashSeries() const { return m_flash; }

signals:
    void frameChanged(int index);

protected:
    // Until the user drags the splitter, it keeps a 3:2 split at every size.
    void resizeEvent(QResizeEvent* e) override;

private:
    QSplitter* m_splitter = nullptr;
    bool m_userSplit = false;  // the user moved the splitter: keep their sizes
    void showFrame(int index);
    void rebuildCharts();

    std::shared_ptr<const cache_snapshot_series> m_series;
    CacheMapView* m_map = nullptr;
    ColorLegend* m_legend = nullptr;
    QSlider* m_slider = nullptr;
    QPushButton* m_play = nullptr;
    QSpinBox* m_speed = nullptr;
    QLabel* m_info = nullptr;
    QChart *m_hitChart = nullptr, *m_flashChart = nullptr;
    QLineSeries *m_hit = nullptr, *m_flash = nullptr, *m_hitCursor = nullptr, *m_flashCursor = nullptr;
    QValueAxis *m_hitX = nullptr, *m_hitY = nullptr, *m_flashX = nullptr, *m_flashY = nullptr;
    double m_flashScale = 1.0;  // bytes per displayed unit
    QTimer m_timer;
};

}  // namespace sl::views
