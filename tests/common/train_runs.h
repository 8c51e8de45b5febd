#pragma once
// What the training tests share: the tiny data they train on, and the losses a run logged, read strictly
// (a torn or malformed line fails the test with an exception instead of being skipped, as the app's
// reader would).

#include <QString>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <fstream>
#include <map>
#include <string>

namespace outlierlens::test {

inline const std::string kTrain = OUTLIERLENS_TEST_DATA "/train/tiny_train.txt";
inline const std::string kValid = OUTLIERLENS_TEST_DATA "/train/tiny_valid.txt";
inline const std::string kVocab = OUTLIERLENS_SOURCE_DIR "/sample_data/bert/vocab.txt";

/// step -> loss of every training (progress) line of a run's metrics.jsonl.
inline std::map<std::int64_t, double> losses(const QString& runDir)
{
    std::map<std::int64_t, double> out;
    std::ifstream in((runDir + "/metrics.jsonl").toStdString());
    std::string line;
    while (std::getline(in, line)) {
        const nlohmann::json j = nlohmann::json::parse(line);
        if (!j.contains("type")) out[j["step"].get<std::int64_t>()] = j["loss"].get<double>();
    }
    return out;
}

} // namespace outlierlens::test
