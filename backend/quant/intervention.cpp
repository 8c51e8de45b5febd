#include "quant/intervention.h"

#include "common/error.h"

#include <torch/torch.h>

#include <algorithm>

namespace outlierlens {
namespace {

std::string joined(const std::vector<std::int64_t>& values)
{
    std::string text;
    for (std::int64_t v : values)
        text += (text.empty() ? "" : ",") + std::to_string(v);
    return text;
}

torch::Tensor indexOf(const std::vector<std::int64_t>& values)
{
    return torch::tensor(std::vector<std::int64_t>(values.begin(), values.end()), torch::kLong);
}

} // namespace

std::string Intervention::describe() const
{
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
    if (tensor != "out" && tensor != "ffn_out" && tensor != "attn_out")
        throw Error("intervention: tensor '" + tensor + "', expected out, ffn_out or attn_out");
    for (std::int64_t d : dims)
        if (d < 0) throw Error("intervention: dimension " + std::to_string(d) + " is negative");
    for (std::int64_t t : tokens)
        if (t < 0) throw Error("intervention: token position " + std::to_string(t) + " is negative");
}

QuantSite interventionSite(const std::string& tensor, bool postLayerNormBert)
{
    if (tensor == "attn_out") return QuantSite::AttnOut;
    if (tensor == "ffn_out") return QuantSite::FfnOut;
    if (tensor == "out") return postLayerNormBert ? QuantSite::FfnNorm : QuantSite::FfnResidual;
    throw Error("intervention: tensor '" + tensor + "', expected out, ffn_out or attn_out");
}

InterventionSink::InterventionSink(Intervention intervention, QuantSite site, ActivationSink* inner)
    : m_intervention(std::move(intervention))
    , m_site(site)
    , m_inner(inner)
{
    m_intervention.validate();
}

torch::Tensor InterventionSink::means() const
{
    return m_count ? m_sum / double(m_count) : torch::Tensor();
}

at::Tensor InterventionSink::transform(QuantSite site, int layer, const at::Tensor& batched)
{
    const Intervention& i = m_intervention;
    if (site != m_site || layer != i.layer) return batched;
    if (batched.dim() != 3)
        throw Error("intervention: " + i.tensor + " of layer " + std::to_string(i.layer + 1) +
                    " is not [batch, tokens, hidden]");
    const std::int64_t T = batched.size(1), d = batched.size(2);
    for (std::int64_t x : i.dims)
        if (x >= d)
            throw Error("intervention: dimension " + std::to_string(x) + " is beyond the hidden size " +
                        std::to_string(d));
    // The chosen positions that this sequence has (a short sequence has fewer).
    std::vector<std::int64_t> tokens;
    for (std::int64_t t : i.tokens)
        if (t < T) tokens.push_back(t);
    if (!i.tokens.empty() && tokens.empty()) return batched;
    torch::Tensor selected = tokens.empty() ? batched : batched.index_select(1, indexOf(tokens));
    if (!i.dims.empty()) selected = selected.index_select(2, indexOf(i.dims));

    if (m_collecting) {
        const torch::Tensor sum = selected.detach().to(torch::kDouble).sum(std::vector<std::int64_t>{0, 1});
        m_sum = m_sum.defined() ? m_sum + sum : sum;
        m_count += selected.size(0) * selected.size(1);
        return batched;
    }
    torch::Tensor value;
    switch (i.value) {
    case Intervention::Value::Zero:
        value = torch::zeros_like(selected);
        break;
    case Intervention::Value::Constant:
        value = torch::full_like(selected, i.constant);
        break;
    case Intervention::Value::Mean:
        if (!m_sum.defined()) throw Error("intervention: set to the mean, but no mean was collected");
        value = means().to(selected.scalar_type()).expand_as(selected);
        break;
    }
    // Write `value` into a copy at (tokens x dims).
    torch::Tensor out = batched.clone();
    torch::Tensor rows = tokens.empty() ? out : out.index_select(1, indexOf(tokens));
    if (i.dims.empty())
        rows = value;
    else
        rows.index_copy_(2, indexOf(i.dims), value);
    if (tokens.empty())
        out.copy_(rows);
    else
        out.index_copy_(1, indexOf(tokens), rows);
    return out;
}

} // namespace outlierlens
