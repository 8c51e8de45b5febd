// The Bigram-Backcopy task (tasks/data/bigram_backcopy.h) and the demo models trained on it: sequences
// follow the rule exactly (checked against an oracle written here from the task's definition), are a
// pure function of (seed, index), turn back into the same ids through the tokenizer; bad tokenizers and
// configs fail clearly; a short clm run on generated data learns and resumes exactly.

#include "analysis/showcase.h"
#include "common/error.h"
#include "tasks/config/train_config.h"
#include "tasks/data/bigram_backcopy.h"
#include "text/decoder_tokenizer.h"
#include "train/trainer.h"

#include <QTemporaryDir>
#include <QtTest>

#include <nlohmann/json.hpp>
#include <torch/torch.h>

#include <fstream>
#include <map>

using namespace outlierlens;

namespace {

const std::string kBytes = OUTLIERLENS_SOURCE_DIR "/sample_data/tokenizers/bytes";
const std::string kBpe = OUTLIERLENS_SOURCE_DIR "/sample_data/tokenizers/wiki-bpe-1k";
const std::string kWiki = OUTLIERLENS_SOURCE_DIR "/sample_data/text/wiki_en_valid.txt";

std::string expectError(const std::function<void()>& f)
{
    try {
        f();
    } catch (const Error& e) {
        return e.what();
    }
    return "(no error)";
}

std::string writeFile(const QTemporaryDir& dir, const char* name, const std::string& text)
{
    const std::string path = (dir.path() + "/" + name).toStdString();
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

} // namespace

class TstBigramBackcopy : public QObject
{
    Q_OBJECT

private:
    QTemporaryDir m_dir;

private Q_SLOTS:
    void initTestCase()
    {
        QVERIFY(m_dir.isValid());
        torch::set_num_threads(1);
    }

    /// A text whose chain is deterministic (a -> b -> c -> d -> a, each line "abcd" repeated) with one
    /// trigger ('a', the most frequent by one): every position is either the chain's successor or, right
    /// after the trigger, a copy of the character two back.
    void sequencesFollowTheRule()
    {
        std::string text;
        for (int line = 0; line < 50; ++line)
            text += std::string(line == 0 ? "a" : "") + "abcdabcdabcdabcd\n";
        // "aabcd...": one extra 'a' makes 'a' the most frequent character (and adds the pair a -> a,
        // 1 of about 200 pairs from 'a', drawn now and then at position 2, which the oracle allows).
        const std::string file = writeFile(m_dir, "chain.txt", text);
        const auto tok = DecoderTokenizer::fromModelDir(kBytes);
        const BigramBackcopy bb = BigramBackcopy::build(file, *tok, 24, 4, 1);
        QCOMPARE(bb.alphabet(), std::string("abcd"));
        QCOMPARE(bb.triggers(), 1);
        QCOMPARE(bb.length(), 24);

        std::map<std::int64_t, char> charOf;
        for (const char ch : bb.alphabet())
            charOf[tok->encode(std::string(1, ch), std::nullopt, 0, false).inputIds.at(0)] = ch;
        const torch::Tensor ids = bb.sample(7, 3, 200);
        QCOMPARE(ids.sizes(), (torch::IntArrayRef{200, 24}));
        int copies = 0, unusual = 0;
        const auto successor = [](char c) { return c == 'd' ? 'a' : char(c + 1); };
        for (int i = 0; i < 200; ++i) {
            QCOMPARE(ids[i][0].item<std::int64_t>(), tok->bosId());
            std::string s;
            for (int t = 1; t < 24; ++t) {
                const auto found = charOf.find(ids[i][t].item<std::int64_t>());
                QVERIFY2(found != charOf.end(), "a token outside the alphabet");
                s.push_back(found->second);
            }
            for (std::size_t t = 1; t < s.size(); ++t) { // s[t] is position t + 1
                if (t >= 2 && s[t - 1] == 'a') {
                    QCOMPARE(s[t], s[t - 2]);
                    ++copies;
                } else if (s[t] != successor(s[t - 1])) {
                    ++unusual; // smoothing (1e-3) and the single a -> a pair
                }
            }
            // text() gives the characters back, and the tokenizer turns them into the same ids.
            QCOMPARE(bb.text(ids[i]), s);
            const std::vector<std::int64_t> again = tok->encode(s).inputIds;
            QVERIFY(torch::equal(torch::tensor(again), ids[i]));
        }
        QVERIFY2(copies > 500, qPrintable(QString::number(copies)));
        QVERIFY2(unusual < 20, qPrintable(QString::number(unusual)));
    }

    void samplesArePureFunctionsOfSeedAndIndex()
    {
        const auto tok = DecoderTokenizer::fromModelDir(kBytes);
        const BigramBackcopy bb = BigramBackcopy::build(kWiki, *tok, 64);
        QCOMPARE(int(bb.alphabet().size()), 63);
        QCOMPARE(bb.alphabet()[0], ' '); // the most frequent character of English text
        const torch::Tensor a = bb.sample(1, 5, 8);
        QVERIFY(torch::equal(a, bb.sample(1, 5, 8)));
        QVERIFY(torch::equal(a.narrow(0, 0, 3), bb.sample(1, 5, 3))); // a batch is its rows
        QVERIFY(!torch::equal(a, bb.sample(1, 6, 8)));
        QVERIFY(!torch::equal(a, bb.sample(2, 5, 8)));
        QVERIFY(!torch::equal(bb.sample(1, -1, 8), bb.sample(1, 1, 8)));
        // The first characters follow the text's character frequencies: ' ' is drawn most often.
        const torch::Tensor first = bb.sample(3, 0, 4000).select(1, 1);
        const std::int64_t space = tok->encode(" ", std::nullopt, 0, false).inputIds.at(0);
        const double share = first.eq(space).to(torch::kDouble).mean().item<double>();
        QVERIFY2(share > 0.12 && share < 0.22, qPrintable(QString::number(share)));
    }

    void badInputsFailClearly()
    {
        const auto bytes = DecoderTokenizer::fromModelDir(kBytes);
        const auto bpe = DecoderTokenizer::fromModelDir(kBpe);
        const QString merged =
            QString::fromStdString(expectError([&] { BigramBackcopy::build(kWiki, *bpe, 64); }));
        QVERIFY2(merged.contains("not one per character"), qPrintable(merged));
        QVERIFY(QString::fromStdString(expectError([&] {
                    BigramBackcopy::build(kWiki, *bytes, 3);
                })).contains("at least 4 tokens"));
        const std::string few = writeFile(m_dir, "few.txt", "abcabc\n");
        QVERIFY(QString::fromStdString(expectError([&] {
                    BigramBackcopy::build(few, *bytes, 16);
                })).contains("3 distinct printable ASCII characters"));
        QVERIFY(QString::fromStdString(expectError([&] {
                    BigramBackcopy::build(m_dir.path().toStdString() + "/none.txt", *bytes, 16);
                })).contains("none.txt"));

        TrainConfig c;
        c.task = TrainTask::MaskedLm;
        c.output = "runs/x";
        c.corpus = kWiki;
        c.clmData = ClmData::BigramBackcopy;
        QVERIFY(QString::fromStdString(expectError([&] { validateTrainConfig(c); })).contains("clm_data"));
        c.clmData = ClmData::Text;
        c.initScheme = InitScheme::PyTorch;
        QVERIFY(QString::fromStdString(expectError([&] { validateTrainConfig(c); })).contains("init_scheme"));
        c.task = TrainTask::CausalLm;
        c.tokenizer = kBytes;
        c.clmData = ClmData::BigramBackcopy;
        c.validCorpus = kWiki;
        QVERIFY(
            QString::fromStdString(expectError([&] { validateTrainConfig(c); })).contains("valid_corpus"));
        c.validCorpus.clear();
        // A model continued from init keeps its weights: no new init scheme.
        c.init = "runs/old/final";
        c.tokenizer.clear();
        c.preset.clear();
        QVERIFY(QString::fromStdString(expectError([&] { validateTrainConfig(c); })).contains("init_scheme"));
        c.init.clear();
        c.tokenizer = kBytes;
        validateTrainConfig(c);
        // run.json keeps the new keys.
        c.tieWordEmbeddings = false;
        const TrainConfig back = parseTrainConfig(trainConfigToJson(c), "run.json");
        QVERIFY(back.clmData == ClmData::BigramBackcopy);
        QVERIFY(back.initScheme == InitScheme::PyTorch);
        QCOMPARE(back.tieWordEmbeddings, false);
    }

    /// The demo-backcopy preset, shrunk: the loss falls well below the uniform guess, the model folder
    /// carries its sample inputs, and a run stopped at step 20 resumes onto the same losses.
    void shortRunLearnsAndResumes()
    {
        TrainConfig c = presetConfig("demo-backcopy");
        c.corpus = kWiki;
        c.tokenizer = kBytes;
        c.numLayers = 1;
        c.seqLength = 32;
        c.steps = 40;
        c.warmupSteps = 4;
        c.batchSize = 8;
        c.logEvery = 1;
        c.evalEvery = 1000;
        c.checkpointEvery = 20;
        c.threads = 1;
        c.precision = Precision::Fp32;
        const auto run = [&](const std::string& out, bool resume, std::int64_t stopAfter) {
            c.output = out;
            std::map<std::int64_t, double> losses;
            std::atomic<bool> stop{false};
            runTraining(c, resume, stop, [&](const std::string& line) {
                const nlohmann::json j = nlohmann::json::parse(line);
                if (j["type"] == "progress") {
                    losses[j["step"].get<std::int64_t>()] = j["loss"].get<double>();
                    if (j["step"].get<std::int64_t>() == stopAfter) stop = true;
                }
            });
            return losses;
        };
        const std::string whole = (m_dir.path() + "/whole").toStdString();
        const auto full = run(whole, false, -1);
        QVERIFY2(full.at(40) < 0.75 * std::log(260.0), qPrintable(QString::number(full.at(40))));
        std::ifstream samples(whole + "/final/sample_inputs.txt");
        std::string line;
        QVERIFY(std::getline(samples, line));
        QCOMPARE(int(line.size()), 31);
        // The trainer stores where the app opens the model: the same choice computed afresh.
        const std::optional<outlierlens::Showcase> stored = outlierlens::readShowcase(whole + "/final");
        QVERIFY2(stored, "train wrote no showcase.json");
        const outlierlens::Showcase again = outlierlens::computeShowcase(whole + "/final");
        QCOMPARE(stored->layer, again.layer);
        QCOMPARE(stored->head, again.head);
        QCOMPARE(stored->input, again.input);

        const std::string parts = (m_dir.path() + "/parts").toStdString();
        run(parts, false, 20);
        const auto resumed = run(parts, true, -1);
        for (std::int64_t step : {25, 30, 40})
            QCOMPARE(resumed.at(step), full.at(step));
    }
};

QTEST_GUILESS_MAIN(TstBigramBackcopy)
#include "tst_bigram_backcopy.moc"
