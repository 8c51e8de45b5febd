#include "quant/intervention.h"

#include "common/error.h"
#include "common/text_format.h"

#include <torch/torch.h>

#include <algorithm>

namespace outlierlens {
namespace {

std::string joined(const std::vector<std::int64_t>& values)
{
    std::vector<std::string> texts;
    for (std::int64_t v : values)
        texts.push_back(std::to_string(v));
    return joinedText(texts, ",");
}

torch::Tensor indexOf(const std::vector<std::int64_t>& values)
{
    return torch::tensor(std::vector<std::int64_t>(values.begin(), values.end()), torch::kLong);
}

/// [n] bool: the chosen positions below n, or every one when none is chosen.
torch::Tensor chosen(const std::vector<std::int64_t>& positions, std::int64_t n)
{
    torch::Tensor mask = torch::full({n}, positions.empty(), torch::kBool);
    for (std::int64_t p : positions)
        if (p < n) mask[p] = true;
    return mask;
}

} // namespace

std::string Intervention::describe() const
{
    std::vector<std::int64_t> oneBased;
    for (std::int64_t h : heads)
        oneBased.push_back(h + 1);
    const std::string headText = heads.empty() ? std::string("every head")
                                               : (heads.size() == 1 ? "head " : "heads ") + joined(oneBased);
    if (tensor == "attn_context")
        return "layer " + std::to_string(layer + 1) + " attention, " + headText + ": output set to 0 at " +
               (tokens.empty() ? std::string("every query")
                               : (tokens.size() == 1 ? "query " : "queries ") + joined(tokens));
    if (tensor == "attn_gate")
        return "layer " + std::to_string(layer + 1) + " attention, " + headText + ": gate set to " +
               (value == Value::Zero ? std::string("0 (shut)") : numberText(constant)) + " at " +
               (tokens.empty() ? std::string("every query")
                               : (tokens.size() == 1 ? "query " : "queries ") + joined(tokens));
    if (tensor == "attn_probs") {
        return "layer " + std::to_string(layer + 1) + " attention, " + headText + ": " +
               (keys.size() == 1 ? "key " : "keys ") + joined(keys) + " removed from " +
               (tokens.empty() ? std::string("every query")
                               : (tokens.size() == 1 ? "query " : "queries ") + joined(tokens)) +
               (renormalize ? ", renormalised" : ", not renormalised");
    }
    std::string text = "layer " + std::to_string(layer + 1) + " " + tensor;
    text += dims.empty() ? ", every dim" : (dims.size() == 1 ? ", dim " : ", dims ") + joined(dims);
    text +=
        tokens.empty() ? ", every token" : (tokens.size() == 1 ? ", token " : ", tokens ") + joined(tokens);
    switch (value) {
    case Value::Zero:
        return text + ": set to 0";
    case Value::Mean:
        return text + ": set to their mean";
    case Value::Constant:
        return text + ": set to " + std::to_string(constant);
    }
    return text;
}

void Intervention::validate() const
{
    if (layer < 0) throw Error("intervention: layer must be at least 1");
    if (tensor != "out" && tensor != "ffn_out" && tensor != "attn_out" && tensor != "attn_probs" &&
        tensor != "attn_context" && tensor != "attn_gate")
        throw Error("intervention: tensor '" + tensor +
                    "', expected out, ffn_out, attn_out, attn_probs, attn_context or attn_gate");
    if (tensor == "attn_gate" && (value == Value::Mean || !dims.empty()))
        throw Error(
            "intervention: attn_gate sets whole heads' gates to 0 or a number (no dimensions, no mean)");
    if (tensor == "attn_context" && (value != Value::Zero || !dims.empty()))
        throw Error("intervention: attn_context sets whole heads' outputs to 0 (no dimensions, no value)");
    if (tensor != "attn_probs" && !keys.empty())
        throw Error("intervention: keys are removed from attn_probs only");
    if (tensor == "attn_probs" && keys.empty())
        throw Error("intervention: attn_probs needs the keys to remove");
    if (tensor == "attn_probs" && value != Value::Zero)
        throw Error("intervention: a key is removed from the attention (probability 0), not set to a value");
    for (std::int64_t k : keys)
        if (k < 0) throw Error("intervention: key position " + std::to_string(k) + " is negative");
    for (std::int64_t h : heads)
        if (h < 0) throw Error("intervention: head " + std::to_string(h) + " is negative");
    for (std::int64_t d : dims)
        if (d < 0) throw Error("intervention: dimension " + std::to_string(d) + " is negative");
    for (std::int64_t t : tokens)
        if (t < 0) throw Error("intervention: token position " + std::to_string(t) + " is negative");
    if (!means.empty() && (value != Value::Mean || (!dims.empty() && means.size() != dims.size())))
        throw Error("intervention: " + std::to_string(means.size()) + " means for " +
                    (value != Value::Mean ? "a value other than the mean"
                                          : std::to_string(dims.size()) + " dimensions"));
}

QuantSite interventionSite(const std::string& tensor, bool postLayerNormBert)
{
    if (tensor == "attn_out") return QuantSite::AttnOut;
    if (tensor == "ffn_out") return QuantSite::FfnOut;
    if (tensor == "out") return postLayerNormBert ? QuantSite::FfnNorm : QuantSite::FfnResidual;
    if (tensor == "attn_probs") return QuantSite::AttnProbs;
    if (tensor == "attn_context") return QuantSite::AttnContext;
    if (tensor == "attn_gate") return QuantSite::AttnGate;
    throw Error("intervention: tensor '" + tensor +
                "', expected out, ffn_out, attn_out, attn_probs, attn_context or attn_gate");
}

InterventionSink::InterventionSink(Intervention intervention, QuantSite site, ActivationSink* inner)
    : m_intervention(std::move(intervention))
    , m_site(site)
    , m_inner(inner)
{
    m_intervention.validate();
    if (!m_intervention.means.empty()) { // collected elsewhere: as if collected here
        m_sum = torch::tensor(m_intervention.means, torch::kDouble);
        m_count = 1;
    }
}

at::Tensor InterventionSink::removeKeys(const at::Tensor& probs) const
{
    const Intervention& i = m_intervention;
    if (probs.dim() != 4)
        throw Error("intervention: the attention of layer " + std::to_string(i.layer + 1) +
                    " is not [batch, heads, queries, keys]");
    const std::int64_t H = probs.size(1), T = probs.size(2), K = probs.size(3);
    for (std::int64_t h : i.heads)
        if (h >= H)
            throw Error("intervention: head " + std::to_string(h + 1) + ", the layer has " +
                        std::to_string(H));
    // 0 where a chosen head's chosen query meets a removed key.
    const torch::Tensor removed = chosen(i.heads, H).view({H, 1, 1}) & chosen(i.tokens, T).view({1, T, 1}) &
                                  chosen(i.keys, K).view({1, 1, K});
    const torch::Tensor keep = torch::ones({H, T, K}, probs.options()).masked_fill_(removed, 0);
    torch::Tensor out = probs * keep;
    if (i.renormalize) {
        // Each changed row again sums to what it summed to before (1 for softmax), as a mask would give; a
        // row with nothing left stays 0.
        const torch::Tensor before = probs.sum(-1, true), after = out.sum(-1, true);
        out = torch::where(after > 0, out * (before / after), out);
    }
    return out;
}

at::Tensor InterventionSink::ablateHeads(const at::Tensor& context) const
{
    const Intervention& i = m_intervention;
    // Decoders hand over P V as [B, H, T, dh] (before their gate); BERT and ViT the merged [B, T, H * dh]
    // (after theirs), whose head count is the layer's attention's.
    const bool split = context.dim() == 4;
    const std::int64_t H = split ? context.size(1) : m_heads;
    if ((!split && context.dim() != 3) || H < 1 || (!split && context.size(2) % H != 0))
        throw Error("intervention: the heads' outputs of layer " + std::to_string(i.layer + 1) +
                    " do not split into heads");
    for (std::int64_t h : i.heads)
        if (h >= H)
            throw Error("intervention: head " + std::to_string(h + 1) + ", the layer has " +
                        std::to_string(H));
    const std::int64_t T = split ? context.size(2) : context.size(1);
    const torch::Tensor heads = chosen(i.heads, H), queries = chosen(i.tokens, T);
    if (split) return context.masked_fill(heads.view({1, H, 1, 1}) & queries.view({1, 1, T, 1}), 0);
    const std::int64_t dh = context.size(2) / H;
    const torch::Tensor mask = (queries.view({T, 1, 1}) & heads.view({1, H, 1})).expand({T, H, dh});
    return context.masked_fill(mask.reshape({1, T, H * dh}), 0);
}

at::Tensor InterventionSink::setGates(const at::Tensor& gates) const
{
    const Intervention& i = m_intervention;
    if (gates.dim() != 3)
        throw Error("intervention: the gates of layer " + std::to_string(i.layer + 1) +
                    " are not [batch, heads, queries]");
    const std::int64_t H = gates.size(1), T = gates.size(2);
    for (std::int64_t h : i.heads)
        if (h >= H)
            throw Error("intervention: head " + std::to_string(h + 1) + ", the layer has " +
                        std::to_string(H));
    const torch::Tensor cells = chosen(i.heads, H).view({1, H, 1}) & chosen(i.tokens, T).view({1, 1, T});
    return gates.masked_fill(cells, i.value == Intervention::Value::Zero ? 0.0 : i.constant);
}

torch::Tensor InterventionSink::means() const
{
    return m_count ? m_sum / double(m_count) : torch::Tensor();
}

at::Tensor InterventionSink::transform(QuantSite site, int layer, const at::Tensor& batched)
{
    const Intervention& i = m_intervention;
    if (site == QuantSite::AttnProbs && layer == i.layer && batched.dim() == 4) m_heads = batched.size(1);
    if (site != m_site || layer != i.layer) return batched;
    ++m_applied;
    if (i.tensor == "attn_gate") return m_collecting ? batched : setGates(batched);
    if (i.tensor == "attn_probs") return removeKeys(batched);
    if (i.tensor == "attn_context") return ablateHeads(batched);
    if (batched.dim() != 3)
        throw Error("intervention: " + i.tensor + " of layer " + std::to_string(i.layer + 1) +
                    " is not [batch, tokens, hidden]");
    const std::int64_t T = batched.size(1), d = batched.size(2);
    for (std::int64_t x : i.dims)
        if (x >= d)
            throw Error("intervention: dimension " + std::to_string(x) + " is beyond the hidden size " +
                        std::to_string(d));
    const torch::Tensor rows = chosen(i.tokens, T);
    if (!rows.any().item<bool>()) return batched; // a sequence shorter than every chosen position
    if (m_collecting) {
        torch::Tensor selected = batched.index_select(1, rows.nonzero().view({-1}));
        if (!i.dims.empty()) selected = selected.index_select(2, indexOf(i.dims));
        const torch::Tensor sum = selected.detach().to(torch::kDouble).sum(std::vector<std::int64_t>{0, 1});
        m_sum = m_sum.defined() ? m_sum + sum : sum;
        m_count += selected.size(0) * selected.size(1);
        return batched;
    }
    torch::Tensor value; // broadcast over [B, T, d]
    switch (i.value) {
    case Intervention::Value::Zero:
        value = torch::zeros({}, batched.options());
        break;
    case Intervention::Value::Constant:
        value = torch::full({}, i.constant, batched.options());
        break;
    case Intervention::Value::Mean:
        if (!m_sum.defined()) throw Error("intervention: set to the mean, but no mean was collected");
        value = torch::zeros({d}, torch::kDouble);
        if (i.dims.empty())
            value = means();
        else
            value.index_copy_(0, indexOf(i.dims), means());
        value = value.to(batched.scalar_type());
        break;
    }
    const torch::Tensor where = rows.view({T, 1}) & chosen(i.dims, d).view({1, d});
    return torch::where(where, value, batched);
}

} // namespace outlierlens
