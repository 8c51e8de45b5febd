#include "analysis/outlier_rule.h"

#include "common/error.h"
#include "common/text_format.h"

#include <cmath>

namespace outlierlens {

std::string outlierRuleName(OutlierRule rule)
{
    return rule == OutlierRule::Tau ? "tau" : "sigma";
}

OutlierRule parseOutlierRule(const std::string& name)
{
    if (name == "sigma") return OutlierRule::Sigma;
    // An et al.'s paper rule is the tau rule; their code's token rule (max_c |h_tc| > tau mean|h|)
    // marks exactly the tokens that carry a tau-rule value, so both count values as tau does.
    if (name == "tau" || name == "so-paper" || name == "so-code") return OutlierRule::Tau;
    throw Error("outlier rule: expected sigma, tau, so-paper or so-code, found '" + name + "'");
}

std::string OutlierCriterion::describe() const
{
    if (rule == OutlierRule::Tau) return "|x| > " + numberText(tau) + " mean|x|, per sample over T x d";
    return "|x - mean| > " + numberText(k) + " std (unbiased), per sample over T x d";
}

std::string OutlierCriterion::shortText() const
{
    return rule == OutlierRule::Tau ? numberText(tau) + " \u00d7 mean|X|" : numberText(k) + "\u03c3";
}

std::vector<std::string> OutlierCriterion::arguments() const
{
    return {"--rule",
            outlierRuleName(rule),
            "--k",
            numberText(k),
            "--tau",
            numberText(tau),
            "--attention-fraction",
            numberText(attentionFraction)};
}

void OutlierCriterion::validate() const
{
    const auto positive = [](double v) { return std::isfinite(v) && v > 0; };
    if (!positive(k)) throw Error("outlier rule: k must be a positive number, found " + numberText(k));
    if (!positive(tau)) throw Error("outlier rule: tau must be a positive number, found " + numberText(tau));
    // A key receives at most T (one from each of the T queries): a fraction above 1 selects no key.
    if (!positive(attentionFraction) || attentionFraction > 1)
        throw Error("outlier rule: the attention fraction must be in (0, 1], found " +
                    numberText(attentionFraction));
}

bool OutlierCriterion::operator==(const OutlierCriterion& other) const
{
    return rule == other.rule && k == other.k && tau == other.tau &&
           attentionFraction == other.attentionFraction;
}

} // namespace outlierlens
