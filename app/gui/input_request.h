#pragma once
// Plain value (any thread).

#include <QString>

namespace outlierlens {

class InspectionController;

/// The input the user chose last, so that other models (compare, teaching) can run it too.
struct InputRequest
{
    enum class Kind { None, Text, Image, Synthetic };
    Kind kind = Kind::None;
    QString text, pair;   ///< Text
    QString path, credit; ///< Image
    quint64 seed = 0;     ///< Synthetic

    /// Sends this input to `controller` (nothing for Kind::None).
    void sendTo(InspectionController& controller) const;
};

} // namespace outlierlens
