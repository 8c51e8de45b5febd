// The attention variant's table (model/variant_fields): the keys config.json's "outlierlens" block
// records for each variant, read back field by field, and the command line's overrides.

#include "../common/expect_error.h"
#include "model/config.h"
#include "model/variant_fields.h"

#include <nlohmann/json.hpp>

#include <QStringList>
#include <QtTest>

using namespace outlierlens;
using outlierlens::test::expectError;

class TstVariantFields : public QObject
{
    Q_OBJECT

private Q_SLOTS:
    /// config.json's "outlierlens" block: the keys each variant records, written by hand here, and
    /// the variant read back field by field.
    void variantConfigJsonRecordsItsFields_data()
    {
        QTest::addColumn<QString>("kind");
        QTest::addColumn<QStringList>("keys");
        QTest::newRow("clipped gamma") << "clipped gamma" << QStringList{"softmax", "gamma", "zeta"};
        QTest::newRow("clipped alpha")
            << "clipped alpha" << QStringList{"softmax", "gamma", "zeta", "alpha", "max_seq_length"};
        QTest::newRow("mlp gate") << "mlp gate" << QStringList{"softmax", "gate", "pi_init", "n_hid"};
        QTest::newRow("fixed bias") << "fixed bias" << QStringList{"softmax", "bias"};
        QTest::newRow("context scale") << "context scale" << QStringList{"softmax", "context_scale"};
        QTest::newRow("clipped per query")
            << "clipped per query"
            << QStringList{"softmax", "gamma", "zeta", "alpha", "max_seq_length", "clip_per_query"};
    }

    void variantConfigJsonRecordsItsFields()
    {
        QFETCH(QString, kind);
        QFETCH(QStringList, keys);
        AttentionVariant v;
        if (kind == "clipped gamma") {
            v.softmax = SoftmaxKind::Clipped;
            v.gamma = -0.03;
            v.zeta = 1.5;
        } else if (kind == "clipped alpha") {
            v.softmax = SoftmaxKind::Clipped;
            v.alpha = 4;
            v.maxSeqLength = 128;
        } else if (kind == "clipped per query") {
            v.softmax = SoftmaxKind::Clipped;
            v.alpha = 4;
            v.maxSeqLength = 64;
            v.clipPerQuery = true;
        } else if (kind == "mlp gate") {
            v.gate = GateKind::Mlp;
            v.nHid = 8;
            v.piInit = 0.5;
        } else if (kind == "fixed bias") {
            v.bias = BiasKind::Fixed;
        } else {
            v.contextScale = true;
        }
        nlohmann::json config = nlohmann::json::object();
        addVariantToConfigJson(v, config);
        QStringList written;
        for (const auto& item : config["outlierlens"].items())
            written << QString::fromStdString(item.key());
        written.sort();
        keys.sort();
        QCOMPARE(written, keys);
        if (kind == "clipped alpha") QCOMPARE(config["outlierlens"]["gamma"].get<double>(), -4.0 / 128);
        const AttentionVariant back = variantFromConfigJson(config, "config.json");
        const AttentionVariant expected = v.withAlphaResolved();
        QCOMPARE(back.describe(), expected.describe());
        QCOMPARE(back.gamma, expected.gamma);
        QCOMPARE(back.zeta, expected.zeta);
        QCOMPARE(back.alpha, expected.alpha);
        QCOMPARE(back.maxSeqLength, expected.maxSeqLength);
        QCOMPARE(back.nHid, expected.nHid);
        QCOMPARE(back.piInit, expected.piInit);
        QVERIFY(back.bias == expected.bias);
        QCOMPARE(back.contextScale, expected.contextScale);
        QCOMPARE(back.clipPerQuery, expected.clipPerQuery);
    }

    /// The command line's --gamma, --n-hid, ...: refused text at once, the clipped-softmax shorthand,
    /// and implausible sizes.
    void variantOverride()
    {
        VariantOverride o;
        expectError([&] { o.set("gamma", "abc"); }, {"expected a finite number, found 'abc'"});
        expectError([&] { o.set("temperature", "2"); }, {"unknown attention-variant field 'temperature'"});
        expectError([&] { o.set("gate", "conv"); }, {"unknown gate 'conv'"});
        QVERIFY(o.empty());
        AttentionVariant withAlpha;
        withAlpha.softmax = SoftmaxKind::Clipped;
        withAlpha.alpha = 4;
        withAlpha.maxSeqLength = 128;
        o.set("gamma", "-0.1");
        o.set("gamma", "-0.025"); // the last one given counts
        const AttentionVariant v = o.applyTo(withAlpha);
        QVERIFY(v.softmax == SoftmaxKind::Clipped);
        QVERIFY(!v.alpha);
        QCOMPARE(v.effectiveGamma(), -0.025);
        const VariantOverride zeta{{{"zeta", "1.2"}}};
        QVERIFY(zeta.applyTo({}).softmax == SoftmaxKind::Clipped);
        expectError(
            [] {
                VariantOverride{{{"gate", "mlp"}, {"n_hid", "1000000"}}}.applyTo({});
            },
            {"n_hid 1000000 is implausibly large"});
        expectError([] { VariantOverride{{{"gate", "mlp"}}}.applyTo({}); }, {"needs n_hid > 0"});
        // Per-query clipping is stated through alpha, and only the decoders implement it.
        expectError(
            [] {
                VariantOverride{{{"gamma", "-0.1"}, {"clip_per_query", "true"}}}.applyTo({});
            },
            {"clip_per_query needs alpha"});
        const AttentionVariant perQuery =
            VariantOverride{{{"alpha", "4"}, {"max_seq_length", "64"}, {"clip_per_query", "true"}}}.applyTo(
                {});
        QVERIFY(perQuery.isDecoderOnly());
        QVERIFY(!withAlpha.isDecoderOnly());
        QVERIFY2(perQuery.describe().find("keys seen per query") != std::string::npos,
                 perQuery.describe().c_str());
    }
};

QTEST_APPLESS_MAIN(TstVariantFields)
#include "tst_variant_fields.moc"
