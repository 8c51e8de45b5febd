#pragma once
// GUI thread (plain data). An et al. 2025's lifecycle of a massive activation (their Figures 7-9) from an
// inspection snapshot with `lifecycle` layers: which layers, and the panels each figure draws.

#include "inspection_snapshot.h"
#include "panel_grid.h"

#include <QString>
#include <QVector>

namespace outlierlens {

/// The layers of An et al.'s Figures 7-9 for one input (0-based; -1: none), by their roles, with the
/// figures' outlier rule (the snapshot's; An et al.'s own with `--rule tau`): where a massive activation
/// emerges (the first layer whose output has outlier values; its token is the one holding the largest
/// |h| among them), where it spreads (a later layer's head that reads it) and where it disappears (the
/// first later layer whose output has no outlier value on that token).
struct LifecycleChoice
{
    int emergence = -1, spread = -1, head = -1, disappearance = -1;
    int token = -1;        ///< the token holding the massive activation
    QVector<int> channels; ///< its outlier channels in the emergence layer's output, ascending
    QString note;          ///< how they were chosen, in words (1-based layers and heads)
    QString noSpread;      ///< why there is no spread layer (empty when there is one)
    QString noEnd;         ///< why there is no disappearance layer (empty when there is one)
};

/// Chooses the layers on `s` (any snapshot of a decoder): `sinkLayer`/`sinkHead` (0-based), the head the
/// other figures show, is the spread head when it comes after the emergence layer; else the head of the
/// next layer that puts the most attention on the token.
LifecycleChoice chooseLifecycle(const InspectionSnapshot& s, int sinkLayer, int sinkHead);

/// Figures 7 and 9: the FFN of lifecycle layer `x` as signed token x channel heatmaps, in the order data
/// flows: what its norm reads and writes, the gate, up and activation outputs (those the FFN has), x_down,
/// the FFN's output and the layer's output h. The token's row, its channels (`c.channels`) in the
/// d-wide panels and x_down's largest channel at the token in the wide ones are marked.
QVector<GridPanel> buildFfnLifecycle(const InspectionSnapshot& s, const LifecycleLayer& x,
                                     const LifecycleChoice& c);

/// Figure 8: the attention of lifecycle layer `x`, head `c.head`: the block's input and what its norm
/// writes, that head's q and k before the rotary embedding and its v, the scores (before the mask) and the
/// probabilities. The token's row and key column, its channels, and the two key dimensions with the
/// largest |k| at the token (marked in q and k) are marked.
QVector<GridPanel> buildAttentionLifecycle(const InspectionSnapshot& s, const LifecycleLayer& x,
                                           const LifecycleChoice& c);

} // namespace outlierlens
