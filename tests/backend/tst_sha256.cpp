#include "common/sha256.h"

#include <QtTest>

#include <string>

class TstSha256 : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    void knownVectors_data()
    {
        QTest::addColumn<QByteArray>("input");
        QTest::addColumn<QString>("digest");
        // FIPS 180-4 / NIST example vectors.
        QTest::newRow("empty") << QByteArray()
                               << "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855";
        QTest::newRow("abc") << QByteArray("abc")
                             << "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        QTest::newRow("two-block") << QByteArray("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq")
                                   << "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1";
        QTest::newRow("million-a") << QByteArray(1000000, 'a')
                                   << "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0";
    }
    void knownVectors()
    {
        QFETCH(QByteArray, input);
        QFETCH(QString, digest);
        for (bool shaExtensions : {true, false}) { // where the CPU has none, both are the portable code
            outlierlens::Sha256 hash(shaExtensions);
            // Feed in uneven pieces so block boundaries are crossed mid-update.
            int pos = 0, step = 1;
            while (pos < input.size()) {
                const int n = std::min(step, int(input.size()) - pos);
                hash.update(input.constData() + pos, std::size_t(n));
                pos += n;
                step = step * 3 + 1;
            }
            QCOMPARE(QString::fromStdString(hash.hexDigest()), digest);
        }
    }

    /// The SHA-extension path against the portable one on the same bytes, over lengths around the
    /// block size and fed in pieces that start and end mid-block.
    void shaExtensionsAgreeWithPortableCode()
    {
        if (!outlierlens::Sha256::shaExtensionsAvailable()) QSKIP("this CPU has no SHA extensions");
        std::uint32_t x = 12345;
        QByteArray data(70000, Qt::Uninitialized);
        for (char& c : data) {
            x = x * 1664525u + 1013904223u;
            c = char(x >> 24);
        }
        for (int length : {0, 1, 55, 56, 63, 64, 65, 127, 128, 129, 1000, 4096, 65537, 70000}) {
            for (int piece : {1, 7, 64, 100, 70000}) {
                outlierlens::Sha256 fast(true), portable(false);
                for (int pos = 0; pos < length; pos += piece) {
                    const std::size_t n = std::size_t(std::min(piece, length - pos));
                    fast.update(data.constData() + pos, n);
                    portable.update(data.constData() + pos, n);
                }
                QCOMPARE(fast.hexDigest(), portable.hexDigest());
            }
        }
    }
};

QTEST_APPLESS_MAIN(TstSha256)
#include "tst_sha256.moc"
