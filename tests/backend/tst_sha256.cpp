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
        outlierlens::Sha256 hash;
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
};

QTEST_APPLESS_MAIN(TstSha256)
#include "tst_sha256.moc"
