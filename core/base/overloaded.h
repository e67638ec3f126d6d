#pragma once

namespace quark {

// A visitor made of lambdas, one per alternative: std::visit(Overloaded{[](const A&) {...}, [](const B&) {...}}, v).
template <typename... Ts>
struct Overloaded : Ts... {
  using Ts::operator()...;
};
template <typename... Ts>
Overloaded(Ts...) -> Overloaded<Ts...>;

}  // namespace quark
