// Tuning panel: method and its knobs, the simulated device (profile, DRAM budget, bandwidths, bits,
// cache policy) and the readouts of the last evaluation. Moving a control asks for an evaluation:
// a partial one while a slider is dragged, a full one when it settles.
#pragma once

#include <memory>

#include "sparselens/views/engine_requests.h"
#include "sparselens/views/snapshots.h"

#include <QMap>
#include <QSlider>
#include <QWidget>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QGridLayout;
class QLabel;
class QPushButton;
class QSpinBox;

namespace sl::views {

// A slider that draws a labelled marker at one value (the model's size on the DRAM budget slider).
class StageBars;

class MarkedSlider : public QSlider {
    Q_OBJECT
public:
    explicit MarkedSlider(QWidget* parent = nullptr);
    void setMarker(int value, const QString& label);  // value < minimum: no marker
    int marker() const { return m_marker; }

protected:
    void paintEvent(QPaintEvent* e) override;

private:
    int m_marker = -1;
    QString m_label;
};

class TuningPanel : public QWidget {
    Q_OBJECT
public:
    static constexpr int fullWindows = 8;     // windows of a full evaluation
    static constexpr int partialWindows = 2;  // while a slider is dragged

    explicit TuningPanel(QWidget* parent = nullptr);

    method_config methodConfig() const;
    // Every knob as its slider stands, also those the current method does not read (disabled sliders):
    // what Session panel sweeps and tunes apply to each of their methods (method_config_for).
    method_config methodKnobs() const;
    void setMethodConfig(const method_config& cfg);  // e.g. restoring a run; requests a full evaluation
    device_settings deviceSettings() const;
    // E.g. an imported config's device; requests no evaluation (setMethodConfig after it does). A device
    // that is no shipped profile keeps the current profile with the config's numbers.
    void setDeviceSettings(const device_settings& d);
    QString deviceProfile() const;
    void setDeviceProfile(const QString& name);
    evaluate_request request(bool partial) const;

    void setModelCard(std::shared_ptr<const model_card> card);
    void showResult(std::shared_ptr<const tuning_result> r);
    void setEvalTextName(const QString& name);
    void setCalibrated(bool present);

    // Readout texts by key: dppl, kld, top1, mlp, attn, cpu, cpu_ratio, sim, sim_ratio, hit (tests, reports).
    QString readout(const QString& key) const;
    std::shared_ptr<const tuning_result> lastResult() const { return m_last; }
    QComboBox* methodCombo() const { return m_method; }
    QSlider* densitySlider() const { return m_density; }
    MarkedSlider* dramSlider() const { return m_dram; }
    QPushButton* saveRunButton() const { return m_save; }
    StageBars* stageBars() const { return m_stages; }
    // The method-parameter controls (tests): pinning share, attention density, rank, FFSplit split and
    // compression. Each is enabled only for the methods that read it.
    QSlider* pinSlider() const { return m_pin; }
    QSlider* attnSlider() const { return m_attn; }
    QSpinBox* rankSpin() const { return m_rank; }
    QSlider* ffsplitHeavySlider() const { return m_ffHeavy; }
    QComboBox* compressCombo() const { return m_compress; }
    uint64_t dramBytes() const;
    // Flash read unit in bytes (0: byte-exact); choosing a profile sets its page size.
    int64_t flashPageBytes() const;
    void setFlashPage(int64_t bytes);
    static QString formatPage(int64_t bytes);

signals:
    void evaluationRequested(bool partial);
    void evalTextChangeRequested();  // the user wants to choose another evaluation text
    void evalTextResetRequested();
    void deviceProfileChanged(const QString& name);
    void saveRunRequested();  // record the shown (complete) result as a run of the session

private:
    void onMethodChanged();
    void onDeviceChanged();
    void updateDramRange();
    void updateLabels();
    void syncSplitSliders();
    void buildParameterControls(QGridLayout* grid, int row);
    void connectSlider(QSlider* s);
    void requestFull();

    QComboBox *m_method = nullptr, *m_device = nullptr, *m_bits = nullptr, *m_policy = nullptr, *m_page = nullptr;
    QSlider *m_density = nullptr, *m_dIn = nullptr, *m_dDown = nullptr, *m_gamma = nullptr;
    QSlider *m_pin = nullptr, *m_attn = nullptr, *m_ffHeavy = nullptr;
    QSpinBox* m_rank = nullptr;
    QComboBox* m_compress = nullptr;
    QLabel *m_pinLabel = nullptr, *m_attnLabel = nullptr, *m_ffHeavyLabel = nullptr;
    MarkedSlider* m_dram = nullptr;
    QCheckBox* m_split = nullptr;
    QDoubleSpinBox *m_flashBw = nullptr, *m_dramBw = nullptr;
    QLabel *m_densityLabel = nullptr, *m_dInLabel = nullptr, *m_dDownLabel = nullptr, *m_gammaLabel = nullptr;
    QLabel *m_dramLabel = nullptr, *m_evalText = nullptr, *m_calib = nullptr, *m_status = nullptr;
    QPushButton *m_chooseText = nullptr, *m_resetText = nullptr, *m_save = nullptr;
    QMap<QString, QLabel*> m_readouts;
    StageBars* m_stages = nullptr;

    std::shared_ptr<const model_card> m_card;
    std::shared_ptr<const tuning_result> m_last;
    double m_dramLo = 1e5, m_dramHi = 1e10;  // bytes at the slider's ends (log scale)
    bool m_updating = false;                 // programmatic changes do not request evaluations
};

}  // namespace sl::views
