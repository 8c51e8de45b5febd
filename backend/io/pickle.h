#pragma once
// Any thread; one Unpickler object belongs to one thread at a time.
//
// A pickle interpreter for the subset torch.save writes for a state dict (protocol 2, plus the
// easy protocol 3/4 opcodes). It never imports or calls anything itself: globals, persistent ids
// and calls are all decided by a PickleHooks object, which allows a fixed list of names.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace outlierlens {

/// One value of an unpickled object graph. Values live in their Unpickler's arena and refer to
/// each other by pointer, so sharing through the memo costs nothing, cycles cannot leak and
/// destroying a deeply nested graph never recurses.
struct PickleValue
{
    enum class Kind { None, Bool, Int, Float, String, Bytes, Tuple, List, Dict, Global, Object };

    Kind kind = Kind::None;
    bool boolValue = false;
    /// Int: the value; Object: a handle that the hooks handed out (e.g. an index into their table).
    std::int64_t intValue = 0;
    double floatValue = 0.0;
    /// String/Bytes: the contents; Global: "module.name"; Object: a type name such as "tensor".
    std::string text;
    /// Tuple, List: the elements.
    std::vector<const PickleValue*> items;
    /// Dict: key/value pairs in insertion order (duplicates are kept; callers decide).
    std::vector<std::pair<const PickleValue*, const PickleValue*>> entries;
};

/// Python-style type name of a value for error messages: "dict", "tuple", "int", or an Object's
/// type name.
std::string pickleTypeName(const PickleValue& value);

/// What the unpickler does not decide itself. Implementations throw Error to refuse.
class PickleHooks
{
public:
    virtual ~PickleHooks() = default;
    /// Whether GLOBAL "module.name" may be loaded; a refused one is an Error
    /// "pickle global module.name is not allowed".
    virtual bool isAllowedGlobal(const std::string& qualifiedName) const = 0;
    /// BINPERSID: the value standing for a persistent id (for torch: a storage reference).
    virtual PickleValue persistentLoad(const PickleValue& pid) = 0;
    /// REDUCE: the result of "calling" the allowed global with its argument tuple.
    virtual PickleValue call(const std::string& qualifiedName, const PickleValue& args) = 0;
};

/// Runs a pickle program held in memory. Errors are one-line Errors that start with `what`
/// (e.g. "model.bin: data.pkl") and give the byte offset of the bad opcode.
class Unpickler
{
public:
    /// `data` must stay valid while load() runs; sizes are in bytes.
    Unpickler(const char* data, std::size_t size, std::string what, PickleHooks& hooks);
    Unpickler(const Unpickler&) = delete;
    Unpickler& operator=(const Unpickler&) = delete;

    /// Interprets the program up to STOP and returns the top-level value. The value and everything
    /// it refers to live as long as this Unpickler. Call once.
    const PickleValue& load();

private:
    PickleValue* make(PickleValue value);
    PickleValue* make(PickleValue::Kind kind);
    void push(PickleValue* value);
    PickleValue* pop();
    PickleValue* top();
    std::vector<PickleValue*> popToMark();
    void setMemo(std::uint64_t index, PickleValue* value);
    PickleValue* getMemo(std::uint64_t index);

    const unsigned char* read(std::size_t n);
    std::uint64_t readUInt(std::size_t n);
    std::string readString(std::size_t n);
    std::string readLine();
    void loadGlobal(const std::string& module, const std::string& name);
    [[noreturn]] void fail(const std::string& message) const;

    const unsigned char* m_data;
    std::size_t m_size;
    std::size_t m_pos = 0;
    std::size_t m_opcodePos = 0;
    std::string m_what;
    PickleHooks& m_hooks;

    std::vector<std::unique_ptr<PickleValue>> m_arena;
    std::vector<PickleValue*> m_stack;
    std::vector<std::size_t> m_marks;
    std::unordered_map<std::uint64_t, PickleValue*> m_memo;
};

} // namespace outlierlens
