#pragma once
// Any thread may throw or catch these.

#include <stdexcept>
#include <string>

namespace outlierlens {

/// The one exception type the backend throws for bad input: a one-line message that names the
/// file, tensor, field or line and says what was expected and what was found.
class Error : public std::runtime_error
{
public:
    explicit Error(const std::string& message)
        : std::runtime_error(message)
    {}
};

/// Thrown when a long operation stops because its cancel flag was set.
class Cancelled : public Error
{
public:
    Cancelled()
        : Error("cancelled")
    {}
};

} // namespace outlierlens
