// Result values for anticipated failures: a value or a one-line human-readable message.
#pragma once

#include <cassert>
#include <functional>
#include <string>
#include <utility>
#include <variant>

namespace sl {

struct error {
    std::string message;
    bool cancelled = false;  // the user's progress callback asked to stop; not a failure
};

// Outcome of a long-running call that can be cancelled through its progress callback.
enum class status { ok, cancelled, failed };

template <class T>
class [[nodiscard]] result {
public:
    result(T value) : m_v(std::move(value)) {}            // NOLINT: implicit by design
    result(error e) : m_v(std::move(e)) {}                // NOLINT: implicit by design

    bool ok() const { return std::holds_alternative<T>(m_v); }
    explicit operator bool() const { return ok(); }

    T& value() & { assert(ok()); return std::get<T>(m_v); }
    const T& value() const& { assert(ok()); return std::get<T>(m_v); }
    T&& value() && { assert(ok()); return std::get<T>(std::move(m_v)); }
    T* operator->() { return &value(); }
    const T* operator->() const { return &value(); }
    T& operator*() & { return value(); }

    const std::string& message() const { assert(!ok()); return std::get<error>(m_v).message; }
    // True when the failure is a cancellation requested through a progress callback.
    bool cancelled() const { return !ok() && std::get<error>(m_v).cancelled; }
    const error& err() const { assert(!ok()); return std::get<error>(m_v); }

private:
    std::variant<T, error> m_v;
};

// result<void> equivalent.
class [[nodiscard]] outcome {
public:
    outcome() = default;
    outcome(error e) : m_err(std::move(e.message)), m_failed(true), m_cancelled(e.cancelled) {}  // NOLINT
    static outcome success() { return {}; }
    bool ok() const { return !m_failed; }
    explicit operator bool() const { return ok(); }
    const std::string& message() const { return m_err; }
    bool cancelled() const { return m_cancelled; }
    error err() const { return error{m_err, m_cancelled}; }

private:
    std::string m_err;
    bool m_failed = false;
    bool m_cancelled = false;
};

// Progress callback: fraction in [0, 1]; returning false requests cancellation.
using progress_fn = std::function<bool(float fraction)>;

}  // namespace sl
