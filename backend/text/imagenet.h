#pragma once
// Any thread: plain values.

#include <string>
#include <unordered_map>
#include <vector>

namespace outlierlens {

/// The 1000 ImageNet-1k classes in the standard order timm and Hugging Face checkpoints use.
class ImageNetClasses
{
public:
    /// Reads a class list (one class per line; the first comma-separated synonym is the display
    /// name, as in OpenCV's classification_classes_ILSVRC2012.txt) and, if `indexJsonPath` is not
    /// empty, Keras' imagenet_class_index.json ({"0": ["n01440764", "tench"], ...}) for the WordNet ids.
    static ImageNetClasses fromFiles(const std::string& namesPath, const std::string& indexJsonPath = {});

    /// Display name of 0-based class `index` ("tench", "great white shark").
    const std::string& name(int index) const;
    const std::vector<std::string>& names() const { return m_names; }
    /// 0-based class index of a WordNet id such as "n01440764", or -1.
    int indexOfWnid(const std::string& wnid) const;
    int size() const { return int(m_names.size()); }

private:
    std::vector<std::string> m_names;
    std::unordered_map<std::string, int> m_wnidToIndex;
};

} // namespace outlierlens
