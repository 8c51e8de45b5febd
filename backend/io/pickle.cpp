#include "io/pickle.h"

#include "common/error.h"
#include "common/text_format.h"

#include <cstdio>
#include <cstring>

namespace outlierlens {
namespace {

// Limits for untrusted input. A real state dict needs about 15 values and 2 stack slots per
// tensor, a few marks and memo entries per tensor, and strings of at most a few hundred bytes.
constexpr std::size_t kMaxValues = std::size_t(1) << 20;
constexpr std::size_t kMaxStack = std::size_t(1) << 20;
constexpr std::size_t kMaxMarks = 10000;
constexpr std::size_t kMaxMemo = std::size_t(1) << 20;
constexpr std::size_t kMaxString = std::size_t(64) << 20;
constexpr std::size_t kMaxLine = 1024;

// Opcodes (Python's Lib/pickle.py names).
enum Opcode : unsigned char {
    MARK = '(',
    STOP = '.',
    POP = '0',
    POP_MARK = '1',
    DUP = '2',
    BINFLOAT = 'G',
    BININT = 'J',
    BININT1 = 'K',
    BININT2 = 'M',
    NONE = 'N',
    BINPERSID = 'Q',
    REDUCE = 'R',
    BINSTRING = 'T',
    SHORT_BINSTRING = 'U',
    BINUNICODE = 'X',
    APPEND = 'a',
    BUILD = 'b',
    GLOBAL = 'c',
    DICT = 'd',
    EMPTY_DICT = '}',
    APPENDS = 'e',
    BINGET = 'h',
    LONG_BINGET = 'j',
    LIST = 'l',
    EMPTY_LIST = ']',
    BINPUT = 'q',
    LONG_BINPUT = 'r',
    SETITEM = 's',
    TUPLE = 't',
    EMPTY_TUPLE = ')',
    SETITEMS = 'u',
    PROTO = 0x80,
    TUPLE1 = 0x85,
    TUPLE2 = 0x86,
    TUPLE3 = 0x87,
    NEWTRUE = 0x88,
    NEWFALSE = 0x89,
    LONG1 = 0x8a,
    LONG4 = 0x8b,
    BINBYTES = 'B',
    SHORT_BINBYTES = 'C',
    SHORT_BINUNICODE = 0x8c,
    BINUNICODE8 = 0x8d,
    BINBYTES8 = 0x8e,
    STACK_GLOBAL = 0x93,
    MEMOIZE = 0x94,
    FRAME = 0x95,
};

// Opcodes Python knows that a state dict never needs: named in the error so it is clear that the
// file is a valid pickle of something we do not read.
const char* unsupportedOpcodeName(unsigned char op)
{
    switch (op) {
    case 'I':
        return "INT";
    case 'L':
        return "LONG";
    case 'F':
        return "FLOAT";
    case 'S':
        return "STRING";
    case 'V':
        return "UNICODE";
    case 'P':
        return "PERSID";
    case 'g':
        return "GET";
    case 'p':
        return "PUT";
    case 'i':
        return "INST";
    case 'o':
        return "OBJ";
    case 0x81:
        return "NEWOBJ";
    case 0x82:
        return "EXT1";
    case 0x83:
        return "EXT2";
    case 0x84:
        return "EXT4";
    case 0x8f:
        return "EMPTY_SET";
    case 0x90:
        return "ADDITEMS";
    case 0x91:
        return "FROZENSET";
    case 0x92:
        return "NEWOBJ_EX";
    case 0x96:
        return "BYTEARRAY8";
    case 0x97:
        return "NEXT_BUFFER";
    case 0x98:
        return "READONLY_BUFFER";
    default:
        return nullptr;
    }
}

std::string hexByte(unsigned char c)
{
    char buf[8];
    std::snprintf(buf, sizeof(buf), "0x%02x", c);
    return buf;
}

} // namespace

std::string pickleTypeName(const PickleValue& value)
{
    switch (value.kind) {
    case PickleValue::Kind::None:
        return "None";
    case PickleValue::Kind::Bool:
        return "bool";
    case PickleValue::Kind::Int:
        return "int";
    case PickleValue::Kind::Float:
        return "float";
    case PickleValue::Kind::String:
        return "str";
    case PickleValue::Kind::Bytes:
        return "bytes";
    case PickleValue::Kind::Tuple:
        return "tuple";
    case PickleValue::Kind::List:
        return "list";
    case PickleValue::Kind::Dict:
        return "dict";
    case PickleValue::Kind::Global:
        return "global " + printableText(value.text);
    case PickleValue::Kind::Object:
        return value.text;
    }
    return "unknown";
}

Unpickler::Unpickler(const char* data, std::size_t size, std::string what, PickleHooks& hooks)
    : m_data(reinterpret_cast<const unsigned char*>(data))
    , m_size(size)
    , m_what(std::move(what))
    , m_hooks(hooks)
{}

void Unpickler::fail(const std::string& message) const
{
    throw Error(m_what + ": " + message + " (pickle byte " + std::to_string(m_opcodePos) + ")");
}

PickleValue* Unpickler::make(PickleValue value)
{
    if (m_arena.size() >= kMaxValues) fail("more than " + std::to_string(kMaxValues) + " values");
    m_arena.push_back(std::make_unique<PickleValue>(std::move(value)));
    return m_arena.back().get();
}

PickleValue* Unpickler::make(PickleValue::Kind kind)
{
    PickleValue value;
    value.kind = kind;
    return make(std::move(value));
}

void Unpickler::push(PickleValue* value)
{
    if (m_stack.size() >= kMaxStack) fail("stack deeper than " + std::to_string(kMaxStack));
    m_stack.push_back(value);
}

PickleValue* Unpickler::top()
{
    const std::size_t floor = m_marks.empty() ? 0 : m_marks.back();
    if (m_stack.size() <= floor) fail("stack underflow");
    return m_stack.back();
}

PickleValue* Unpickler::pop()
{
    PickleValue* value = top();
    m_stack.pop_back();
    return value;
}

std::vector<PickleValue*> Unpickler::popToMark()
{
    if (m_marks.empty()) fail("no MARK to pop to");
    const std::size_t mark = m_marks.back();
    m_marks.pop_back();
    std::vector<PickleValue*> items(m_stack.begin() + std::ptrdiff_t(mark), m_stack.end());
    m_stack.resize(mark);
    return items;
}

void Unpickler::setMemo(std::uint64_t index, PickleValue* value)
{
    if (m_memo.size() >= kMaxMemo && m_memo.find(index) == m_memo.end())
        fail("memo larger than " + std::to_string(kMaxMemo) + " entries");
    m_memo[index] = value;
}

PickleValue* Unpickler::getMemo(std::uint64_t index)
{
    const auto it = m_memo.find(index);
    if (it == m_memo.end()) fail("memo index " + std::to_string(index) + " is undefined");
    return it->second;
}

const unsigned char* Unpickler::read(std::size_t n)
{
    if (n > m_size - m_pos)
        fail("truncated: needed " + std::to_string(n) + " more bytes, " + std::to_string(m_size - m_pos) +
             " left");
    const unsigned char* p = m_data + m_pos;
    m_pos += n;
    return p;
}

std::uint64_t Unpickler::readUInt(std::size_t n)
{
    const unsigned char* p = read(n);
    std::uint64_t value = 0;
    for (std::size_t i = 0; i < n; ++i)
        value |= std::uint64_t(p[i]) << (8 * i);
    return value;
}

std::string Unpickler::readString(std::size_t n)
{
    if (n > kMaxString)
        fail("string of " + std::to_string(n) + " bytes is longer than the limit of " +
             std::to_string(kMaxString));
    const unsigned char* p = read(n);
    return std::string(reinterpret_cast<const char*>(p), n);
}

std::string Unpickler::readLine()
{
    std::string line;
    for (;;) {
        const char c = char(*read(1));
        if (c == '\n') return line;
        if (line.size() >= kMaxLine) fail("GLOBAL name longer than " + std::to_string(kMaxLine) + " bytes");
        line.push_back(c);
    }
}

void Unpickler::loadGlobal(const std::string& module, const std::string& name)
{
    const std::string qualified = module + "." + name;
    if (!m_hooks.isAllowedGlobal(qualified))
        fail("pickle global " + printableText(qualified) + " is not allowed");
    PickleValue value;
    value.kind = PickleValue::Kind::Global;
    value.text = qualified;
    push(make(std::move(value)));
}

const PickleValue& Unpickler::load()
{
    using Kind = PickleValue::Kind;
    for (;;) {
        m_opcodePos = m_pos;
        if (m_pos >= m_size) fail("truncated: the pickle ends without STOP");
        const unsigned char op = *read(1);
        switch (op) {
        case PROTO: {
            const unsigned version = *read(1);
            if (version > 5) fail("unsupported pickle protocol " + std::to_string(version));
            break;
        }
        case FRAME:
            read(8);
            break; // framing only groups opcodes; we read from memory anyway
        case STOP: {
            PickleValue* result = pop();
            return *result;
        }
        case MARK:
            if (m_marks.size() >= kMaxMarks) fail("more than " + std::to_string(kMaxMarks) + " nested MARKs");
            m_marks.push_back(m_stack.size());
            break;
        case POP:
            pop();
            break;
        case POP_MARK:
            popToMark();
            break;
        case DUP:
            push(top());
            break;

        case NONE:
            push(make(Kind::None));
            break;
        case NEWTRUE:
        case NEWFALSE: {
            PickleValue v;
            v.kind = Kind::Bool;
            v.boolValue = op == NEWTRUE;
            push(make(std::move(v)));
            break;
        }
        case BININT:
        case BININT1:
        case BININT2: {
            PickleValue v;
            v.kind = Kind::Int;
            if (op == BININT)
                v.intValue = std::int32_t(std::uint32_t(readUInt(4)));
            else
                v.intValue = std::int64_t(readUInt(op == BININT1 ? 1 : 2));
            push(make(std::move(v)));
            break;
        }
        case LONG1:
        case LONG4: {
            const std::uint64_t n = op == LONG1 ? readUInt(1) : readUInt(4);
            if (n > 8) fail("integer of " + std::to_string(n) + " bytes does not fit in 64 bits");
            const unsigned char* p = read(std::size_t(n));
            std::uint64_t bits = 0;
            for (std::size_t i = 0; i < n; ++i)
                bits |= std::uint64_t(p[i]) << (8 * i);
            if (n > 0 && n < 8 && (p[n - 1] & 0x80)) // sign-extend two's complement
                bits |= ~std::uint64_t(0) << (8 * n);
            PickleValue v;
            v.kind = Kind::Int;
            v.intValue = std::int64_t(bits);
            push(make(std::move(v)));
            break;
        }
        case BINFLOAT: {
            const unsigned char* p = read(8);
            std::uint64_t bits = 0;
            for (int i = 0; i < 8; ++i) // big-endian
                bits = (bits << 8) | p[i];
            PickleValue v;
            v.kind = Kind::Float;
            std::memcpy(&v.floatValue, &bits, sizeof(bits));
            push(make(std::move(v)));
            break;
        }
        case BINUNICODE:
        case SHORT_BINUNICODE:
        case BINUNICODE8:
        case BINSTRING:
        case SHORT_BINSTRING:
        case BINBYTES:
        case SHORT_BINBYTES:
        case BINBYTES8: {
            std::uint64_t n = 0;
            if (op == SHORT_BINUNICODE || op == SHORT_BINSTRING || op == SHORT_BINBYTES)
                n = readUInt(1);
            else if (op == BINUNICODE8 || op == BINBYTES8)
                n = readUInt(8);
            else if (op == BINSTRING) {
                const std::int32_t len = std::int32_t(std::uint32_t(readUInt(4)));
                if (len < 0) fail("negative string length");
                n = std::uint64_t(len);
            } else
                n = readUInt(4);
            if (n > kMaxString)
                fail("string of " + std::to_string(n) + " bytes is longer than the limit of " +
                     std::to_string(kMaxString));
            PickleValue v;
            // Python 3 decodes protocol-2 BINSTRINGs as str (ASCII), so they count as strings.
            v.kind = (op == BINBYTES || op == SHORT_BINBYTES || op == BINBYTES8) ? Kind::Bytes : Kind::String;
            v.text = readString(std::size_t(n));
            push(make(std::move(v)));
            break;
        }

        case EMPTY_TUPLE:
            push(make(Kind::Tuple));
            break;
        case TUPLE1:
        case TUPLE2:
        case TUPLE3: {
            const std::size_t n = std::size_t(op - TUPLE1) + 1;
            PickleValue v;
            v.kind = Kind::Tuple;
            v.items.resize(n);
            for (std::size_t i = n; i-- > 0;)
                v.items[i] = pop();
            push(make(std::move(v)));
            break;
        }
        case TUPLE:
        case LIST: {
            const std::vector<PickleValue*> items = popToMark();
            PickleValue v;
            v.kind = op == TUPLE ? Kind::Tuple : Kind::List;
            v.items.assign(items.begin(), items.end());
            push(make(std::move(v)));
            break;
        }
        case EMPTY_LIST:
            push(make(Kind::List));
            break;
        case APPEND:
        case APPENDS: {
            std::vector<PickleValue*> items;
            if (op == APPEND)
                items.push_back(pop());
            else
                items = popToMark();
            PickleValue* list = top();
            if (list->kind != Kind::List) fail("APPEND to a " + pickleTypeName(*list) + ", expected a list");
            list->items.insert(list->items.end(), items.begin(), items.end());
            break;
        }
        case EMPTY_DICT:
            push(make(Kind::Dict));
            break;
        case DICT:
        case SETITEM:
        case SETITEMS: {
            std::vector<PickleValue*> items;
            if (op == SETITEM) {
                PickleValue* value = pop();
                PickleValue* key = pop();
                items = {key, value};
            } else {
                items = popToMark();
            }
            if (items.size() % 2 != 0) fail("odd number of items for a dict");
            PickleValue* dict = op == DICT ? make(Kind::Dict) : top();
            if (dict->kind != Kind::Dict) fail("SETITEM on a " + pickleTypeName(*dict) + ", expected a dict");
            for (std::size_t i = 0; i < items.size(); i += 2)
                dict->entries.emplace_back(items[i], items[i + 1]);
            if (op == DICT) push(dict);
            break;
        }

        case BINPUT:
            setMemo(readUInt(1), top());
            break;
        case LONG_BINPUT:
            setMemo(readUInt(4), top());
            break;
        case MEMOIZE:
            setMemo(m_memo.size(), top());
            break;
        case BINGET:
            push(getMemo(readUInt(1)));
            break;
        case LONG_BINGET:
            push(getMemo(readUInt(4)));
            break;

        case GLOBAL: {
            const std::string module = readLine();
            const std::string name = readLine();
            loadGlobal(module, name);
            break;
        }
        case STACK_GLOBAL: {
            const PickleValue* name = pop();
            const PickleValue* module = pop();
            if (module->kind != Kind::String || name->kind != Kind::String)
                fail("STACK_GLOBAL needs two strings");
            loadGlobal(module->text, name->text);
            break;
        }
        case BINPERSID: {
            const PickleValue* pid = pop();
            push(make(m_hooks.persistentLoad(*pid)));
            break;
        }
        case REDUCE: {
            const PickleValue* args = pop();
            const PickleValue* callable = pop();
            if (callable->kind != Kind::Global)
                fail("REDUCE calls a " + pickleTypeName(*callable) + ", expected an allowed global");
            if (args->kind != Kind::Tuple)
                fail("REDUCE arguments are a " + pickleTypeName(*args) + ", expected a tuple");
            push(make(m_hooks.call(callable->text, *args)));
            break;
        }
        case BUILD:
            // Object state (an OrderedDict's _metadata, a tensor's Python attributes) is not
            // needed for the weights: drop it, leaving the object as it is.
            pop();
            top();
            break;

        default:
            if (const char* name = unsupportedOpcodeName(op))
                fail(std::string("unsupported pickle opcode ") + name + " (" + hexByte(op) + ")");
            fail("unknown pickle opcode " + hexByte(op));
        }
    }
}

} // namespace outlierlens
