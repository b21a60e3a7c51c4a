// Colour legend: a colour-map gradient with value ticks and/or categorical swatches (mask, cache states).
#pragma once

#include <QColor>
#include <QString>
#include <QVector>
#include <QWidget>

#include "sparselens/views/colormaps.h"

namespace sl::views {

class ColorLegend : public QWidget {
    Q_OBJECT
public:
    struct Swatch {
        QColor color;
        QString label;
        QColor hatch;  // invalid = solid; otherwise drawn striped like the canvas draws it
    };

    explicit ColorLegend(QWidget* parent = nullptr);

    // Gradient from lo to hi; with `log` the ticks are decades. An empty title hides the gradient.
    void setGradient(colormap cmap, float lo, float hi, bool log, const QString& title);
    void clearGradient();
    void setSwatches(QVector<Swatch> swatches);

    bool hasGradient() const { return !m_title.isEmpty(); }
    float gradientLow() const { return m_lo; }
    float gradientHigh() const { return m_hi; }
    bool gradientLog() const { return m_log; }
    colormap gradientColormap() const { return m_cmap; }
    const QVector<Swatch>& swatches() const { return m_swatches; }

    QSize sizeHint() const override;
    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int w) const override;  // the swatches wrap onto more rows when narrow
    QSize minimumSizeHint() const override;

protected:
    void paintEvent(QPaintEvent*) override;

private:
    colormap m_cmap = colormap::viridis;
    float m_lo = 0, m_hi = 1;
    bool m_log = false;
    QString m_title;
    QVector<Swatch> m_swatches;
};

}  // namespace sl::views
