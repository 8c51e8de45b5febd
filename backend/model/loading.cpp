#include "model/loading.h"

#include "common/error.h"

#include <torch/nn/module.h>
#include <torch/torch.h>

#include <algorithm>
#include <cctype>
#include <cstring>

namespace outlierlens {
namespace {

std::string summarize(const std::vector<std::string>& problems)
{
    std::string message = problems.front();
    if (problems.size() > 1)
        message += " (and " + std::to_string(problems.size() - 1) + " more problem" +
                   (problems.size() > 2 ? "s" : "") + ")";
    return message;
}

bool endsWith(const std::string& s, const std::string& suffix)
{
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

ExpectedTensors releaseModuleTensors(torch::nn::Module& module)
{
    ExpectedTensors expected;
    auto release = [&](const std::string& name, torch::Tensor& t) {
        expected[name] = ExpectedTensor{std::vector<std::int64_t>(t.sizes().begin(), t.sizes().end()),
                                        t.is_floating_point()};
        torch::NoGradGuard noGrad;
        t.set_data(torch::empty({0}, t.options()));
    };
    for (auto& item : module.named_parameters(true))
        release(item.key(), item.value());
    for (auto& item : module.named_buffers(true))
        release(item.key(), item.value());
    return expected;
}

void adoptStrict(torch::nn::Module& module, const ExpectedTensors& expected, StateDict tensors,
                 const std::string& file, bool keepFloatDtype)
{
    std::vector<std::string> problems;
    for (const auto& [name, want] : expected) {
        const auto it = tensors.find(name);
        if (it == tensors.end()) {
            problems.push_back(file + ": missing tensor '" + name + "' (expected " + shapeString(want.sizes) +
                               ")");
            continue;
        }
        const torch::Tensor& found = it->second;
        if (found.sizes() != c10::IntArrayRef(want.sizes))
            problems.push_back(file + ": tensor '" + name + "' has shape " + shapeString(found) +
                               ", expected " + shapeString(want.sizes));
        else if (found.is_floating_point() != want.floating)
            problems.push_back(file + ": tensor '" + name + "' has dtype " +
                               std::string(c10::toString(found.scalar_type())) + ", expected " +
                               (want.floating ? "Float" : "Long"));
    }
    for (const auto& [name, tensor] : tensors)
        if (!expected.count(name))
            problems.push_back(file + ": unexpected tensor '" + name + "' " + shapeString(tensor) +
                               " (not part of this model)");
    if (!problems.empty()) throw Error(summarize(problems));

    torch::NoGradGuard noGrad;
    auto adopt = [&](const std::string& name, torch::Tensor& target) {
        torch::Tensor& source = tensors.at(name);
        const bool keep = keepFloatDtype && source.is_floating_point() && target.is_floating_point();
        target.set_data(keep ? source.contiguous() : source.to(target.scalar_type()).contiguous());
        source = torch::Tensor(); // the module holds the only reference now
    };
    for (auto& item : module.named_parameters(true))
        adopt(item.key(), item.value());
    for (auto& item : module.named_buffers(true))
        adopt(item.key(), item.value());
}

StateDict moduleStateDict(const torch::nn::Module& module)
{
    StateDict out;
    for (const auto& item : module.named_parameters(true))
        out.emplace(item.key(), item.value().detach());
    for (const auto& item : module.named_buffers(true))
        out.emplace(item.key(), item.value().detach());
    return out;
}

void checkConfigAgainstCheckpoint(const StateDict& tensors, const std::vector<ImpliedShape>& implied,
                                  int numLayers, const std::string& configPath,
                                  const std::string& weightsFile)
{
    const auto endsWith = [](const std::string& s, const std::string& tail) {
        return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0 &&
               (s.size() == tail.size() || s[s.size() - tail.size() - 1] == '.');
    };
    for (const ImpliedShape& want : implied)
        for (const auto& [name, tensor] : tensors)
            if (endsWith(name, want.nameSuffix)) {
                if (tensor.sizes().vec() != want.sizes)
                    throw Error(configPath + ": " + want.fields + " implies " + want.nameSuffix +
                                " of shape " + shapeString(want.sizes) + " but " + weightsFile + " holds " +
                                name + " of shape " + shapeString(tensor.sizes()) +
                                " (do the config and the weights belong together?)");
                break;
            }
    long long highest = -1;
    for (const auto& item : tensors) {
        const std::string& name = item.first;
        for (const char* key : {"layer.", "layers.", "h.", "blocks."}) {
            for (std::size_t at = name.find(key); at != std::string::npos; at = name.find(key, at + 1)) {
                if (at > 0 && name[at - 1] != '.') continue;
                std::size_t digits = at + std::strlen(key), end = digits;
                while (end < name.size() && end - digits < 9 &&
                       std::isdigit(static_cast<unsigned char>(name[end])))
                    ++end;
                if (end > digits && end < name.size() && name[end] == '.')
                    highest = std::max(highest, std::stoll(name.substr(digits, end - digits)));
            }
        }
    }
    if (highest >= 0 && highest + 1 != numLayers)
        throw Error(configPath + ": the config asks for " + std::to_string(numLayers) + " layers but " +
                    weightsFile + " holds " + std::to_string(highest + 1) +
                    " (do the config and the weights belong together?)");
}

StateDict renameLegacyLayerNorm(StateDict tensors, LoadReport& report)
{
    StateDict out;
    for (auto& [name, tensor] : tensors) {
        std::string mapped = name;
        if (endsWith(name, ".gamma"))
            mapped = name.substr(0, name.size() - 6) + ".weight";
        else if (endsWith(name, ".beta"))
            mapped = name.substr(0, name.size() - 5) + ".bias";
        if (mapped != name) {
            if (tensors.count(mapped)) throw Error("checkpoint has both '" + name + "' and '" + mapped + "'");
            report.renamed.push_back(name + " -> " + mapped);
        }
        out.emplace(std::move(mapped), std::move(tensor));
    }
    return out;
}

} // namespace outlierlens
