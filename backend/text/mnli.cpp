#include "text/mnli.h"

#include "common/error.h"
#include "common/input_file.h"
#include "common/json_util.h"
#include "text/utf8.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <string_view>

namespace outlierlens {
namespace {

// Calls fn(lineNumber (1-based), line without its \n or \r\n) for every line; fn returns false to stop.
template<typename Fn>
void forEachLine(std::string_view text, Fn fn)
{
    std::size_t pos = 0, number = 0;
    while (pos < text.size()) {
        std::size_t end = text.find('\n', pos);
        const std::size_t next = end == std::string_view::npos ? text.size() : end + 1;
        if (end == std::string_view::npos) end = text.size();
        std::string_view line = text.substr(pos, end - pos);
        if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
        if (!fn(++number, line)) return;
        pos = next;
    }
}

std::vector<std::string_view> splitTabs(std::string_view line)
{
    std::vector<std::string_view> fields;
    std::size_t pos = 0;
    while (true) {
        const std::size_t tab = line.find('\t', pos);
        if (tab == std::string_view::npos) {
            fields.push_back(line.substr(pos));
            return fields;
        }
        fields.push_back(line.substr(pos, tab - pos));
        pos = tab + 1;
    }
}

std::string where(const std::string& path, std::size_t line)
{
    return path + ":" + std::to_string(line);
}

std::vector<NliPair> readTsv(const std::string& path, std::string_view text, std::size_t limit)
{
    std::vector<NliPair> pairs;
    long sentence1 = -1, sentence2 = -1, label = -1;
    std::size_t columns = 0; // needed per row
    bool haveHeader = false;
    forEachLine(text, [&](std::size_t number, std::string_view line) {
        if (line.find_first_not_of(" \t") == std::string_view::npos) return true;
        if (utf8::firstInvalidByte(line) != std::string::npos)
            throw Error(where(path, number) + ": invalid UTF-8");
        const std::vector<std::string_view> fields = splitTabs(line);
        if (!haveHeader && fields.size() == 2 && fields[0] != "sentence1" && fields[1] != "sentence2") {
            // No header: a model folder's sample_inputs.txt, one "premise<TAB>hypothesis" per line.
            sentence1 = 0, sentence2 = 1, columns = 2;
            haveHeader = true;
        }
        if (!haveHeader) {
            long labelColumn = -1, goldColumn = -1;
            for (std::size_t i = 0; i < fields.size(); ++i) {
                if (fields[i] == "sentence1")
                    sentence1 = long(i);
                else if (fields[i] == "sentence2")
                    sentence2 = long(i);
                else if (fields[i] == "gold_label")
                    goldColumn = long(i);
                else if (fields[i] == "label")
                    labelColumn = long(i);
            }
            label = goldColumn >= 0 ? goldColumn : labelColumn;
            for (const auto& [name, index] : {std::pair<const char*, long>{"sentence1", sentence1},
                                              std::pair<const char*, long>{"sentence2", sentence2}}) {
                if (index < 0)
                    throw Error(where(path, number) + ": TSV header has no '" + name +
                                "' column (expected the GLUE MNLI columns: ... sentence1, sentence2, ..., "
                                "gold_label)");
            }
            columns = std::size_t(std::max({sentence1, sentence2, label})) + 1;
            haveHeader = true;
            return true;
        }
        if (fields.size() < columns)
            throw Error(where(path, number) + ": expected at least " + std::to_string(columns) +
                        " tab-separated columns as in the header, found " + std::to_string(fields.size()));
        NliPair pair;
        if (label >= 0) {
            pair.label = std::string(fields[std::size_t(label)]);
            if (pair.label == "-") return true; // no annotator majority: GLUE leaves these out
        }
        pair.premise = std::string(fields[std::size_t(sentence1)]);
        pair.hypothesis = std::string(fields[std::size_t(sentence2)]);
        pairs.push_back(std::move(pair));
        return limit == 0 || pairs.size() < limit;
    });
    return pairs;
}

std::vector<NliPair> readJsonl(const std::string& path, std::string_view text, std::size_t limit)
{
    std::vector<NliPair> pairs;
    forEachLine(text, [&](std::size_t number, std::string_view line) {
        if (line.find_first_not_of(" \t") == std::string_view::npos) return true;
        const std::string at = where(path, number);
        nlohmann::json obj;
        try {
            obj = jsonutil::parseWithDepthLimit(line, at);
        } catch (const nlohmann::json::parse_error& e) {
            throw Error(at + ": malformed JSON at column " + std::to_string(e.byte) +
                        " (expected one {\"premise\", \"hypothesis\", \"label\"} object per line)");
        }
        if (!obj.is_object())
            throw Error(at + ": expected a JSON object with \"premise\", \"hypothesis\" and \"label\"");
        NliPair pair;
        pair.premise = jsonutil::getString(obj, "premise", at);
        pair.hypothesis = jsonutil::getString(obj, "hypothesis", at);
        const auto it = obj.find("label");
        if (it != obj.end() && !it->is_null()) {
            if (it->is_string()) {
                pair.label = it->get<std::string>();
            } else if (it->is_number_integer()) {
                const long long id = it->get<long long>();
                if (id >= 0 && id < static_cast<long long>(nliLabelNames().size()))
                    pair.label = nliLabelNames()[std::size_t(id)];
                else if (id != -1)
                    throw Error(at + ": label id " + std::to_string(id) +
                                " is not 0 (entailment), 1 (neutral), 2 (contradiction) or -1 (none)");
            } else {
                throw Error(at + ": field 'label' must be a string or an integer, found " + it->dump());
            }
            if (pair.label == "-") return true;
        }
        pairs.push_back(std::move(pair));
        return limit == 0 || pairs.size() < limit;
    });
    return pairs;
}

} // namespace

const std::vector<std::string>& nliLabelNames()
{
    static const std::vector<std::string> names = {"entailment", "neutral", "contradiction"};
    return names;
}

std::vector<NliPair> readNliPairs(const std::string& path, std::size_t limit)
{
    const std::string data = readWholeFile(path, "MNLI file");
    std::string_view text(data);
    if (text.substr(0, 3) == "\xEF\xBB\xBF") text.remove_prefix(3); // UTF-8 byte order mark
    const std::size_t first = text.find_first_not_of(" \t\r\n");
    if (first == std::string_view::npos)
        throw Error(path + ": empty file, expected MNLI pairs as GLUE TSV or JSONL");
    if (text[first] == '[')
        throw Error(path +
                    ": a JSON array is not supported, expected JSONL (one {\"premise\", \"hypothesis\", "
                    "\"label\"} object per line) or GLUE TSV");
    return text[first] == '{' ? readJsonl(path, text, limit) : readTsv(path, text, limit);
}

} // namespace outlierlens
