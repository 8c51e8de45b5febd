#pragma once
// GUI thread.

#include "input_request.h"
#include "inspection_snapshot.h"

#include <QVector>

namespace outlierlens {

class Figure;

/// What the main window shows: the main model's latest snapshot and the chosen head.
struct PageState
{
    SnapshotPtr snapshot;         ///< null until the model's first input has run
    int layer = 0, head = 0;      ///< 0-based
    QVector<int> highlightTokens; ///< tokens with outliers in the dimension clicked on the Outliers page

    /// A snapshot is shown and it has the chosen layer and head.
    bool hasHead() const { return snapshot && layer < snapshot->L() && head < snapshot->H(); }
};

/// One tab of the main window. The window tells every page what changed (the model, the input, the
/// head) and asks the visible page to refresh and for its figure, without asking which page it is.
/// A mix-in next to QWidget (class XPage : public QWidget, public Page) so that a page keeps its
/// widget base, or is a view itself (HeadPage is a HeadView).
class Page
{
public:
    virtual ~Page() = default;

    /// Whether the page has anything to show for `model`; the window hides its tab otherwise.
    virtual bool showsModel(const ModelInfo& /*model*/) const { return true; }
    /// A model was opened (its first input has not run yet).
    virtual void setModel(const ModelInfo& /*model*/) {}
    /// The input the main model ran last; pages with models of their own run it too.
    virtual void setInput(const InputRequest& /*input*/) {}
    /// The layer and head (0-based) chosen in the toolbar.
    virtual void setSelection(int /*layer*/, int /*head*/) {}
    /// The outlier rule changed (View > Outlier rule): pages with models of their own count by it too
    /// and run their input again; the main model's input is rerun by the window.
    virtual void setOutlierRule(const OutlierCriterion& /*rule*/) {}
    /// Redraws from `state`: called on the visible page when it is shown and whenever the state changes.
    virtual void refresh(const PageState& /*state*/) {}
    /// A figure opened from the Figures page was drawn from the current input (false) or from a statistics
    /// file (true): pages that can show either switch to that source (the file's, once it is loaded).
    virtual void showSource(bool /*statisticsFile*/) {}
    /// What File > Export saves from this page, or null.
    virtual const Figure* figure() const = 0;
};

} // namespace outlierlens
