// safetensors reader and writer: values from a file written by an independent writer (torch +
// the fixture script), malformed files built byte by byte, and writer round trips.

#include "common/error.h"
#include "io/safetensors.h"
#include "io/state_dict.h"

#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <QDir>
#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <cmath>
#include <fstream>
#include <string>
#include <sys/stat.h>

using outlierlens::StateDict;

namespace {

std::string fixture(const std::string& relative)
{
    return std::string(OUTLIERLENS_TEST_DATA) + "/" + relative;
}

// Tensors from a sidecar written by make_bin_fixtures.py: {"tensors": {name: {dtype, shape, values}}}.
StateDict expectedFromJson(const std::string& path)
{
    std::ifstream in(path);
    const nlohmann::json doc = nlohmann::json::parse(in);
    StateDict result;
    for (const auto& [name, e] : doc.at("tensors").items()) {
        const std::vector<std::int64_t> shape = e.at("shape").get<std::vector<std::int64_t>>();
        const std::string dtype = e.at("dtype").get<std::string>();
        torch::Tensor t;
        if (dtype == "float32")
            t = torch::tensor(e.at("values").get<std::vector<float>>(), torch::kFloat);
        else if (dtype == "int64")
            t = torch::tensor(e.at("values").get<std::vector<std::int64_t>>(), torch::kLong);
        else
            t = torch::tensor(e.at("values").get<std::vector<std::uint8_t>>(), torch::kByte).to(torch::kBool);
        result.emplace(name, t.reshape(shape));
    }
    return result;
}

void compareStateDicts(const StateDict& actual, const StateDict& expected)
{
    QCOMPARE(actual.size(), expected.size());
    for (const auto& [name, want] : expected) {
        const auto it = actual.find(name);
        QVERIFY2(it != actual.end(), ("missing tensor " + name).c_str());
        const torch::Tensor& got = it->second;
        QVERIFY2(got.scalar_type() == want.scalar_type(), name.c_str());
        QVERIFY2(got.sizes() == want.sizes(), name.c_str());
        QVERIFY2(got.is_contiguous(), name.c_str());
        QVERIFY2(torch::equal(got, want), name.c_str());
    }
}

QByteArray le64(std::uint64_t v)
{
    QByteArray b(8, '\0');
    for (int i = 0; i < 8; ++i)
        b[i] = char((v >> (8 * i)) & 0xff);
    return b;
}

// A file with an explicit header length, header text and data bytes.
QByteArray file(std::uint64_t headerLength, const QByteArray& header, const QByteArray& data)
{
    return le64(headerLength) + header + data;
}

QByteArray file(const QByteArray& header, const QByteArray& data)
{
    return file(std::uint64_t(header.size()), header, data);
}

const QByteArray kSixteenBytes(16, '\x01');

} // namespace

class TstSafetensors : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    // dtypes.safetensors was written by the fixture script's own writer from torch tensors.
    void readsEveryDtype()
    {
        std::map<std::string, std::string> metadata;
        const StateDict tensors = outlierlens::readSafetensors(fixture("io/dtypes.safetensors"), &metadata);
        compareStateDicts(tensors, expectedFromJson(fixture("io/dtypes.json")));
        const std::map<std::string, std::string> wanted{{"format", "pt"}, {"source", "make_bin_fixtures.py"}};
        QVERIFY(metadata == wanted);
    }

    // A file written by Hugging Face's safetensors library.
    void readsHuggingFaceFile()
    {
        const StateDict tensors = outlierlens::readSafetensors(fixture("bert/hf/model.safetensors"));
        const auto it = tensors.find("bert.embeddings.word_embeddings.weight");
        QVERIFY(it != tensors.end());
        QCOMPARE(it->second.sizes().vec(), (std::vector<std::int64_t>{2048, 128}));
        for (const auto& [name, t] : tensors)
            QVERIFY2(t.scalar_type() == torch::kFloat && t.is_contiguous(), name.c_str());
        QVERIFY(tensors.count("classifier.weight") == 1);
    }

    void missingFile()
    {
        const std::string path =
            QString(m_dir.path() + QStringLiteral("/does-not-exist.safetensors")).toStdString();
        try {
            outlierlens::readSafetensors(path);
            QFAIL("no error");
        } catch (const outlierlens::Error& e) {
            QVERIFY(std::string(e.what()).find(path) != std::string::npos);
        }
    }

    void badFile_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("expected"); // part of the error message

        const QByteArray good = R"({"a":{"dtype":"F32","shape":[2,2],"data_offsets":[0,16]}})";
        QTest::newRow("empty file") << QByteArray() << "too short";
        QTest::newRow("truncated length") << QByteArray(5, '\x10') << "too short";
        QTest::newRow("truncated data") << file(good, kSixteenBytes.left(12)) << "beyond";
        QTest::newRow("truncated header") << file(std::uint64_t(good.size()), good.left(20), {}) << "exceeds";
        QTest::newRow("header length beyond file") << file(1000, good, kSixteenBytes) << "exceeds";
        QTest::newRow("header length 2^63") << file(std::uint64_t(1) << 63, good, kSixteenBytes) << "exceeds";
        QTest::newRow("header length 2^64-1") << file(~std::uint64_t(0), good, kSixteenBytes) << "exceeds";
        QTest::newRow("zero header length") << file(0, {}, kSixteenBytes) << "malformed";
        QTest::newRow("malformed JSON")
            << file(R"({"a": {"dtype": "F32", "shape": [2,)", kSixteenBytes) << "malformed";
        QTest::newRow("invalid UTF-8") << file("{\"\xff\xfe\":1}", {}) << "malformed";
        QTest::newRow("header not an object") << file("[1, 2, 3]", {}) << "not a JSON object";
        QTest::newRow("entry not an object") << file(R"({"a": 5})", {}) << "expected an object";
        QTest::newRow("offsets outside data")
            << file(R"({"a":{"dtype":"F32","shape":[16],"data_offsets":[0,64]}})", kSixteenBytes) << "beyond";
        QTest::newRow("offsets far outside data")
            << file(
                   R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[18446744073709551600,18446744073709551615]}})",
                   kSixteenBytes)
            << "beyond";
        QTest::newRow("begin after end")
            << file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}})", kSixteenBytes)
            << "after end";
        QTest::newRow("negative offset")
            << file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[-4,0]}})", kSixteenBytes)
            << "data_offsets";
        QTest::newRow("three offsets")
            << file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4,8]}})", kSixteenBytes)
            << "data_offsets";
        QTest::newRow("missing offsets")
            << file(R"({"a":{"dtype":"F32","shape":[1]}})", kSixteenBytes) << "data_offsets";
        QTest::newRow("unknown dtype")
            << file(R"({"a":{"dtype":"Q7","shape":[4],"data_offsets":[0,16]}})", kSixteenBytes)
            << "unsupported dtype 'Q7'";
        QTest::newRow("non-string dtype")
            << file(R"({"a":{"dtype":4,"shape":[4],"data_offsets":[0,16]}})", kSixteenBytes) << "dtype";
        QTest::newRow("shape/size mismatch")
            << file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", kSixteenBytes)
            << "needs 12 bytes, found 16";
        QTest::newRow("negative shape")
            << file(R"({"a":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", kSixteenBytes)
            << "not a non-negative integer";
        QTest::newRow("fractional shape")
            << file(R"({"a":{"dtype":"F32","shape":[4.0],"data_offsets":[0,16]}})", kSixteenBytes)
            << "not a non-negative integer";
        QTest::newRow("string shape")
            << file(R"({"a":{"dtype":"F32","shape":["4"],"data_offsets":[0,16]}})", kSixteenBytes)
            << "not a non-negative integer";
        QTest::newRow("shape product overflows")
            << file(
                   R"({"a":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,16]}})",
                   kSixteenBytes)
            << "more than 2^64";
        // (2^62 + 1) * 4 bytes wraps around to 4 in 64-bit arithmetic.
        QTest::newRow("byte size wraps around")
            << file(R"({"a":{"dtype":"F32","shape":[4611686018427387905],"data_offsets":[0,4]}})",
                    kSixteenBytes)
            << "more than 2^64";
        QTest::newRow("duplicate names") << file(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                                                 R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                                                 kSixteenBytes)
                                         << "more than once";
        QTest::newRow("overlapping tensors")
            << file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})",
                    kSixteenBytes)
            << "overlap";
        // Hugging Face's reader refuses both: bytes that belong to no tensor mean an edited file.
        QTest::newRow("gap before a tensor")
            << file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                    R"("b":{"dtype":"F32","shape":[1],"data_offsets":[12,16]}})",
                    kSixteenBytes)
            << "4 data bytes before tensor 'b' belong to no tensor";
        QTest::newRow("bytes after the last tensor")
            << file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})", kSixteenBytes)
            << "the tensors cover 12 of the 16 data bytes";
        QTest::newRow("data not at the start")
            << file(R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[4,16]}})", kSixteenBytes)
            << "4 data bytes before tensor 'a'";
        QTest::newRow("control characters in a name")
            << file(R"({"a\nb\u0000":{"dtype":"Q7","shape":[4],"data_offsets":[0,16]}})", kSixteenBytes)
            << "tensor 'a\\x0ab\\x00'";
        QTest::newRow("metadata not strings")
            << file(R"({"__metadata__":{"format":1},"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})",
                    kSixteenBytes)
            << "__metadata__";
    }

    void badFile()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, expected);
        const QString path = m_dir.path() + "/bad.safetensors";
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        QCOMPARE(f.write(bytes), bytes.size());
        f.close();
        try {
            outlierlens::readSafetensors(path.toStdString());
            QFAIL("no error");
        } catch (const outlierlens::Error& e) {
            const QString message = QString::fromUtf8(e.what());
            QVERIFY2(message.startsWith(path), qPrintable(message));
            QVERIFY2(message.contains(expected), qPrintable(message));
            QVERIFY2(!message.contains('\n'), qPrintable(message));
        }
    }

    // 200,000 entries took minutes when each nested object made the parser rescan its parent (a
    // quadratic hang); read in linear time it takes about a second, far inside the test's timeout.
    void headerOfManyEntriesIsReadInLinearTime()
    {
        QByteArray header = "{";
        const int n = 200000;
        for (int i = 0; i < n; ++i)
            header += "\"t" + QByteArray::number(i) +
                      "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},";
        header += R"("a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})";
        const QString path = m_dir.path() + "/many.safetensors";
        QFile f(path);
        QVERIFY(f.open(QIODevice::WriteOnly | QIODevice::Truncate));
        f.write(file(header, kSixteenBytes));
        f.close();
        const StateDict read = outlierlens::readSafetensors(path.toStdString());
        QCOMPARE(read.size(), std::size_t(n + 1));
        QCOMPARE(read.at("a").numel(), 4);
    }

    // A FIFO would block the open until a writer came; it is refused at once, by every reader.
    void fifoIsRefusedWithoutWaiting()
    {
        const QString path = m_dir.path() + "/model.safetensors";
        QFile::remove(path);
        QCOMPARE(::mkfifo(path.toLocal8Bit().constData(), 0600), 0);
        for (const auto& read : {+[](const std::string& p) { outlierlens::readSafetensors(p); },
                                 +[](const std::string& p) { outlierlens::mapSafetensors(p); },
                                 +[](const std::string& p) { outlierlens::readStateDict(p); }}) {
            try {
                read(path.toStdString());
                QFAIL("no error");
            } catch (const outlierlens::Error& e) {
                QCOMPARE(QString::fromUtf8(e.what()), path + ": not a regular file (a FIFO)");
            }
        }
        QFile::remove(path);
    }

    void roundTripFloat32()
    {
        torch::manual_seed(7);
        StateDict in;
        in["weight"] = torch::randn({5, 3});
        in["transposed"] = torch::randn({4, 6}).t(); // non-contiguous input
        in["scalar"] = torch::tensor(2.5f);
        in["empty"] = torch::empty({0, 7});
        in["double"] = torch::randn({3}, torch::kDouble);
        in["ids"] = torch::tensor({-5, 0, 1 << 30}, torch::kInt);
        in["big"] = torch::tensor({std::int64_t(1) << 62, std::int64_t(-3)}, torch::kLong);
        in["mask"] = torch::tensor({1, 0, 1}, torch::kByte).to(torch::kBool);
        const std::string path = QString(m_dir.path() + QStringLiteral("/f32.safetensors")).toStdString();
        outlierlens::writeSafetensors(path, in);

        const StateDict out = outlierlens::readSafetensors(path);
        StateDict expected;
        for (const auto& [name, t] : in) {
            if (c10::isFloatingType(t.scalar_type()))
                expected[name] = t.to(torch::kFloat).contiguous();
            else if (t.scalar_type() == torch::kBool)
                expected[name] = t;
            else
                expected[name] = t.to(torch::kLong);
        }
        compareStateDicts(out, expected);
    }

    void roundTripFloat16()
    {
        torch::manual_seed(8);
        StateDict in;
        in["a"] = torch::randn({64, 32}) * 10;
        in["b"] = torch::rand({100}) * 60000; // up to the top of fp16's range
        in["ids"] = torch::arange(10, torch::kLong);
        const std::string path = QString(m_dir.path() + QStringLiteral("/f16.safetensors")).toStdString();
        outlierlens::writeSafetensors(path, in, outlierlens::SafetensorsDtype::Float16);

        const StateDict out = outlierlens::readSafetensors(path);
        QCOMPARE(out.size(), in.size());
        QVERIFY(torch::equal(out.at("ids"), in.at("ids")));
        for (const char* name : {"a", "b"}) {
            const torch::Tensor& got = out.at(name);
            QVERIFY(got.scalar_type() == torch::kFloat);
            // Exactly what rounding to fp16 gives, and within half an fp16 ulp (2^-11 relative).
            QVERIFY(torch::equal(got, in.at(name).to(torch::kHalf).to(torch::kFloat)));
            const torch::Tensor err = (got - in.at(name)).abs();
            const torch::Tensor bound = in.at(name).abs() * std::ldexp(1.0, -11) + std::ldexp(1.0, -25);
            QVERIFY(err.le(bound).all().item<bool>());
        }
        QCOMPARE(headerText(path).find("\"F16\"") != std::string::npos, true);
    }

    void headerIsPadded()
    {
        for (int n = 1; n <= 9; ++n) { // different name lengths give different header lengths
            StateDict in;
            in[std::string(std::size_t(n), 'x')] = torch::ones({1});
            const std::string path = QString(m_dir.path() + QStringLiteral("/pad.safetensors")).toStdString();
            outlierlens::writeSafetensors(path, in);
            const std::string header = headerText(path);
            QCOMPARE(header.size() % 8, std::size_t(0));
            QVERIFY(nlohmann::json::parse(header).is_object()); // trailing spaces are valid JSON
        }
    }

    void metadataRoundTrip()
    {
        const std::map<std::string, std::string> metadata{
            {"format", "pt"}, {"checkpoint", "run 3, step 1200"}, {"note", "Grüße \"quoted\" ✓"}};
        StateDict in;
        in["w"] = torch::ones({2, 2});
        const std::string path = QString(m_dir.path() + QStringLiteral("/meta.safetensors")).toStdString();
        outlierlens::writeSafetensors(path, in, outlierlens::SafetensorsDtype::Float32, metadata);
        std::map<std::string, std::string> read{{"stale", "entry"}};
        outlierlens::readSafetensors(path, &read);
        QVERIFY(read == metadata);

        outlierlens::writeSafetensors(path, in);
        outlierlens::readSafetensors(path, &read);
        QVERIFY(read.empty());
    }

    // A failed write leaves neither a partial file nor a temporary one, and keeps the old file.
    void failedWriteLeavesNothing()
    {
        QTemporaryDir dir;
        const std::string path = QString(dir.path() + QStringLiteral("/model.safetensors")).toStdString();
        StateDict good;
        good["w"] = torch::ones({3});
        outlierlens::writeSafetensors(path, good);
        const QByteArray before = readAll(path);

        StateDict bad = good;
        bad["z"] = torch::ones({2}, torch::kComplexFloat);
        try {
            outlierlens::writeSafetensors(path, bad);
            QFAIL("no error");
        } catch (const outlierlens::Error& e) {
            const std::string message = e.what();
            QVERIFY2(message.find(path) != std::string::npos && message.find("'z'") != std::string::npos,
                     message.c_str());
        }
        QCOMPARE(readAll(path), before);
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden), QStringList{"model.safetensors"});

        const std::string missingDir =
            QString(dir.path() + QStringLiteral("/no/such/dir/model.safetensors")).toStdString();
        QVERIFY_THROWS_EXCEPTION(outlierlens::Error, outlierlens::writeSafetensors(missingDir, good));
        QCOMPARE(QDir(dir.path()).entryList(QDir::AllEntries | QDir::NoDotAndDotDot | QDir::Hidden),
                 QStringList{"model.safetensors"});
    }

private:
    static QByteArray readAll(const std::string& path)
    {
        QFile f(QString::fromStdString(path));
        return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
    }

    static std::string headerText(const std::string& path)
    {
        const QByteArray bytes = readAll(path);
        std::uint64_t n = 0;
        for (int i = 7; i >= 0; --i)
            n = (n << 8) | std::uint8_t(bytes[i]);
        return bytes.mid(8, qsizetype(n)).toStdString();
    }

    QTemporaryDir m_dir;
};

QTEST_APPLESS_MAIN(TstSafetensors)
#include "tst_safetensors.moc"
