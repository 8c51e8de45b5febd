// Reading a tokenizer.json: nlohmann's DOM for the pipeline, but model.vocab and model.merges taken
// out while parsing. A DOM of Gemma 2's 256k vocabulary entries (a std::map) and 580k merge strings
// costs over a second to build and free; taken out as they stream past, they cost a few hundred ms.

#include "text/tokenizer_json_parts.h"

#include "common/error.h"
#include "common/input_file.h"
#include "common/json_util.h"

namespace outlierlens::tokjson {
namespace {

constexpr long long kMaxTokenId = 50'000'000;
constexpr std::uint64_t kMaxFileBytes = std::uint64_t(256) << 20;

class TokenizerJsonSax
{
public:
    using Dom = nlohmann::detail::json_sax_dom_parser<nlohmann::json>;
    using number_integer_t = nlohmann::json::number_integer_t;
    using number_unsigned_t = nlohmann::json::number_unsigned_t;
    using number_float_t = nlohmann::json::number_float_t;
    using string_t = nlohmann::json::string_t;
    using binary_t = nlohmann::json::binary_t;

    explicit TokenizerJsonSax(TokenizerJsonFile& file)
        : m_file(file)
        , m_dom(file.json)
    {}

    bool null() { return m_mode == Mode::None ? m_dom.null() : value("null"); }
    bool boolean(bool v) { return m_mode == Mode::None ? m_dom.boolean(v) : value(v ? "true" : "false"); }
    bool number_integer(number_integer_t v)
    {
        if (m_mode == Mode::Vocab && m_depth == m_captureDepth) return id(v);
        return m_mode == Mode::None ? m_dom.number_integer(v) : value(std::to_string(v));
    }
    bool number_unsigned(number_unsigned_t v)
    {
        if (m_mode == Mode::Vocab && m_depth == m_captureDepth)
            return id(v > static_cast<number_unsigned_t>(kMaxTokenId) ? kMaxTokenId + 1
                                                                      : static_cast<long long>(v));
        return m_mode == Mode::None ? m_dom.number_unsigned(v) : value(std::to_string(v));
    }
    bool number_float(number_float_t v, const string_t& s)
    {
        return m_mode == Mode::None ? m_dom.number_float(v, s) : value(s);
    }
    bool string(string_t& s)
    {
        if (m_mode == Mode::None) return m_dom.string(s);
        if (m_mode == Mode::Merges && m_depth == m_captureDepth) {
            // The older format: "a b", split at the one space (tokenizers refuses any other count).
            const std::size_t sp = s.find(' ');
            if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
                badMerge("\"" + s + "\"");
            m_file.addMerge(std::string_view(s).substr(0, sp), std::string_view(s).substr(sp + 1));
            return true;
        }
        if (m_mode == Mode::Merges && m_depth == m_captureDepth + 1) {
            m_pair.push_back(std::move(s));
            return true;
        }
        return value("\"" + s + "\"");
    }
    bool binary(binary_t& b) { return m_mode == Mode::None ? m_dom.binary(b) : value("binary"); }

    bool start_object(std::size_t n)
    {
        enter();
        if (m_mode == Mode::None && m_depth == 3 && m_keys[1] == "model" && m_keys[2] == "vocab") {
            m_mode = Mode::Vocab;
            m_captureDepth = m_depth;
            m_file.vocabTaken = true;
            return m_dom.null();
        }
        if (m_mode != Mode::None) return value("an object");
        return m_dom.start_object(n);
    }
    bool end_object()
    {
        leave();
        if (m_mode == Mode::Vocab && m_depth + 1 == m_captureDepth) {
            m_mode = Mode::None;
            return true;
        }
        return m_dom.end_object();
    }
    bool start_array(std::size_t n)
    {
        enter();
        if (m_mode == Mode::None && m_depth == 3 && m_keys[1] == "model" && m_keys[2] == "merges") {
            m_mode = Mode::Merges;
            m_captureDepth = m_depth;
            m_file.mergesTaken = true;
            return m_dom.null();
        }
        if (m_mode == Mode::Merges && m_depth == m_captureDepth + 1) {
            m_pair.clear();
            return true;
        }
        if (m_mode != Mode::None) return value("a list");
        return m_dom.start_array(n);
    }
    bool end_array()
    {
        leave();
        if (m_mode == Mode::Merges && m_depth + 1 == m_captureDepth) {
            m_mode = Mode::None;
            return true;
        }
        if (m_mode == Mode::Merges && m_depth == m_captureDepth) {
            if (m_pair.size() != 2) badMerge("a list of " + std::to_string(m_pair.size()) + " strings");
            m_file.addMerge(m_pair[0], m_pair[1]);
            return true;
        }
        return m_dom.end_array();
    }
    bool key(string_t& k)
    {
        if (m_depth < 3) m_keys[m_depth] = k;
        if (m_depth == 1) m_keys[2].clear();
        if (m_mode == Mode::Vocab) {
            m_key = std::move(k);
            return true;
        }
        return m_dom.key(k);
    }
    template<typename Exception>
    bool parse_error(std::size_t position, const std::string& token, const Exception& ex)
    {
        return m_dom.parse_error(position, token, ex);
    }

private:
    enum class Mode { None, Vocab, Merges };

    void enter()
    {
        if (++m_depth > jsonutil::kMaxDepth)
            throw Error(m_file.path + ": JSON nested deeper than " + std::to_string(jsonutil::kMaxDepth) +
                        " levels");
    }
    void leave() { --m_depth; }

    bool id(long long v)
    {
        if (v < 0 || v > kMaxTokenId)
            throw Error(m_file.path + ": model.vocab: the id of '" + m_key + "' must be an integer in [0, " +
                        std::to_string(kMaxTokenId) + "], found " + std::to_string(v));
        m_file.vocab.emplace_back(std::move(m_key), v);
        return true;
    }
    // Any other value inside the vocabulary or the merges.
    [[noreturn]] bool value(const std::string& found)
    {
        if (m_mode == Mode::Vocab)
            throw Error(m_file.path + ": model.vocab: the id of '" + m_key + "' must be an integer in [0, " +
                        std::to_string(kMaxTokenId) + "], found " + found.substr(0, 80));
        badMerge(found.substr(0, 80));
    }
    [[noreturn]] void badMerge(const std::string& found)
    {
        throw Error(m_file.path + ": model.merges[" + std::to_string(m_file.merges.size()) +
                    "]: expected \"a b\" or [\"a\", \"b\"], found " + found);
    }

    TokenizerJsonFile& m_file;
    Dom m_dom;
    Mode m_mode = Mode::None;
    int m_depth = 0;
    int m_captureDepth = 0;
    std::string m_keys[3]; // the current key at depths 1 and 2
    std::string m_key;     // vocabulary: the token whose id comes next
    std::vector<std::string> m_pair;
};

} // namespace

void TokenizerJsonFile::addMerge(std::string_view left, std::string_view right)
{
    merges.push_back({static_cast<std::uint32_t>(mergeText.size()), static_cast<std::uint32_t>(left.size()),
                      static_cast<std::uint32_t>(right.size())});
    mergeText.append(left);
    mergeText.append(right);
}

std::pair<std::string_view, std::string_view> TokenizerJsonFile::merge(std::size_t i) const
{
    const MergeRef& m = merges[i];
    const std::string_view text(mergeText);
    return {text.substr(m.offset, m.leftSize), text.substr(m.offset + m.leftSize, m.rightSize)};
}

TokenizerJsonFile TokenizerJsonFile::read(const std::string& path)
{
    const std::string text = readWholeFile(path, "JSON file", kMaxFileBytes);
    TokenizerJsonFile file;
    file.path = path;
    TokenizerJsonSax sax(file);
    try {
        nlohmann::json::sax_parse(text.begin(), text.end(), &sax);
    } catch (const nlohmann::json::parse_error& e) {
        throw Error(path + ": malformed JSON at byte " + std::to_string(e.byte));
    } catch (const nlohmann::json::out_of_range&) {
        throw Error(path + ": a number is outside the range of a double");
    }
    return file;
}

void TokenizerJsonFile::restore()
{
    if (!json.is_object() || !json.contains("model") || !json.at("model").is_object()) return;
    nlohmann::json& model = json["model"];
    if (vocabTaken) {
        nlohmann::json v = nlohmann::json::object();
        for (const auto& [token, id] : vocab)
            v[token] = id;
        model["vocab"] = std::move(v);
        vocabTaken = false;
    }
    if (mergesTaken) {
        nlohmann::json m = nlohmann::json::array();
        for (std::size_t i = 0; i < merges.size(); ++i) {
            const auto [left, right] = merge(i);
            m.push_back(nlohmann::json::array({std::string(left), std::string(right)}));
        }
        model["merges"] = std::move(m);
        mergesTaken = false;
    }
}

} // namespace outlierlens::tokjson
