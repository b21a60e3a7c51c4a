// Prompt & output panel: prompt editor and sampling controls, Generate / Stop, and the streamed text
// with each token coloured by KL to dense, MLP density or log-probability (with a legend).
#pragma once

#include <vector>

#include "sparselens/views/engine_requests.h"
#include "sparselens/views/snapshots.h"

#include <QWidget>

class QCheckBox;
class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSpinBox;
class QTextEdit;

namespace sl::views {

class TokenLegend;

class PromptPanel : public QWidget {
    Q_OBJECT
public:
    enum class ColorBy { None = 0, Kld = 1, MlpDensity = 2, LogProb = 3 };

    explicit PromptPanel(QWidget* parent = nullptr);

    QString prompt() const;
    void setPrompt(const QString& text);
    int steps() const;
    void setSteps(int n);
    float temperature() const;
    void setTemperature(float t);
    quint64 seed() const;
    void setMaxSteps(int n);  // the model's context
    bool regenerateOnTuning() const;
    bool chatFormat() const;  // wrap the prompt in the model's chat format

    void setGenerating(bool on);
    void beginOutput(generation_id gen);  // clears the output for a new generation
    void appendTokens(const std::vector<token_event>& batch);
    void finishOutput(const generation_stats& stats);
    void highlightToken(int pos);

    void setColorBy(ColorBy c);
    ColorBy colorBy() const { return m_colorBy; }
    QString outputText() const;
    const std::vector<token_event>& tokens() const { return m_tokens; }
    // Background of a token under the current colouring (invalid: not coloured).
    QColor tokenColor(const token_event& e) const;
    // Position of the token drawn at a character offset of the output, or -1.
    int tokenAtCharacter(int offset) const;
    QTextEdit* outputView() const { return m_output; }

signals:
    void generateRequested();
    void stopRequested();
    void tokenHovered(int pos);

protected:
    bool eventFilter(QObject* watched, QEvent* event) override;

private:
    void render();
    void appendOne(const token_event& e);
    void updateLegend();

    QComboBox* m_examples = nullptr;
    QPlainTextEdit* m_prompt = nullptr;
    QSpinBox *m_steps = nullptr, *m_seed = nullptr;
    QDoubleSpinBox* m_temp = nullptr;
    QPushButton *m_generate = nullptr, *m_stop = nullptr;
    QCheckBox* m_live = nullptr;
    QCheckBox* m_chat = nullptr;
    QComboBox* m_color = nullptr;
    TokenLegend* m_legend = nullptr;
    QTextEdit* m_output = nullptr;
    QLabel* m_stats = nullptr;

    ColorBy m_colorBy = ColorBy::Kld;
    generation_id m_gen = 0;
    std::vector<token_event> m_tokens;
    std::vector<int> m_starts;  // character offset of each shown token (same index as m_tokens)
    int m_hovered = -1, m_highlighted = -1;
};

}  // namespace sl::views
