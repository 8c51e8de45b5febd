#include "text/imagenet.h"

#include "common/error.h"
#include "common/input_file.h"
#include "common/json_util.h"

#include <nlohmann/json.hpp>

#include <fstream>

namespace outlierlens {

ImageNetClasses ImageNetClasses::fromFiles(const std::string& namesPath, const std::string& indexJsonPath)
{
    ImageNetClasses classes;
    std::ifstream in = openInputFile(namesPath);
    if (!in) throw Error(namesPath + ": cannot open the class list");
    std::string line;
    while (std::getline(in, line)) {
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        classes.m_names.push_back(line.substr(0, line.find(',')));
    }
    if (classes.m_names.empty()) throw Error(namesPath + ": the class list is empty");
    if (!indexJsonPath.empty()) {
        const nlohmann::json j = jsonutil::parseFile(indexJsonPath);
        if (!j.is_object()) throw Error(indexJsonPath + ": expected an object {\"0\": [wnid, name], ...}");
        for (auto it = j.begin(); it != j.end(); ++it) {
            int index = -1;
            try {
                index = std::stoi(it.key());
            } catch (const std::exception&) {
            }
            if (index < 0 || index >= int(classes.m_names.size()) || !it->is_array() || it->empty() ||
                !(*it)[0].is_string())
                throw Error(indexJsonPath + ": bad entry for key '" + it.key() + "'");
            classes.m_wnidToIndex[(*it)[0].get<std::string>()] = index;
        }
    }
    return classes;
}

const std::string& ImageNetClasses::name(int index) const
{
    if (index < 0 || index >= int(m_names.size()))
        throw Error("class index " + std::to_string(index) + " is outside the " +
                    std::to_string(m_names.size()) + " known classes");
    return m_names[std::size_t(index)];
}

int ImageNetClasses::indexOfWnid(const std::string& wnid) const
{
    const auto it = m_wnidToIndex.find(wnid);
    return it == m_wnidToIndex.end() ? -1 : it->second;
}

} // namespace outlierlens
