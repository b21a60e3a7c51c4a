// "Time per token": where a decoded token's time goes, dense beside the method, as two stacked bars of
// the forward pass's stages (context::set_stage_timing), grouped so the dock stays readable.
#pragma once

#include <QColor>
#include <QString>
#include <QVector>
#include <QWidget>

#include "sparselens/core/context.h"

namespace sl::views {

class StageBars : public QWidget {
    Q_OBJECT
public:
    // The groups the bars show (every stage belongs to one; the tooltip lists the stages themselves).
    struct Group {
        QString label;
        QColor color;
        QVector<stage> stages;
    };
    static const QVector<Group>& groups();

    explicit StageBars(QWidget* parent = nullptr);

    // Mean ms per token of each group, from summed stage times (no tokens: empty bars). The method bar
    // is hidden when `dense_only` (the dense method: one measurement, the baseline). dense_bytes and
    // method_bytes (stage_count entries each: eval_result's stage bytes) give the method bar its ideal
    // (stage_ideal_ms): a marker where the method would end if it read its bytes at dense's speed.
    void setTimes(const stage_times& dense, const stage_times& method, const QString& method_name, bool dense_only,
                  const double* dense_bytes, const double* method_bytes);
    void clear();

    // ms per token of group g (groups() order) in the dense or the method bar; 0 when empty.
    double groupMs(bool method, int g) const;
    double totalMs(bool method) const;
    bool hasMethod() const { return m_hasMethod; }
    // The method's ideal ms per token (0: no method bar, or no bytes to scale by).
    double idealMs() const;

    QSize sizeHint() const override;
    QSize minimumSizeHint() const override;
    bool hasHeightForWidth() const override { return true; }
    int heightForWidth(int w) const override;  // the legend wraps onto more rows when narrow

protected:
    void paintEvent(QPaintEvent*) override;

private:
    QString tooltipText() const;
    // Lays the legend out for width w: calls place(group, x, row) for each shown group; returns the rows.
    template <class F>
    int layoutLegend(int w, F&& place) const;

    stage_times m_dense, m_method;  // summed over the evaluation's decoded tokens
    double m_ideal[stage_count] = {};  // ms per token by stage (all 0: no ideal)
    QString m_methodName;
    bool m_hasMethod = false;
};

}  // namespace sl::views
