#pragma once
// The hylens exception family. Every message names what failed and where
// (file, tensor, layer or argument) and what was expected.

#include <sstream>    // std::ostringstream
#include <stdexcept>  // std::runtime_error
#include <string>     // std::string
#include <utility>    // std::forward

namespace hylens {

/// Base of every exception hylens throws.
class Error : public std::runtime_error {
public:
    explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// A file (safetensors, JSON, tokenizer) is malformed, truncated or inconsistent.
class FormatError : public Error {
public:
    using Error::Error;
};

/// config.json is missing a field, has a wrong type, or describes an impossible model.
class ConfigError : public Error {
public:
    using Error::Error;
};

/// A tensor, cache or argument has the wrong shape, length or range.
class ShapeError : public Error {
public:
    using Error::Error;
};

/// The input is well formed but asks for something hylens does not implement.
class UnsupportedError : public Error {
public:
    using Error::Error;
};

namespace detail {
template <class... Args>
std::string concat(Args&&... args) {
    std::ostringstream os;
    (os << ... << std::forward<Args>(args));
    return os.str();
}
}  // namespace detail

/// Throws E with the streamed concatenation of args: fail<ShapeError>("[linear] x has ", n, " columns").
template <class E = Error, class... Args>
[[noreturn]] void fail(Args&&... args) {
    throw E(detail::concat(std::forward<Args>(args)...));
}

/// Checks cond; otherwise throws E with the streamed message.
template <class E = Error, class... Args>
void check(bool cond, Args&&... args) {
    if (!cond) fail<E>(std::forward<Args>(args)...);
}

}  // namespace hylens
