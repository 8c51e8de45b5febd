// PyTorch .bin reader: parity with the safetensors copies of the upstream fixtures, torch.save edge
// cases written by the real torch (tests/fixtures/io/make_bin_fixtures.py), files that must be
// refused, and malformed archives and pickles built here byte by byte.

#include "common/error.h"
#include "io/safetensors.h"
#include "io/state_dict.h"
#include "io/torch_bin.h"

#include <caffe2/serialize/inline_container.h>
#include <nlohmann/json.hpp>
#include <torch/types.h>

#include <QFile>
#include <QTemporaryDir>
#include <QtTest>

#include <fstream>
#include <random>
#include <string>

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

// --- Pickle programs, opcode by opcode (names as in Python's pickletools) -----------------------

std::string u32(std::uint32_t v)
{
    std::string s(4, '\0');
    for (int i = 0; i < 4; ++i)
        s[std::size_t(i)] = char((v >> (8 * i)) & 0xff);
    return s;
}

std::string str(const std::string& s) // BINUNICODE
{
    return "X" + u32(std::uint32_t(s.size())) + s;
}

std::string integer(std::int64_t v) // LONG1 with 8 bytes: any int64
{
    std::string s = "\x8a\x08";
    for (int i = 0; i < 8; ++i)
        s.push_back(char((std::uint64_t(v) >> (8 * i)) & 0xff));
    return s;
}

std::string global(const std::string& module, const std::string& name)
{
    return "c" + module + "\n" + name + "\n";
}

std::string intTuple(const std::vector<std::int64_t>& v)
{
    std::string s = "(";
    for (std::int64_t x : v)
        s += integer(x);
    return s + "t";
}

// ('storage', torch.FloatStorage, key, 'cpu', numel) -> BINPERSID
std::string storageRef(const std::string& key, std::int64_t numel, const std::string& type = "FloatStorage")
{
    return "((" + str("storage") + global("torch", type) + str(key) + str("cpu") + integer(numel) + "tQ";
}

// _rebuild_tensor_v2(storage, offset, size, stride, False, {})
std::string tensor(const std::string& key, std::int64_t numel, std::int64_t offset,
                   const std::vector<std::int64_t>& size, const std::vector<std::int64_t>& stride)
{
    return global("torch._utils", "_rebuild_tensor_v2") + storageRef(key, numel) + integer(offset) +
           intTuple(size) + intTuple(stride) + "\x89}tR";
}

std::string program(const std::string& body)
{
    return "\x80\x02" + body + ".";
}

// {"w": tensor}
std::string stateDict(const std::string& tensorPickle)
{
    return program("}" + str("w") + tensorPickle + "s");
}

struct Record
{
    std::string name;
    std::string data;
};

// A zip archive as torch.save writes it (archive/<name> records plus archive/version).
QByteArray archive(const std::vector<Record>& records)
{
    std::string bytes;
    caffe2::serialize::PyTorchStreamWriter writer([&](const void* data, std::size_t n) {
        bytes.append(static_cast<const char*>(data), n);
        return n;
    });
    for (const Record& r : records)
        writer.writeRecord(r.name, r.data.data(), r.data.size());
    writer.writeEndOfFile();
    return QByteArray(bytes.data(), qsizetype(bytes.size()));
}

std::string floats(std::initializer_list<float> values)
{
    std::string s;
    for (float v : values)
        s.append(reinterpret_cast<const char*>(&v), sizeof(v));
    return s;
}

QByteArray readAll(const std::string& path)
{
    QFile f(QString::fromStdString(path));
    return f.open(QIODevice::ReadOnly) ? f.readAll() : QByteArray();
}

} // namespace

class TstTorchBin : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void initTestCase() { QVERIFY(m_dir.isValid()); }

    // pytorch_model.bin (torch.save) and model.safetensors (HF safetensors) of the same model.
    void parityWithSafetensors_data()
    {
        QTest::addColumn<QString>("folder");
        QTest::newRow("bert/hf") << "bert/hf";
        QTest::newRow("vit/timm") << "vit/timm";
        QTest::newRow("vit/hf") << "vit/hf";
        QTest::newRow("bert-gated-linear") << "variants/bert-gated-linear/hf";
    }
    void parityWithSafetensors()
    {
        QFETCH(QString, folder);
        const std::string dir = fixture(folder.toStdString());
        const StateDict bin = outlierlens::readTorchBin(dir + "/pytorch_model.bin");
        const StateDict st = outlierlens::readSafetensors(dir + "/model.safetensors");
        QVERIFY(bin.size() > 10);
        compareStateDicts(bin, st);
    }

    // Shared storages, offsets, strides, fp16/bf16/fp64, integer types, bool, empty, 0-d, Parameter,
    // _metadata; saved with the default protocol 2 and with protocol 4.
    void torchSaveEdgeCases_data()
    {
        QTest::addColumn<QString>("file");
        QTest::newRow("protocol 2") << "io/edge_cases.bin";
        QTest::newRow("protocol 4") << "io/edge_cases_protocol4.bin";
    }
    void torchSaveEdgeCases()
    {
        QFETCH(QString, file);
        const StateDict tensors = outlierlens::readTorchBin(fixture(file.toStdString()));
        compareStateDicts(tensors, expectedFromJson(fixture("io/edge_cases.json")));
        // Views of one storage come out as independent tensors.
        tensors.at("shared.full").zero_();
        QVERIFY(tensors.at("shared.row").abs().sum().item<float>() > 0);
    }

    void refusedFiles_data()
    {
        QTest::addColumn<QString>("file");
        QTest::addColumn<QString>("expected"); // part of the error message
        QTest::newRow("nested dict") << "io/nested_dict.bin"
                                     << "entry 'encoder' holds a value of type dict";
        QTest::newRow("non-tensor value") << "io/non_tensor_value.bin"
                                          << "entry 'step' holds a value of type int";
        QTest::newRow("os.system") << "io/disallowed_global.bin"
                                   << "pickle global posix.system is not allowed";
        QTest::newRow("legacy format") << "io/legacy.bin"
                                       << "legacy PyTorch format";
        QTest::newRow("safetensors file") << "io/dtypes.safetensors"
                                          << "not a PyTorch checkpoint";
    }
    void refusedFiles()
    {
        QFETCH(QString, file);
        QFETCH(QString, expected);
        expectError(fixture(file.toStdString()), expected);
    }

    // A zip whose end record defers to the zip64 end record (as archives above 4 GB do).
    void zip64EndRecordLoads()
    {
        QByteArray bytes = readAll(fixture("io/edge_cases.bin"));
        const qsizetype eocd = bytes.lastIndexOf(QByteArray("PK\x05\x06"));
        QVERIFY(eocd > 0 && bytes.lastIndexOf(QByteArray("PK\x06\x06")) > 0);
        for (qsizetype i = eocd + 8; i < eocd + 20; ++i) // entry counts, directory size and offset
            bytes[i] = '\xff';
        const StateDict tensors = outlierlens::readTorchBin(write("zip64.bin", bytes));
        compareStateDicts(tensors, expectedFromJson(fixture("io/edge_cases.json")));
    }

    // The pickle builder used below is right: a hand-made archive loads.
    void handMadeArchiveLoads()
    {
        const QByteArray bytes = archive({{"data.pkl", stateDict(tensor("0", 6, 1, {2, 2}, {1, 2}))},
                                          {"data/0", floats({0, 1, 2, 3, 4, 5})}});
        const StateDict tensors = outlierlens::readTorchBin(write("handmade.bin", bytes));
        QCOMPARE(tensors.size(), std::size_t(1));
        QVERIFY(torch::equal(tensors.at("w"), torch::tensor({1.f, 3.f, 2.f, 4.f}).reshape({2, 2})));
    }

    void badArchive_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("expected"); // part of the error message

        const QByteArray good = readAll(fixture("io/edge_cases.bin"));
        const std::string fourFloats = floats({1, 2, 3, 4});
        std::mt19937 rng(42);
        QByteArray random(4096, '\0');
        for (char& c : random)
            c = char(rng() & 0xff);
        random[0] = 'R';

        QTest::newRow("empty file") << QByteArray() << "empty";
        QTest::newRow("random bytes") << random << "not a PyTorch checkpoint";
        QTest::newRow("zip magic then random bytes")
            << QByteArray("PK\x03\x04") + random << "end-of-central-directory";
        QTest::newRow("truncated to half") << good.left(good.size() / 2) << "end-of-central-directory";
        QTest::newRow("truncated by 30 bytes") << good.left(good.size() - 30) << "zip";
        QTest::newRow("central directory cut") << good.left(good.size() - 200) + good.right(22) << "zip";
        QTest::newRow("no data.pkl") << archive({{"weights.txt", "hello"}}) << "no data.pkl";
        QTest::newRow("unknown opcode")
            << archive({{"data.pkl", "\x80\x02\xff."}}) << "unknown pickle opcode 0xff";
        QTest::newRow("unsupported opcode")
            << archive({{"data.pkl", "\x80\x02I1\n."}}) << "unsupported pickle opcode INT";
        QTest::newRow("no STOP") << archive({{"data.pkl", "\x80\x02}"}}) << "without STOP";
        QTest::newRow("empty pickle") << archive({{"data.pkl", ""}}) << "without STOP";
        QTest::newRow("truncated string")
            << archive({{"data.pkl", "\x80\x02X" + u32(16) + "abc"}}) << "truncated";
        QTest::newRow("huge string length")
            << archive({{"data.pkl", std::string("\x80\x02\x8d\xff\xff\xff\xff\xff\xff\xff\x7f", 11)}})
            << "longer than the limit";
        QTest::newRow("undefined memo") << archive({{"data.pkl", "\x80\x02h\x05."}}) << "memo index 5";
        QTest::newRow("stack underflow") << archive({{"data.pkl", "\x80\x02s."}}) << "stack underflow";
        QTest::newRow("pop below mark") << archive({{"data.pkl", "\x80\x02N(0."}}) << "stack underflow";
        QTest::newRow("too many marks")
            << archive({{"data.pkl", "\x80\x02" + std::string(20000, '(')}}) << "nested MARKs";
        // 300000 nested lists: must neither recurse nor crash, just be the wrong type.
        QTest::newRow("deeply nested lists")
            << archive({{"data.pkl", "\x80\x02" + std::string(300000, ']') + std::string(299999, 'a') + "."}})
            << "holds a value of type list";
        QTest::newRow("top-level list") << archive({{"data.pkl", program("]")}}) << "expected a state dict";
        QTest::newRow("non-string key") << archive({{"data.pkl", program("}K\x01Ns")}}) << "key has type int";
        QTest::newRow("os.system") << archive({{"data.pkl",
                                                program(global("os", "system") + str("ls") + "\x85R")}})
                                   << "pickle global os.system is not allowed";
        QTest::newRow("builtins.eval via STACK_GLOBAL")
            << archive({{"data.pkl", program(str("builtins") + str("eval") + "\x93")}})
            << "pickle global builtins.eval is not allowed";
        QTest::newRow("control characters in a global")
            << archive({{"data.pkl", program(global(std::string("ev\x07il\0", 6), "x") + ")R")}})
            << "pickle global ev\\x07il\\x00.x is not allowed";
        QTest::newRow("calling a storage type")
            << archive({{"data.pkl", program(global("torch", "FloatStorage") + ")R")}}) << "cannot be called";
        QTest::newRow("REDUCE on a non-global")
            << archive({{"data.pkl", program("N)R")}}) << "REDUCE calls a None";
        QTest::newRow("bad persistent id")
            << archive({{"data.pkl", program(str("x") + "Q")}}) << "persistent id";
        QTest::newRow("missing storage record")
            << archive({{"data.pkl", stateDict(tensor("7", 4, 0, {4}, {1}))}, {"data/0", fourFloats}})
            << "missing";
        QTest::newRow("storage size mismatch")
            << archive({{"data.pkl", stateDict(tensor("0", 8, 0, {4}, {1}))}, {"data/0", fourFloats}})
            << "holds 16 bytes, expected 8";
        QTest::newRow("storage numel 2^60")
            << archive({{"data.pkl", stateDict(tensor("0", std::int64_t(1) << 60, 0, {4}, {1}))},
                        {"data/0", fourFloats}})
            << "holds 16 bytes";
        QTest::newRow("offset beyond storage")
            << archive({{"data.pkl", stateDict(tensor("0", 4, 2, {4}, {1}))}, {"data/0", fourFloats}})
            << "reaches beyond";
        QTest::newRow("stride beyond storage")
            << archive({{"data.pkl", stateDict(tensor("0", 4, 0, {2, 2}, {2, 2}))}, {"data/0", fourFloats}})
            << "reaches beyond";
        QTest::newRow("stride overflows")
            << archive({{"data.pkl", stateDict(tensor("0", 4, 0, {5}, {std::int64_t(1) << 62}))},
                        {"data/0", fourFloats}})
            << "reaches beyond";
        // A 4-element storage viewed as 2^40 elements (stride 0) or many times over.
        QTest::newRow("expanded view of 2^40 elements")
            << archive({{"data.pkl", stateDict(tensor("0", 4, 0, {std::int64_t(1) << 40}, {0}))},
                        {"data/0", fourFloats}})
            << "beyond 16 times the file size";
        std::string manyViews = "}";
        for (int i = 0; i < 300; ++i)
            manyViews += str("w" + std::to_string(i)) + tensor("0", 4, 0, {1 << 20, 4}, {0, 1}) + "s";
        QTest::newRow("many large views of one storage")
            << archive({{"data.pkl", program(manyViews)}, {"data/0", fourFloats}})
            << "beyond 16 times the file size";
        QTest::newRow("negative size")
            << archive({{"data.pkl", stateDict(tensor("0", 4, 0, {-1}, {1}))}, {"data/0", fourFloats}})
            << "arguments are not";
        QTest::newRow("duplicate name")
            << archive({{"data.pkl", program("}" + str("w") + tensor("0", 4, 0, {4}, {1}) + "s" + str("w") +
                                             tensor("0", 4, 0, {4}, {1}) + "s")},
                        {"data/0", fourFloats}})
            << "appears twice";

        // LibTorch's zip reader skips CRC checks: an edited byte of tensor data must not load.
        QByteArray altered =
            archive({{"data.pkl", stateDict(tensor("0", 4, 0, {4}, {1}))}, {"data/0", fourFloats}});
        const qsizetype at = altered.indexOf(QByteArray(fourFloats.data(), 16));
        QVERIFY(at > 0);
        altered[at + 5] = char(altered[at + 5] ^ 0x40);
        QTest::newRow("altered tensor data") << altered << "zip record data/0 fails its CRC-32 check";
        // The central directory names data/0 where the local header says data/1 and the other way round:
        // each name would load the other tensor's bytes.
        QByteArray swapped =
            archive({{"data.pkl", program("}" + str("a") + tensor("0", 4, 0, {4}, {1}) + "s" + str("b") +
                                          tensor("1", 4, 0, {4}, {1}) + "s")},
                     {"data/0", fourFloats},
                     {"data/1", floats({5, 6, 7, 8})}});
        const qsizetype cd0 = swapped.lastIndexOf("archive/data/0"),
                        cd1 = swapped.lastIndexOf("archive/data/1");
        QVERIFY(cd0 > swapped.indexOf("archive/data/1") && cd1 > cd0);
        std::swap(swapped[cd0 + 13], swapped[cd1 + 13]);
        QTest::newRow("central directory swaps two records")
            << swapped << "the central directory points at data of another record";
    }

    void badArchive()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, expected);
        expectError(write("bad.bin", bytes), expected);
    }

    // Records above 16 MB are checked in pieces whose CRCs are combined: an intact 40 MB record loads,
    // one altered byte in its third piece does not.
    void largeRecordCrcIsCheckedInPieces()
    {
        const std::int64_t n = 10'000'000;
        const torch::Tensor values = torch::arange(n, torch::kFloat);
        const std::string data(static_cast<const char*>(values.data_ptr()), std::size_t(n) * 4);
        QByteArray bytes = archive({{"data.pkl", stateDict(tensor("0", n, 0, {n}, {1}))}, {"data/0", data}});
        const StateDict loaded = outlierlens::readTorchBin(write("large.bin", bytes));
        QVERIFY(torch::equal(loaded.at("w"), values));
        const qsizetype start = bytes.indexOf(QByteArray(data.data(), 64));
        QVERIFY(start > 0);
        bytes[start + (qsizetype(35) << 20)] = char(bytes[start + (qsizetype(35) << 20)] ^ 1);
        expectError(write("large-altered.bin", bytes), "zip record data/0 fails its CRC-32 check");
    }

    // Decided by the name where the bytes say nothing: not "too short for a safetensors header".
    void binThatIsNoArchiveIsCalledThat_data()
    {
        QTest::addColumn<QByteArray>("bytes");
        QTest::addColumn<QString>("expected");
        QTest::newRow("empty") << QByteArray() << "file is empty (expected a PyTorch zip checkpoint)";
        QTest::newRow("text") << QByteArray("version https://git-lfs.github.com/spec/v1\n")
                              << "not a PyTorch checkpoint (expected a zip archive";
    }
    void binThatIsNoArchiveIsCalledThat()
    {
        QFETCH(QByteArray, bytes);
        QFETCH(QString, expected);
        const std::string path = write("pytorch_model.bin", bytes);
        try {
            outlierlens::readStateDict(path);
            QFAIL("no error");
        } catch (const outlierlens::Error& e) {
            QVERIFY2(QString::fromUtf8(e.what()).contains(expected), e.what());
        }
    }

    void missingFile()
    {
        expectError(QString(m_dir.path() + QStringLiteral("/does-not-exist.bin")).toStdString(),
                    "cannot open");
    }

private:
    std::string write(const QString& name, const QByteArray& bytes)
    {
        const QString path = m_dir.path() + "/" + name;
        QFile f(path);
        if (!f.open(QIODevice::WriteOnly | QIODevice::Truncate) || f.write(bytes) != bytes.size())
            qFatal("cannot write %s", qPrintable(path));
        return path.toStdString();
    }

    static void expectError(const std::string& path, const QString& expected)
    {
        try {
            outlierlens::readTorchBin(path);
            QFAIL("no error");
        } catch (const outlierlens::Error& e) {
            const QString message = QString::fromUtf8(e.what());
            QVERIFY2(message.startsWith(QString::fromStdString(path)), qPrintable(message));
            QVERIFY2(message.contains(expected), qPrintable(message));
            QVERIFY2(!message.contains('\n'), qPrintable(message));
        }
    }

    QTemporaryDir m_dir;
};

QTEST_APPLESS_MAIN(TstTorchBin)
#include "tst_torchbin.moc"
