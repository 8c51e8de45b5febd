#pragma once
// Stand-in for a header of PyTorch's distributed autograd (RPC) that Debian's libtorch-dev 1.13 does not
// ship, although c10d/reducer.hpp includes it. The reducer only names two things of it: the type of a
// context pointer (a std::shared_ptr, whose layout does not depend on the pointee) and GradCallback,
// whose definition its static_assert pins to exactly this one. Nothing of distributed autograd is used.
// train/CMakeLists.txt puts this folder on the include path only when the real header is missing.

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>

namespace torch::distributed::autograd {

class DistAutogradContext
{
public:
    using GradCallback = std::function<bool(at::Tensor&)>;
};
using ContextPtr = std::shared_ptr<DistAutogradContext>;

} // namespace torch::distributed::autograd
